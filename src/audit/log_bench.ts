/**
 * Audit throughput: `deno bench -P=bench src/audit/log_bench.ts`. Each iteration is a batch of
 * appends (see the names); appends/s = batch size / time per iteration.
 */
import { AuditLog } from "./log.ts";
import { verifyAudit } from "./verify.ts";

const AGENT = { kind: "agent", id: "agent-1" } as const;
const DATA = {
  job_id: "job_0123456789ab",
  session_id: "ses_0123456789ab",
  command: ["git", "commit", "-m", "a typical command line"],
  cwd: "/home/dev/project",
  mode: "session",
};

function benchAppends(name: string, batch: number, fsync: boolean): void {
  Deno.bench(`${name} (${batch} appends)`, { group: "append" }, (b) => {
    const root = Deno.makeTempDirSync({ prefix: "termada-audit-bench-" });
    try {
      using log = AuditLog.open(`${root}/audit`, { fsync });
      b.start();
      for (let i = 0; i < batch; i++) log.append(AGENT, "job.requested", DATA);
      b.end();
    } finally {
      Deno.removeSync(root, { recursive: true });
    }
  });
}

benchAppends("append with fsync", 200, true);
benchAppends("append without fsync", 2000, false);

Deno.bench("open + verify of a full 8 MiB segment", { group: "read" }, (b) => {
  const root = Deno.makeTempDirSync({ prefix: "termada-audit-bench-" });
  try {
    const dir = `${root}/audit`;
    {
      using log = AuditLog.open(dir, { fsync: false });
      while (log.lastSeq < 30_000) log.append(AGENT, "job.requested", DATA);
    }
    b.start();
    AuditLog.open(dir).close();
    verifyAudit(dir);
    b.end();
  } finally {
    Deno.removeSync(root, { recursive: true });
  }
});
