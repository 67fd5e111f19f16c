import assert from "node:assert/strict";
import { Redactor } from "../output/mod.ts";
import { systemClock } from "../shared/mod.ts";
import { aliveAfterGc } from "../shared/_test_gc.ts";
import { Job } from "./job.ts";
import { DEFAULT_LIMITS, Registry } from "./registry.ts";

let next = 0;
function job(owner: string): Job {
  return new Job({
    id: `job_${String(next++).padStart(12, "0")}`,
    owner,
    sessionId: "ses_000000000000",
    command: ["true"],
    mode: "foreground",
    clock: systemClock,
    redactor: new Redactor(),
    output: { retentionBytes: 1024, headBytes: 256 },
  });
}

function finish(r: Registry, j: Job): void {
  j.finish("exited", { exitCode: 0 });
  r.finished(j);
}

const inMemory = (r: Registry, owner: string) =>
  r.listJobs(owner, "all", 1000).map((s) => s.job_id);

Deno.test("finished jobs are kept per owner and in all, oldest end dropped first, for any number of owners", () => {
  const r = new Registry(
    { ...DEFAULT_LIMITS, finishedJobsPerOwner: 3, finishedJobsTotal: 7 },
    systemClock,
  );
  const a = Array.from({ length: 5 }, () => job("a"));
  for (const j of a) r.addJob(j);
  // They end out of creation order: the per-owner bound keeps the three that ended last.
  for (const i of [4, 0, 3, 1, 2]) finish(r, a[i]!);
  assert.deepEqual(inMemory(r, "a").sort(), [a[3]!.id, a[1]!.id, a[2]!.id].sort());
  assert.equal(r.kept.finished, 3);

  // Many owners: the total bound drops the oldest ends across them.
  const others = Array.from({ length: 40 }, (_, k) => job(`o${k % 8}`));
  for (const j of others) r.addJob(j);
  for (const j of others) finish(r, j);
  assert.equal(r.kept.finished, 7);
  assert.deepEqual(inMemory(r, "a"), [], "a's jobs ended first: they went first");
  const kept = others.slice(-7).map((j) => j.id);
  const all = r.allJobs(100).map((s) => s.job_id);
  assert.deepEqual(all.sort(), kept.sort());

  // A running job is never dropped, however many end after it.
  const long = job("a");
  r.addJob(long);
  for (let k = 0; k < 50; k++) {
    const j = job("a");
    r.addJob(j);
    finish(r, j);
  }
  assert.ok(inMemory(r, "a").includes(long.id));
  assert.equal(r.kept.finished, 3 + 4, "a keeps 3, the 4 other slots are the newest of o*");
  assert.ok(r.kept.jobs <= 7 + 1);
});

Deno.test("finished jobs are kept within the byte budget", () => {
  const r = new Registry({ ...DEFAULT_LIMITS, finishedOutputBytes: 1 }, systemClock);
  for (let k = 0; k < 20; k++) {
    const j = job("a");
    r.addJob(j);
    finish(r, j);
  }
  // Every finished job holds some bytes: over a one-byte budget none stays in memory.
  assert.equal(r.kept.finished, 0);
  assert.equal(r.kept.finishedBytes, 0);
});

Deno.test("a dropped job is not held by the registry's lists: memory stays bounded however many jobs ran", async () => {
  const r = new Registry(
    { ...DEFAULT_LIMITS, finishedJobsPerOwner: 5, finishedJobsTotal: 12 },
    systemClock,
  );
  const dropped: WeakRef<Job>[] = [];
  for (let k = 0; k < 3000; k++) {
    const j = job(`o${k % 4}`);
    r.addJob(j);
    finish(r, j);
    if (k < 2000) dropped.push(new WeakRef(j));
  }
  assert.equal(r.kept.finished, 12);
  // The internal lists may name dropped jobs only until they are compacted.
  assert.ok(r.kept.listed <= 4 * 12 + 3 * 64 + 8, `listed ${r.kept.listed}`);
  // And nothing else holds them: a full GC collects every job dropped long ago.
  const alive = await aliveAfterGc(dropped);
  assert.equal(alive, 0, `${alive} of ${dropped.length} dropped jobs are still reachable`);
});
