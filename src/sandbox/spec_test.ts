import assert from "node:assert/strict";
import { launchProblems, type LaunchReady } from "./spec.ts";

Deno.test("launchProblems lists each failed boundary step as `step: error`, nothing when all held", () => {
  const ok: LaunchReady = {
    ready: true,
    listener: 5,
    landlock: { abi: 7, scopes: ["signal"], hiding: "mounts" },
    killable: true,
    mounts: null,
    seccomp: null,
    cgroup: null,
    terminal: { fd: 9, tty: "/dev/pts/0" },
  };
  assert.deepEqual(launchProblems(ok), []);
  assert.deepEqual(launchProblems(undefined), []);
  assert.deepEqual(
    launchProblems({
      ...ok,
      mounts: { error: "mount /tmp/x: EBUSY" },
      terminal: { error: "mount /dev/pts: EPERM" },
      proc: { error: "mount /proc: EPERM" },
    }),
    ["mounts: mount /tmp/x: EBUSY", "terminal: mount /dev/pts: EPERM", "proc: mount /proc: EPERM"],
  );
});
