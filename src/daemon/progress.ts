/**
 * Output progress on the bus: once a second, `jobs.output` lists the active jobs whose output
 * grew since the last tick, with their byte totals (`{jobs: [{job_id, output_bytes}]}`), so
 * `termada top` and the dashboard show output rates from the event stream instead of reading
 * every job's output. Nothing is published while no output grows; at most PROGRESS_MAX_JOBS
 * jobs per event. The timer is unref'd: it never keeps a process alive.
 */
import type { EventBus } from "../shared/mod.ts";

/** Jobs one `jobs.output` event lists at most (the rest are in the next one). */
export const PROGRESS_MAX_JOBS = 256;

export interface OutputProgress {
  stop(): void;
}

/** Starts the ticker; `totals` gives each active job's output bytes so far. */
export function startOutputProgress(
  bus: EventBus,
  totals: () => { job_id: string; output_bytes: number }[],
  everyMs = 1000,
): OutputProgress {
  let last = new Map<string, number>();
  const tick = () => {
    const next = new Map<string, number>();
    const grew: { job_id: string; output_bytes: number }[] = [];
    for (const t of totals()) {
      const before = last.get(t.job_id) ?? 0;
      const listed = t.output_bytes !== before && grew.length < PROGRESS_MAX_JOBS;
      if (listed) grew.push(t);
      // A job left out for the cap keeps its old total, so the next tick lists it.
      next.set(t.job_id, listed ? t.output_bytes : before);
    }
    last = next; // ended jobs drop out
    if (grew.length > 0) bus.publish("jobs.output", { jobs: grew });
  };
  const timer = setInterval(tick, everyMs);
  Deno.unrefTimer(timer);
  return { stop: () => clearInterval(timer) };
}
