import assert from "node:assert/strict";
import { preloadNative, readProcFile } from "../pty/mod.ts";
import { type ExecEvent, inTarget, mayRace } from "./gate.ts";

preloadNative();

function event(pid: number, path: string): ExecEvent {
  return {
    pid,
    path,
    resolved: inTarget(pid, path),
    argv: [path],
    truncated: false,
    identity: undefined,
    first: false,
  };
}

async function withProcess(
  args: string[],
  fn: (pid: number) => void | Promise<void>,
): Promise<void> {
  const child = new Deno.Command(args[0]!, { args: args.slice(1), stdout: "null", stderr: "null" })
    .spawn();
  try {
    // The child must have exec'd its final program before it is looked at.
    const deadline = Date.now() + 5000;
    while (Date.now() < deadline) {
      const st = readProcFile(`/proc/${child.pid}/status`) ?? "";
      if (/Name:\s*sleep/.test(st)) break;
      await new Promise((r) => setTimeout(r, 10));
    }
    await fn(child.pid);
  } finally {
    child.kill("SIGKILL");
    await child.status;
  }
}

Deno.test("inTarget binds the names that mean 'myself' to the target, not the daemon", () => {
  assert.equal(inTarget(42, "/proc/self/fd/3"), "/proc/42/fd/3");
  assert.equal(inTarget(42, "/proc/thread-self/exe"), "/proc/42/exe");
  assert.equal(inTarget(42, "/dev/fd/4"), "/proc/42/fd/4");
  assert.equal(inTarget(42, "/dev/stdin"), "/proc/42/fd/0");
  assert.equal(inTarget(42, "/usr/bin/true"), "/proc/42/root/usr/bin/true");
  assert.equal(inTarget(42, "./x"), "/proc/42/cwd/./x");
});

Deno.test("mayRace: root can swap anything; an ordinary user only what it can write", async () => {
  // This process's own uid (root in CI): every exec may race.
  await withProcess(["sleep", "30"], (pid) => {
    if (Deno.uid() === 0) assert.equal(mayRace(pid, event(pid, "/usr/bin/true")), true);
  });
  if (Deno.uid() !== 0) return;
  // As nobody: the system's binaries cannot be swapped, a world-writable directory can.
  await withProcess(
    ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sleep", "30"],
    (pid) => {
      assert.equal(mayRace(pid, event(pid, "/usr/bin/true")), false);
      assert.equal(mayRace(pid, event(pid, "/tmp/anything")), true, "/tmp is writable by all");
    },
  );
});
