/** Time and timers for the dispatcher, injectable so tests drive back-off without sleeping. */
export interface Timers {
  /** Monotonic ms. */
  now(): number;
  /** Returns a handle only `clearTimeout` reads. */
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export const realTimers: Timers = {
  now: () => performance.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};
