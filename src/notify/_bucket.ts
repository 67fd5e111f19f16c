/** Float slack: a refill computed to land exactly on one token must count as one. */
const EPSILON = 1e-9;

/** A token bucket: `burst` messages at once, then `perMinute` a minute. */
export class TokenBucket {
  readonly #capacity: number;
  readonly #perMs: number;
  #tokens: number;
  #at: number;

  constructor(perMinute: number, burst: number, now: number) {
    if (!(perMinute > 0) || !(burst >= 1)) throw new RangeError("Bad rate limit");
    this.#capacity = burst;
    this.#perMs = perMinute / 60_000;
    this.#tokens = burst;
    this.#at = now;
  }

  #refill(now: number): void {
    if (now > this.#at) {
      this.#tokens = Math.min(this.#capacity, this.#tokens + (now - this.#at) * this.#perMs);
      this.#at = now;
    }
  }

  /** Ms until a token is there (0: one is there now). */
  waitMs(now: number): number {
    this.#refill(now);
    return this.#tokens >= 1 - EPSILON ? 0 : Math.ceil((1 - this.#tokens) / this.#perMs);
  }

  /** Takes a token; false when there is none. */
  take(now: number): boolean {
    if (this.waitMs(now) > 0) return false;
    this.#tokens = Math.max(0, this.#tokens - 1);
    return true;
  }
}
