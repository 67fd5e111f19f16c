/**
 * Black-box: approvals asked in the agent's own MCP client (elicitation) — the real SDK client
 * declares the capability and answers; the first answer wins, it is audited as the client's,
 * and it never counts where the policy needs more than one plain approval.
 */
import assert from "node:assert/strict";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { call, homeWithConfig, startDaemon, stdioClient, termada } from "./_daemon.ts";

type Answer = { action: "accept" | "decline" | "cancel"; content?: Record<string, unknown> };

function config(elicitation: boolean, approval = ""): string {
  return `approvals:
  elicitation: ${elicitation}
policies:
  default:
    confirm: ["touch *"]
${approval}`;
}

async function clientAnswering(home: string, answer: () => Answer, asked: string[]) {
  return await stdioClient(home, ["--agent", "ci"], {}, {
    capabilities: { elicitation: {} },
    setup: (c) =>
      c.setRequestHandler(
        ElicitRequestSchema,
        ((req: { params: { message?: string } }) => {
          asked.push(String(req.params.message));
          return answer();
        }) as never,
      ),
  });
}

async function finished(c: Awaited<ReturnType<typeof stdioClient>>, job: string) {
  return await call(c, "exec_wait", { job_id: job, until: { exit: true }, timeout_ms: 15_000 });
}

Deno.test("an approval answered in the agent's own client runs the command once, audited as the client's", async () => {
  const home = await homeWithConfig(config(true));
  try {
    await using _d = await startDaemon(home);
    const asked: string[] = [];
    await using c = await clientAnswering(home, () => ({
      action: "accept",
      content: { decision: "approve", reason: "looks fine" },
    }), asked);
    // Outside the state directory (sessions cannot reach that).
    const file = await Deno.makeTempFile({ prefix: "termada-elicited-" });
    await Deno.remove(file);
    const r = await call(c, "exec_run", { command: [`touch ${file}`], timeout_ms: 0 });
    assert.equal(r.status, "pending_approval");
    const done = await finished(c, String(r.job_id));
    assert.equal(done.status, "exited", JSON.stringify(done));
    assert.equal(asked.length, 1);
    assert.match(asked[0]!, /touch/);
    await Deno.stat(file);
    await Deno.remove(file);
    const audit = JSON.parse((await termada(home, ["audit", "-n", "100", "--json"])).stdout) as {
      event: string;
      actor: { id: string };
      data: Record<string, unknown>;
    }[];
    const vote = audit.find((x) => x.event === "approval.vote");
    assert.equal(vote?.data.via, "elicitation");
    assert.equal(vote?.actor.id, "client:ci");
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("a decline in the client denies; off by default and never for a quorum", async (t) => {
  await t.step("decline denies", async () => {
    const home = await homeWithConfig(config(true));
    try {
      await using _d = await startDaemon(home);
      await using c = await clientAnswering(home, () => ({ action: "decline" }), []);
      const r = await call(c, "exec_run", { command: ["touch /tmp/termada-no"], timeout_ms: 0 });
      const done = await finished(c, String(r.job_id));
      assert.equal(done.status, "denied", JSON.stringify(done));
    } finally {
      await Deno.remove(home, { recursive: true });
    }
  });
  for (
    const [name, cfg] of [
      ["off by default", config(false)],
      ["a 2-of-n quorum", config(true, "    approval: { quorum: 2 }\n")],
    ] as const
  ) {
    await t.step(`${name}: the client is not asked`, async () => {
      const home = await homeWithConfig(cfg);
      try {
        await using _d = await startDaemon(home);
        const asked: string[] = [];
        await using c = await clientAnswering(home, () => ({
          action: "accept",
          content: { decision: "approve" },
        }), asked);
        const r = await call(c, "exec_run", { command: ["touch /tmp/termada-no"], timeout_ms: 0 });
        assert.equal(r.status, "pending_approval");
        await new Promise((ok) => setTimeout(ok, 500));
        assert.deepEqual(asked, []);
        const p = await call(c, "exec_poll", { job_id: r.job_id });
        assert.equal(p.status, "pending_approval");
        await call(c, "exec_kill", { job_id: r.job_id });
      } finally {
        await Deno.remove(home, { recursive: true });
      }
    });
  }
});
