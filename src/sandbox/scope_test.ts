import assert from "node:assert/strict";
import { preloadNative, procStat, readProcFile } from "../pty/mod.ts";
import { bash, waitFor } from "./_test_util.ts";
import { CgroupTree, detectCgroup } from "./cgroup.ts";
import { nowTicks, ProcessScope } from "./scope.ts";

preloadNative(); // libc stays loaded for the process, not for one test

/** /proc/uptime in ticks, read as the decimal it is ("4763.48" × 100 is 476347.99… in floats). */
function uptimeTicks(): number {
  const [s, cs = "0"] = readProcFile("/proc/uptime")!.split(" ")[0]!.split(".");
  return Number(s) * 100 + Number(cs.padEnd(2, "0").slice(0, 2));
}

Deno.test("nowTicks is never ahead of /proc/uptime and at most one tick behind it", async () => {
  for (let i = 0; i < 200; i++) {
    const before = uptimeTicks();
    const t = nowTicks();
    const after = uptimeTicks();
    assert.ok(t <= after, `nowTicks ${t} is ahead of the uptime ${after}`);
    assert.ok(t >= before - 1, `nowTicks ${t} is more than a tick behind the uptime ${before}`);
    if (i % 20 === 0) await new Promise((r) => setTimeout(r, 7));
  }
});

Deno.test("a process started now has a start time within nowTicks' bounds", async () => {
  const from = nowTicks() - 1;
  const child = bash("exec sleep 100", {});
  try {
    const start = procStat(child.pid)!.startTime;
    const to = nowTicks() + 1;
    assert.ok(start >= from && start <= to, `${from} ≤ ${start} ≤ ${to}`);
  } finally {
    child.kill("SIGKILL");
    await child.status;
  }
});

Deno.test("startedBetween in a cgroup: never the root, a job's child and one in the hold", async () => {
  const got = detectCgroup();
  assert.ok(got.ok, got.ok ? "" : got.reason);
  const tree = new CgroupTree(got.root);
  const children: Deno.ChildProcess[] = [];
  try {
    const cg = tree.create("sess-scope");
    const root = bash(`echo $$ > "$CG/cgroup.procs"; exec sleep 100`, { CG: cg.path });
    children.push(root);
    await waitFor("the root to join", () => cg.ownProcs().includes(root.pid));
    const scope = new ProcessScope(root.pid, cg);
    assert.equal(cg.descendants(), 0);
    assert.deepEqual(scope.startedBetween(0, undefined), [], "only the root: nothing");
    assert.deepEqual(scope.all().map((p) => p.pid), [root.pid]);
    const from = nowTicks() - 1;
    const job = bash(`echo $$ > "$CG/cgroup.procs"; exec sleep 100`, { CG: cg.path });
    children.push(job);
    await waitFor("the job's child to join", () => cg.ownProcs().includes(job.pid));
    assert.deepEqual(scope.startedBetween(from, nowTicks() + 1).map((p) => p.pid), [job.pid]);
    assert.deepEqual(scope.startedBetween(nowTicks() + 5, undefined), [], "not started yet");
    const hold = scope.hold()!;
    assert.ok(hold, "a hold cgroup");
    assert.equal(cg.descendants(), 1);
    const held = bash(`echo $$ > "$CG/cgroup.procs"; exec sleep 100`, { CG: hold.path });
    children.push(held);
    await waitFor("the held one to join", () => hold.ownProcs().includes(held.pid));
    assert.deepEqual(
      scope.startedBetween(from, undefined).map((p) => p.pid).sort(),
      [job.pid, held.pid].sort(),
    );
    // A cgroup the scope does not know of is walked, not skipped.
    const extra = cg.child("extra");
    const inner = bash(`echo $$ > "$CG/cgroup.procs"; exec sleep 100`, { CG: extra.path });
    children.push(inner);
    await waitFor("the inner one to join", () => extra.ownProcs().includes(inner.pid));
    assert.equal(cg.descendants(), 2);
    assert.ok(scope.startedBetween(from, undefined).some((p) => p.pid === inner.pid));
    hold.freeze(false);
  } finally {
    for (const c of children) {
      try {
        c.kill("SIGKILL");
      } catch {
        // Already exited.
      }
      await c.status;
    }
    await tree.removeAll();
  }
});

Deno.test("adopt: nothing left is said so, a held exec is not 'nothing', leftovers move", async () => {
  const got = detectCgroup();
  assert.ok(got.ok, got.ok ? "" : got.reason);
  const tree = new CgroupTree(got.root);
  const children: Deno.ChildProcess[] = [];
  const start = (script: string, cgPath: string) => {
    const c = bash(`echo $$ > "$CG/cgroup.procs"; ${script}`, { CG: cgPath });
    children.push(c);
    return c;
  };
  try {
    const cg = tree.create("sess-adopt");
    const root = start("exec sleep 100", cg.path);
    await waitFor("the root to join", () => cg.ownProcs().includes(root.pid));
    const scope = new ProcessScope(root.pid, cg);
    assert.equal(scope.adopt("job_a"), "none", "only the root: nothing was left");
    // One held mid-exec in the hold cgroup is still the job's: not "none" (the start-time set
    // finds it).
    const hold = scope.hold()!;
    const held = start("exec sleep 100", hold.path);
    await waitFor("the held one to join", () => hold.ownProcs().includes(held.pid));
    assert.equal(scope.adopt("job_b"), undefined);
    hold.freeze(false);
    held.kill("SIGKILL");
    await held.status;
    await waitFor("the held one to go", () => hold.ownProcs().length === 0);
    // A leftover in the session's own cgroup moves to the job's.
    const left = start("exec sleep 100", cg.path);
    await waitFor("the leftover to join", () => cg.ownProcs().includes(left.pid));
    const moved = scope.adopt("job_c");
    assert.ok(moved && moved !== "none", "a cgroup of the job's own");
    assert.deepEqual(moved.ownProcs(), [left.pid]);
    assert.deepEqual(cg.ownProcs(), [root.pid]);
  } finally {
    for (const c of children) {
      try {
        c.kill("SIGKILL");
      } catch {
        // Already exited.
      }
      await c.status;
    }
    await tree.removeAll();
  }
});
