import assert from "node:assert/strict";
import { preloadNative, readProcFile } from "../pty/mod.ts";
import { ExecTrace, mayTrace, traceHoldWanted, type TraceStop } from "./exec_trace.ts";

const isRoot = Deno.build.os === "linux" && Deno.uid() === 0;
preloadNative();

/**
 * Runs `script` under an outer sh that starts it in the background, prints its pid and waits
 * for it: the traced process is the outer sh's child, never this test's (as in the gate, where
 * the daemon's own children are not traced). Resolves the outer sh's exit once it ends.
 */
async function grandchild(script: string) {
  const outer = new Deno.Command("sh", {
    args: ["-c", `sh -c '${script}' & echo $!; wait $!; echo "status $?"`],
    stdout: "piped",
    stderr: "null",
  }).spawn();
  const reader = outer.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  while (!text.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) break;
    text += value;
  }
  const pid = Number(text.split("\n")[0]);
  const rest = (async () => {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return text;
      text += value;
    }
  })();
  return { pid, outer, rest };
}

async function until(trace: ExecTrace, ms = 5_000): Promise<TraceStop> {
  const deadline = performance.now() + ms;
  for (;;) {
    const st = trace.poll();
    if (st.kind !== "running") return st;
    if (performance.now() > deadline) throw new Error("the traced process never stopped");
    await new Promise((r) => setTimeout(r, 2));
  }
}

/** A grandchild running `script`, given a moment to get there, then seized and stopped. */
async function heldAtInterrupt(script: string) {
  const g = await grandchild(script);
  await new Promise((r) => setTimeout(r, 100)); // let it exec its program
  const t = ExecTrace.seize(g.pid);
  assert.ok(t, "seized");
  t.interrupt();
  return { g, t, stop: await until(t) };
}

/** Detaches `t` and checks its process runs on (asleep in its sleep, not stopped), then ends it. */
async function detachedRunsOn(t: ExecTrace, g: Awaited<ReturnType<typeof grandchild>>) {
  t.detach();
  await new Promise((r) => setTimeout(r, 50));
  const state = /^State:\s+(\S)/m.exec(readProcFile(`/proc/${g.pid}/status`) ?? "")?.[1];
  assert.equal(state, "S", "running after the detach, not left stopped");
  Deno.kill(g.pid, "SIGTERM");
  assert.match(await g.rest, /status 143/);
  await g.outer.status;
}

Deno.test({
  name: "exec trace: a seized process stops at the interrupt, is let go and keeps running",
  ignore: !isRoot,
  async fn() {
    // Root has CAP_SYS_PTRACE: on unless the environment asks for the freezer.
    assert.equal(mayTrace(), traceHoldWanted(Deno.env.get("TERMADA_EXEC_HOLD")));
    const { g, t, stop } = await heldAtInterrupt("exec sleep 30");
    assert.deepEqual(stop, { kind: "stopped", execd: false, signal: 0 });
    await detachedRunsOn(t, g);
  },
});

Deno.test({
  name: "exec trace: an exec after the seize stops at its event, before the new image runs",
  ignore: !isRoot,
  async fn() {
    // It waits on a FIFO (no child of its own, whose SIGCHLD would stop it first), then execs.
    const dir = await Deno.makeTempDir();
    const fifo = `${dir}/go`;
    await new Deno.Command("mkfifo", { args: [fifo] }).output();
    const g = await grandchild(`read x < ${fifo}; exec sleep 31`);
    await new Promise((r) => setTimeout(r, 100));
    const t = ExecTrace.seize(g.pid);
    assert.ok(t);
    await Deno.writeTextFile(fifo, "go\n");
    const st = await until(t);
    await Deno.remove(dir, { recursive: true });
    assert.deepEqual(st, { kind: "stopped", execd: true, signal: 0 });
    const cmdline = readProcFile(`/proc/${g.pid}/cmdline`);
    assert.equal(cmdline, "sleep\x0031\x00", "already the new image, held before it ran");
    await detachedRunsOn(t, g);
  },
});

Deno.test({
  name: "exec trace: a killed traced process is reaped, so its parent sees it end",
  ignore: !isRoot,
  async fn() {
    const { g, t } = await heldAtInterrupt("exec sleep 32");
    t.kill();
    // The outer sh's wait returns: 128 + SIGKILL.
    assert.match(await g.rest, /status 137/);
    await g.outer.status;
    assert.equal(t.poll().kind, "gone");
  },
});

Deno.test({
  name:
    "exec trace: a process traced already (strace, gdb) cannot be seized: the caller falls back",
  ignore: !isRoot,
  async fn() {
    const { g, t } = await heldAtInterrupt("exec sleep 33");
    assert.equal(ExecTrace.seize(g.pid), undefined);
    await detachedRunsOn(t, g);
  },
});

Deno.test({
  name: "exec trace: a signal that arrives while held is handed back on detach",
  ignore: !isRoot,
  async fn() {
    const g = await grandchild("exec sleep 34");
    await new Promise((r) => setTimeout(r, 100));
    const t = ExecTrace.seize(g.pid);
    assert.ok(t);
    Deno.kill(g.pid, "SIGUSR1");
    const st = await until(t);
    assert.equal(st.kind, "stopped");
    assert.ok(st.kind === "stopped" && !st.execd && st.signal === 10, JSON.stringify(st));
    t.detach(st.kind === "stopped" ? st.signal : 0);
    const out = await g.rest;
    // SIGUSR1's default action ended it: the signal was delivered, not swallowed.
    assert.match(out, /status 138/, out);
    await g.outer.status;
  },
});

Deno.test("exec trace: TERMADA_EXEC_HOLD=freezer turns the ptrace hold off", () => {
  assert.equal(traceHoldWanted("freezer"), false);
  assert.equal(traceHoldWanted(undefined), true);
  assert.equal(traceHoldWanted(""), true);
});
