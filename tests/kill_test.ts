/**
 * Black-box tests of "kill means gone": process trees built to escape a naive kill (`&`,
 * subshells, ignored signals, `setsid`, `nohup`, double forks, a process that re-forks when it is
 * signalled) are started in a real daemon — as a session's job and as background jobs — and then
 * ended by `exec_kill`, `session_close` and the operator's stop-all. Afterwards not one of those
 * processes may remain (found by a unique number in their argv, scanning /proc) and the result
 * says `survivors: []`.
 */
import assert from "node:assert/strict";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { call, homeWithConfig, operatorFetch, startDaemon, stdioClient } from "./_daemon.ts";
import { allPids, procStat, readProcFile } from "../src/pty/mod.ts";

const CONFIG = "log:\n  level: warn\n";
/** Between INT, TERM and KILL: short, the trees are built to outlast the first two anyway. */
const GRACE_MS = 300;

/** Every live (not zombie) process whose argv names one of `markers` as a whole word. */
function markerProcesses(markers: readonly number[]): { pid: number; cmdline: string }[] {
  const words = new RegExp(`(^|[^0-9])(${markers.join("|")})([^0-9]|$)`);
  const out: { pid: number; cmdline: string }[] = [];
  for (const pid of allPids()) {
    if (pid === Deno.pid) continue;
    const raw = readProcFile(`/proc/${pid}/cmdline`);
    if (!raw) continue;
    const cmdline = raw.replace(/\0+$/, "").replaceAll("\0", " ");
    if (!words.test(cmdline)) continue;
    const st = procStat(pid);
    if (!st || st.state === "Z") continue;
    out.push({ pid, cmdline });
  }
  return out;
}

function argvOf(pid: number): string[] {
  return (readProcFile(`/proc/${pid}/cmdline`) ?? "").replace(/\0$/, "").split("\0");
}

/** Polls until `ready()` holds, failing with `what()` after `ms`. */
async function until(ready: () => boolean, what: () => string, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!ready()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms: ${what()}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** SIGKILLs whatever carries our markers, so a failing case does not leak processes. */
function killLeftovers(markers: readonly number[]): void {
  for (const p of markerProcesses(markers)) {
    try {
      Deno.kill(p.pid, "SIGKILL");
    } catch {
      // already gone
    }
  }
}

/**
 * One command line holding every escape shape, each with its own number in its argv: `base+1`
 * `&`, `+2` a subshell, `+3` ignores INT and TERM, `+4` setsid, `+5` nohup, `+6` a double fork,
 * `+7` a loop that starts a new `sleep base+8` on INT and TERM. `wait` keeps the job running.
 */
function escapeTree(
  base: number,
): { line: string; loop: string; initial: number[]; all: number[] } {
  const n = (k: number) => base + k;
  const loop = `trap "sleep ${n(8)} &" INT TERM; while :; do sleep 0.1; done; : ${n(7)}`;
  const line = [
    `sleep ${n(1)} &`,
    `(sleep ${n(2)}; :) &`,
    `(trap '' INT TERM; sleep ${n(3)}; :) &`,
    `setsid sleep ${n(4)} &`,
    `nohup sleep ${n(5)} >/dev/null 2>&1 &`,
    `( (sleep ${n(6)} &) & );`,
    `bash -c '${loop}' &`,
    `wait`,
  ].join(" ");
  return {
    line,
    loop,
    initial: [1, 2, 3, 4, 5, 6].map(n),
    all: [1, 2, 3, 4, 5, 6, 7, 8].map(n),
  };
}

/** Resolves once every shape of `tree` runs (each sleep exec'd, the loop's bash up). */
async function treeRunning(tree: ReturnType<typeof escapeTree>): Promise<void> {
  const missing = () => {
    const procs = markerProcesses(tree.all).map((p) => argvOf(p.pid));
    const sleeps = tree.initial.filter((m) =>
      !procs.some((a) => a.length === 2 && a[0] === "sleep" && a[1] === String(m))
    );
    const loop = procs.some((a) => a[0] === "bash" && a[1] === "-c" && a[2] === tree.loop);
    return [...sleeps.map(String), ...(loop ? [] : ["the re-forking loop"])];
  };
  await until(() => missing().length === 0, () => `not running: ${missing().join(", ")}`);
}

/** Asserts that nothing of `markers` is left; says for how long a survivor lingered. */
async function assertGone(markers: readonly number[], after: string): Promise<void> {
  const left = markerProcesses(markers);
  if (left.length === 0) return;
  const t0 = Date.now();
  while (Date.now() - t0 < 3000 && markerProcesses(markers).length > 0) {
    await new Promise((r) => setTimeout(r, 50));
  }
  const still = markerProcesses(markers);
  assert.fail(
    `${left.length} processes left after ${after}: ` +
      left.map((p) => `${p.pid} "${p.cmdline.slice(0, 120)}"`).join("; ") +
      (still.length === 0
        ? " (gone within 3 s after it returned)"
        : ` (${still.length} after 3 s)`),
  );
}

async function jobResult(c: Client, jobId: string): Promise<Record<string, unknown>> {
  return await call(c, "exec_poll", { job_id: jobId });
}

/** A daemon and an MCP client for one test; `run(c, d)` inside, markers cleaned in finally. */
async function withDaemon(
  markers: readonly number[],
  run: (c: Client, d: Awaited<ReturnType<typeof startDaemon>>) => Promise<void>,
): Promise<void> {
  const home = await homeWithConfig(CONFIG);
  try {
    await using d = await startDaemon(home);
    await using c = await stdioClient(home, ["--agent", "dev"]);
    await run(c, d);
  } finally {
    killLeftovers(markers);
    await Deno.remove(home, { recursive: true });
  }
}

async function startSessionJob(c: Client, line: string): Promise<{ sid: string; job: string }> {
  const sid = (await call(c, "session_create", {})).session_id as string;
  const s = await call(c, "exec_start", { session_id: sid, command: [line] });
  assert.equal(s.status, "running", JSON.stringify(s));
  return { sid, job: s.job_id as string };
}

async function startBackgroundJob(c: Client, line: string): Promise<string> {
  const s = await call(c, "exec_start", { command: [line], mode: "background" });
  assert.equal(s.status, "running", JSON.stringify(s));
  return s.job_id as string;
}

const BASES = {
  killSession: 31010,
  killBackground: 31020,
  closeSession: 31030,
  stopSession: 31040,
  stopBackground: 31050,
};
const ENDED_SESSION = 31009;
const ENDED_BACKGROUND = 31069;
/** What a leftover double-forks after its job ended, and what a trap starts with setsid. */
const LEFTOVER_FORK = 31079;
const TRAP_SETSID = 31089;
/** What a setsid leftover starts with setsid again, after its job ended. */
const SETSID_LOOP = 31099;
const SETSID_LATE = 31109;

Deno.test("exec_kill ends a job's whole process tree, escapers included", async (t) => {
  const session = escapeTree(BASES.killSession);
  const background = escapeTree(BASES.killBackground);
  await withDaemon([...session.all, ...background.all], async (c) => {
    await t.step("a session's job", async () => {
      const { sid, job } = await startSessionJob(c, session.line);
      await treeRunning(session);
      const r = await call(c, "exec_kill", { job_id: job, grace_ms: GRACE_MS });
      await assertGone(session.all, "exec_kill");
      assert.equal(r.status, "killed", JSON.stringify(r));
      assert.deepEqual(r.survivors, []);
      // The job is gone, its session is not.
      const next = await call(c, "exec_run", { session_id: sid, command: ["echo still-here"] });
      assert.equal(next.output, "still-here\n", JSON.stringify(next));
    });
    await t.step("a background job", async () => {
      const job = await startBackgroundJob(c, background.line);
      await treeRunning(background);
      const r = await call(c, "exec_kill", { job_id: job, grace_ms: GRACE_MS });
      await assertGone(background.all, "exec_kill");
      assert.equal(r.status, "killed", JSON.stringify(r));
      assert.deepEqual(r.survivors, []);
    });
  });
});

Deno.test("session_close ends its running job's whole process tree", async () => {
  const tree = escapeTree(BASES.closeSession);
  await withDaemon(tree.all, async (c) => {
    const { sid, job } = await startSessionJob(c, tree.line);
    await treeRunning(tree);
    const closed = await call(c, "session_close", { session_id: sid });
    assert.equal(closed.ok, true, JSON.stringify(closed));
    await assertGone(tree.all, "session_close");
    const r = await jobResult(c, job);
    assert.equal(r.status, "killed", JSON.stringify(r));
    assert.deepEqual(r.survivors, [], "the job session_close killed says survivors: []");
  });
});

Deno.test("operator stop-all ends every running job's whole process tree", async (t) => {
  const session = escapeTree(BASES.stopSession);
  const background = escapeTree(BASES.stopBackground);
  await withDaemon([...session.all, ...background.all], async (c, d) => {
    const op = operatorFetch(d);
    const stopAll = async (): Promise<string[]> => {
      const res = await op("/stop", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ grace_ms: GRACE_MS, barrier_ms: 60_000 }),
      });
      const body = await res.json();
      assert.equal(res.status, 200, JSON.stringify(body));
      const resumed = await op("/resume", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: "{}",
      });
      assert.equal(resumed.status, 200);
      await resumed.body?.cancel();
      return body.stopped_jobs as string[];
    };
    await t.step("a session's job", async () => {
      const { job } = await startSessionJob(c, session.line);
      await treeRunning(session);
      const stopped = await stopAll();
      await assertGone(session.all, "stop-all");
      assert.ok(stopped.includes(job), `${job} not in ${JSON.stringify(stopped)}`);
      const r = await jobResult(c, job);
      assert.equal(r.status, "killed", JSON.stringify(r));
      assert.deepEqual(r.survivors, []);
    });
    await t.step("a background job", async () => {
      const job = await startBackgroundJob(c, background.line);
      await treeRunning(background);
      const stopped = await stopAll();
      await assertGone(background.all, "stop-all");
      assert.ok(stopped.includes(job), `${job} not in ${JSON.stringify(stopped)}`);
      const r = await jobResult(c, job);
      assert.equal(r.status, "killed", JSON.stringify(r));
      assert.deepEqual(r.survivors, []);
    });
  });
});

/**
 * Runs `line` (it leaves processes carrying `marker` running) in a new session, waits for
 * `atLeast` of them, kills the ended job and checks none is left and none is reported.
 */
async function endedJobLeftovers(
  c: Client,
  line: string,
  marker: number,
  atLeast: number,
): Promise<Record<string, unknown>> {
  const sid = (await call(c, "session_create", {})).session_id as string;
  const r = await call(c, "exec_run", { session_id: sid, command: [line], timeout_ms: 10_000 });
  assert.equal(r.status, "exited", JSON.stringify(r));
  await until(() => markerProcesses([marker]).length >= atLeast, () => "no leftovers yet");
  const k = await call(c, "exec_kill", { job_id: r.job_id, grace_ms: GRACE_MS });
  await assertGone([marker], "exec_kill of the ended job");
  assert.deepEqual(k.survivors, [], JSON.stringify(k));
  return k;
}

Deno.test("exec_kill ends what a job's leftovers spawn after it ended, and what its traps start while it is killed", async (t) => {
  await withDaemon([LEFTOVER_FORK, TRAP_SETSID, SETSID_LOOP, SETSID_LATE], async (c) => {
    await t.step("a nohup loop that double-forks after the job ended", async () => {
      // Forked after the job's end by a subshell that exits at once: re-parented, not a
      // descendant of anything the job started.
      const k = await endedJobLeftovers(
        c,
        `nohup bash -c 'while :; do (sleep ${LEFTOVER_FORK} &); sleep 0.2; done' >/dev/null 2>&1 &`,
        LEFTOVER_FORK,
        3,
      );
      await new Promise((res) => setTimeout(res, 600)); // the loop is gone: nothing new comes
      assert.deepEqual(markerProcesses([LEFTOVER_FORK]), [], JSON.stringify(k));
    });
    await t.step("a setsid loop whose children setsid again, after the job ended", async () => {
      // New sessions and groups, parents gone: only the job's cgroup still holds them.
      await endedJobLeftovers(
        c,
        `nohup setsid bash -c 'while :; do (setsid sleep ${SETSID_LOOP} &); sleep 0.2; done' >/dev/null 2>&1 &`,
        SETSID_LOOP,
        3,
      );
      await new Promise((res) => setTimeout(res, 600));
      assert.deepEqual(markerProcesses([SETSID_LOOP]), [], "the loop is gone too");
    });
    await t.step("a setsid process started late by a leftover, killed at once", async () => {
      const k = await endedJobLeftovers(
        c,
        `setsid bash -c 'sleep 1; setsid sleep ${SETSID_LATE}' >/dev/null 2>&1 &`,
        SETSID_LATE,
        1,
      );
      assert.deepEqual(k.left_running ?? [], [], JSON.stringify(k));
    });
    await t.step("a trap that starts a setsid process when the job is signalled", async () => {
      const { job } = await startSessionJob(
        c,
        `bash -c 'trap "setsid sleep ${TRAP_SETSID} & exit" INT TERM HUP; while :; do sleep 0.1; done' & sleep 1000`,
      );
      await new Promise((res) => setTimeout(res, 300));
      const k = await call(c, "exec_kill", { job_id: job, grace_ms: GRACE_MS });
      await assertGone([TRAP_SETSID], "exec_kill of the trapping job");
      assert.deepEqual(k.survivors ?? [], [], JSON.stringify(k));
    });
  });
});

Deno.test("exec_kill on a job that ended ends the children it left running", async (t) => {
  await withDaemon([ENDED_SESSION, ENDED_BACKGROUND], async (c) => {
    const sleeping = (m: number) =>
      markerProcesses([m]).some((p) => {
        const a = argvOf(p.pid);
        return a[0] === "sleep" && a[1] === String(m);
      });
    await t.step("in a session", async () => {
      const sid = (await call(c, "session_create", {})).session_id as string;
      const r = await call(c, "exec_run", {
        session_id: sid,
        command: [`nohup sleep ${ENDED_SESSION} >/dev/null 2>&1 &`],
        timeout_ms: 10_000,
      });
      assert.equal(r.status, "exited", JSON.stringify(r));
      await until(() => sleeping(ENDED_SESSION), () => `sleep ${ENDED_SESSION} not running`);
      // Shown as the ended job's own.
      const seen = await call(c, "exec_poll", { job_id: r.job_id });
      const left = (seen.left_running ?? []) as number[];
      assert.ok(left.some((pid) => argvOf(pid)[1] === String(ENDED_SESSION)), JSON.stringify(seen));
      const k = await call(c, "exec_kill", { job_id: r.job_id, grace_ms: GRACE_MS });
      await assertGone([ENDED_SESSION], "exec_kill of the ended job");
      assert.deepEqual(k.survivors, []);
    });
    await t.step("a background job (its leftovers may already be gone when it ends)", async () => {
      const job = await startBackgroundJob(
        c,
        `nohup sleep ${ENDED_BACKGROUND} >/dev/null 2>&1 &`,
      );
      const w = await call(c, "exec_wait", { job_id: job, timeout_ms: 10_000 });
      assert.equal(w.status, "exited", JSON.stringify(w));
      // The one-shot's shell forked the sleep before it exited, so whatever carries the marker
      // now is that job's leftover (as `bash -c …` or as `sleep`); none may outlive the kill.
      const k = await call(c, "exec_kill", { job_id: job, grace_ms: GRACE_MS });
      await assertGone([ENDED_BACKGROUND], "exec_kill of the ended job");
      assert.deepEqual(k.survivors, [], "a kill result says survivors: [] even when none was left");
    });
  });
});
