/** A bare foreground Job for the output tests (no session, no process). */
import { Redactor } from "../output/mod.ts";
import { systemClock } from "../shared/mod.ts";
import { Job } from "./job.ts";

let next = 0;

export function testJob(redactor: Redactor = new Redactor()): Job {
  return new Job({
    id: `job_${String(next++).padStart(12, "0")}`,
    owner: "t",
    sessionId: "ses_000000000000",
    command: ["x"],
    mode: "foreground",
    clock: systemClock,
    redactor,
    output: { retentionBytes: 1 << 24, headBytes: 1 << 20 },
  });
}
