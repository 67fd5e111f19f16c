import assert from "node:assert/strict";
import { EventBus } from "../shared/mod.ts";
import { PROGRESS_MAX_JOBS, startOutputProgress } from "./progress.ts";

Deno.test("jobs.output lists only jobs whose output grew, and never more than the cap", async () => {
  const bus = new EventBus(100);
  const seen: { job_id: string; output_bytes: number }[][] = [];
  const off = bus.subscribe((e) => {
    if (e.type === "jobs.output") {
      seen.push(e.data.jobs as { job_id: string; output_bytes: number }[]);
    }
  });
  let totals = [{ job_id: "a", output_bytes: 10 }, { job_id: "b", output_bytes: 0 }];
  const p = startOutputProgress(bus, () => totals, 10);
  const tick = async (n: number) => {
    const want = seen.length + n;
    const deadline = Date.now() + 2000;
    while (seen.length < want && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
  };
  try {
    await tick(1);
    assert.deepEqual(seen.at(-1), [{ job_id: "a", output_bytes: 10 }], "b wrote nothing yet");
    totals = [{ job_id: "a", output_bytes: 10 }, { job_id: "b", output_bytes: 7 }];
    await tick(1);
    assert.deepEqual(seen.at(-1), [{ job_id: "b", output_bytes: 7 }], "a did not grow");
    const before = seen.length;
    await new Promise((r) => setTimeout(r, 60));
    assert.equal(seen.length, before, "nothing grew: nothing is published");
    totals = Array.from({ length: PROGRESS_MAX_JOBS + 3 }, (_, i) => ({
      job_id: `j${i}`,
      output_bytes: 1,
    }));
    await tick(2);
    assert.equal(seen.at(-2)!.length, PROGRESS_MAX_JOBS);
    assert.deepEqual(seen.at(-1)!.map((j) => j.job_id), ["j256", "j257", "j258"], "the rest next");
  } finally {
    p.stop();
    off();
  }
});
