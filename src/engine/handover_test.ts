import assert from "node:assert/strict";
import { procStat } from "../pty/mod.ts";
import { type HandoverTerminal, signalProgram } from "./handover.ts";

procStat(Deno.pid); // libc is loaded once for the whole file, not inside a test

/**
 * Real processes stand in for the shell and its forked child: a child before its execve has
 * the shell's image (same name and argv), so two `sleep` processes with one argv are a shell
 * and its not-yet-exec'd child, and one with another argv is the child after the exec.
 */
function proc(arg: string): Deno.ChildProcess {
  return new Deno.Command("sleep", { args: [arg], stdout: "null", stderr: "null" }).spawn();
}

function terminal(shell: Deno.ChildProcess): HandoverTerminal & { fg: number; sent: number[] } {
  return {
    pid: shell.pid,
    fg: shell.pid,
    sent: [] as number[],
    foregroundPgid() {
      return this.fg;
    },
    signal() {
      this.sent.push(this.fg);
      return true;
    },
  };
}

async function until(cond: () => boolean, ms = 3000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 5));
  }
}

interface Procs {
  shell: Deno.ChildProcess;
  forked: Deno.ChildProcess;
  execd: Deno.ChildProcess;
}

async function withProcs(fn: (p: Procs) => Promise<void>) {
  const p = { shell: proc("97"), forked: proc("97"), execd: proc("98") };
  try {
    await fn(p);
  } finally {
    for (const c of Object.values(p)) {
      c.kill("SIGKILL");
      await c.status;
    }
  }
}

Deno.test("signalProgram: a program that holds the terminal is signalled at once", async () => {
  await withProcs(async ({ shell, execd }) => {
    const t = terminal(shell);
    t.fg = execd.pid;
    const job = { startedAt: Date.now(), live: () => true, started: () => true };
    assert.equal(signalProgram(t, job, "INT"), true);
    assert.deepEqual(t.sent, [execd.pid]);
  });
});

Deno.test("signalProgram: a child still running the shell's code is signalled after its exec", async () => {
  await withProcs(async ({ shell, forked, execd }) => {
    const t = terminal(shell);
    t.fg = forked.pid; // handed over, not exec'd
    let live = true;
    const job = { startedAt: Date.now(), live: () => live, started: () => true };
    signalProgram(t, job, "INT");
    await new Promise((r) => setTimeout(r, 100));
    assert.deepEqual(t.sent, [], "nothing sent while the child runs the shell's code");
    t.fg = execd.pid; // the exec happened
    await until(() => t.sent.length > 0);
    assert.deepEqual(t.sent, [execd.pid]);
    live = false;
  });
});

Deno.test("signalProgram: before the hand-over it waits; a builtin gets it in the shell", async () => {
  await withProcs(async ({ shell, execd }) => {
    const t = terminal(shell);
    let started = false;
    const job = { startedAt: Date.now(), live: () => true, started: () => started };
    signalProgram(t, job, "INT");
    await new Promise((r) => setTimeout(r, 400));
    assert.deepEqual(t.sent, [], "the command has not started: the shell would swallow it");
    started = true; // a builtin: the shell never hands over
    await until(() => t.sent.length > 0);
    assert.deepEqual(t.sent, [shell.pid]);
    await new Promise((r) => setTimeout(r, 50));
    t.fg = execd.pid;
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(t.sent.length, 1, "sent once");
  });
});

Deno.test("signalProgram: a subshell is signalled after a while, and again should it exec", async () => {
  // One argv for both, so one image; the child execs another program after 700 ms.
  const script = ["-c", 'sleep "$D"; exec sleep 96'];
  const sh = (d: string) =>
    new Deno.Command("sh", { args: script, env: { D: d }, stdout: "null", stderr: "null" })
      .spawn();
  const shell = sh("30");
  const child = sh("0.7");
  try {
    const t = terminal(shell);
    t.fg = child.pid;
    let live = true;
    const job = { startedAt: Date.now(), live: () => live, started: () => true };
    signalProgram(t, job, "INT");
    await until(() => t.sent.length === 1);
    assert.equal(t.sent.length, 1, "a child that does not exec is signalled as it is");
    // The same process then runs a new image: the first signal may have been swallowed.
    await until(() => t.sent.length === 2);
    await new Promise((r) => setTimeout(r, 50));
    assert.deepEqual(t.sent, [child.pid, child.pid], "sent again once, after the exec");
    live = false;
  } finally {
    for (const c of [shell, child]) {
      c.kill("SIGKILL");
      await c.status;
    }
  }
});

Deno.test("signalProgram: nothing is sent once the job has ended", async () => {
  await withProcs(async ({ shell, forked }) => {
    const t = terminal(shell);
    t.fg = forked.pid;
    let live = true;
    signalProgram(t, { startedAt: Date.now(), live: () => live, started: () => true }, "INT");
    live = false;
    await new Promise((r) => setTimeout(r, 400));
    assert.deepEqual(t.sent, []);
  });
});
