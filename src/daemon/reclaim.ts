/**
 * Gives memory back once the daemon goes quiet after a burst of work. V8 keeps a grown heap (and
 * glibc a grown malloc arena) long after the garbage in them died, so a daemon that served 50
 * agents would sit at its peak resident size for minutes. When the bus has been still for
 * QUIET_MS and the resident size grew by GROWTH_BYTES since the last reclaim, one full GC runs
 * (≈ 50 ms on a 200 MB heap, only ever on an idle daemon), then `malloc_trim(0)` (glibc; skipped
 * where the symbol is missing). Checked once a second by an unref'd timer: an idle daemon wakes
 * for a few microseconds, and the timer never keeps a process alive.
 */
import { openLibc } from "../../ffi/mod.ts";
import type { EventBus } from "../shared/mod.ts";
import { logger, runtimeGc } from "../shared/mod.ts";

const log = logger("daemon");

/** How long the bus must be still before a reclaim. */
export const QUIET_MS = 2000;
/** Growth of the resident size since the last reclaim that makes one worth its pause. */
export const GROWTH_BYTES = 16 * 1024 * 1024;
const CHECK_EVERY_MS = 1000;

export interface Reclaimer {
  /** Runs a reclaim now (tests); resolves with the resident size before and after, in bytes. */
  reclaim(): Promise<{ before: number; after: number }>;
  stop(): void;
}

export function startReclaimer(bus: EventBus): Reclaimer {
  let seen = bus.lastId;
  let changedAt = performance.now();
  let baseline = Deno.memoryUsage().rss;
  let running = false;
  const reclaim = async () => {
    // Loaded on the first reclaim: node:v8 and node:vm stay off the daemon's start.
    const collect = await runtimeGc();
    const before = Deno.memoryUsage().rss;
    const t0 = performance.now();
    collect?.();
    try {
      openLibc().malloc_trim?.(0n);
    } catch {
      // no libc binding on this platform: the GC alone has to do
    }
    const after = Deno.memoryUsage().rss;
    baseline = after;
    log.debug("reclaimed memory while idle", {
      rss_before_mib: Math.round(before / 1048576),
      rss_after_mib: Math.round(after / 1048576),
      ms: Math.round(performance.now() - t0),
    });
    return { before, after };
  };
  const timer = setInterval(() => {
    const id = bus.lastId;
    const now = performance.now();
    if (id !== seen) {
      seen = id;
      changedAt = now;
      return;
    }
    if (now - changedAt < QUIET_MS) return;
    if (running || Deno.memoryUsage().rss - baseline < GROWTH_BYTES) return;
    running = true;
    reclaim().finally(() => running = false);
  }, CHECK_EVERY_MS);
  Deno.unrefTimer(timer);
  return { reclaim, stop: () => clearInterval(timer) };
}
