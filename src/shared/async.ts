import { setImmediate } from "node:timers";
/** Small promise helpers that never leave a timer behind. */

/** Resolves with `p`'s value, or `undefined` after `ms` (the timer is always cleared). */
export function within<T>(p: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<undefined>((r) => {
    timer = setTimeout(() => r(undefined), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

/** Sleeps `ms`, or less if `signal` aborts. */
export function delay(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const t = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
    function done() {
      clearTimeout(t);
      signal?.removeEventListener("abort", done);
      resolve();
    }
  });
}

/**
 * Runs `fn` in a macrotask of its own (node's setImmediate): after every microtask queued so
 * far has run (so a reply being sent has been written to its socket: Deno writes eagerly), yet
 * without a timer's clamping (a `setTimeout(0)` here waits ~2 ms; an immediate ~2 µs).
 */
export function soon(fn: () => void): void {
  setImmediate(fn);
}
