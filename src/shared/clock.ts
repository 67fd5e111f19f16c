/** Time source, injectable so tests can drive timeouts without sleeping. */
export interface Clock {
  /** Wall clock, ms since the epoch. */
  now(): number;
  /** Monotonic ms for durations. */
  mono(): number;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  mono: () => performance.now(),
};
