import assert from "node:assert/strict";
import { fixture, parsed } from "./_testing.ts";
import { cpuSeconds } from "./ps.ts";

Deno.test("ps aux (real, procps-ng 4) types every column and keeps commands with spaces", () => {
  const { parsed: p, warnings } = parsed("process_list", ["ps aux"], fixture("ps_aux.txt"));
  assert.equal(warnings, undefined);
  assert.deepEqual(p.columns, [
    "USER",
    "PID",
    "%CPU",
    "%MEM",
    "VSZ",
    "RSS",
    "TTY",
    "STAT",
    "START",
    "TIME",
    "COMMAND",
  ]);
  const init = p.processes.find((x) => x.pid === 2)!;
  assert.deepEqual([init.command, init.kernel_thread], ["[kthreadd]", true]);
  const w = p.processes.find((x) => x.command?.startsWith("fixture worker"))!;
  assert.equal(w.command, "fixture worker --label=a b c 120");
  assert.equal(typeof w.rss_kib, "number");
  assert.equal(w.user, "root");
});

Deno.test("ps -ef (real) gives ppid, C, STIME and cpu seconds", () => {
  const { parsed: p } = parsed("process_list", ["ps", "-ef"], fixture("ps_ef.txt"));
  const w = p.processes.find((x) => x.command?.startsWith("fixture worker"))!;
  assert.equal(typeof w.ppid, "number");
  assert.equal(w.cpu, 0);
  assert.equal(w.cpu_time_seconds, 0);
});

Deno.test("ps from procps 3.3 (hand-made): truncated users, year starts, long times", () => {
  const aux = parsed("process_list", ["ps aux"], fixture("ps_aux_procps33.handmade.txt")).parsed;
  const pg = aux.processes.find((x) => x.pid === 1201)!;
  assert.deepEqual([pg.start, pg.time, pg.cpu_time_seconds], ["2023", "1234:56", 1234 * 60 + 56]);
  assert.equal(aux.processes.find((x) => x.pid === 612)!.user, "systemd+");
  assert.equal(
    aux.processes.find((x) => x.pid === 3100)!.command,
    "python3 train.py --epochs 10 --name my run",
  );
  const ef = parsed("process_list", ["ps -ef"], fixture("ps_ef_procps33.handmade.txt")).parsed;
  assert.equal(
    ef.processes.find((x) => x.pid === 3200)!.cpu_time_seconds,
    86400 + 2 * 3600 + 3 * 60 + 4,
  );
});

Deno.test("ps -eo with custom columns keeps unknown ones in extra", () => {
  const { parsed: p } = parsed(
    "process_list",
    ["ps -eo pid,ppid,user,stat,etime,cmd"],
    fixture("ps_eo_custom.txt"),
  );
  assert.deepEqual(p.columns, ["PID", "PPID", "USER", "STAT", "ELAPSED", "CMD"]);
  assert.equal(typeof p.processes[0]!.elapsed, "string");
});

Deno.test("ps: a line with a non-numeric PID is flagged", () => {
  const r = parsed("process_list", ["ps aux"], "USER PID COMMAND\nroot 1 init\nroot x bad\n");
  assert.equal(r.parsed.processes.length, 1);
  assert.deepEqual(r.warnings?.[0]?.lines, [3]);
});

Deno.test("cpuSeconds reads the TIME forms", () => {
  assert.equal(cpuSeconds("0:42"), 42);
  assert.equal(cpuSeconds("00:01:02"), 62);
  assert.equal(cpuSeconds("2-00:00:01"), 172801);
  assert.equal(cpuSeconds("abc"), undefined);
});
