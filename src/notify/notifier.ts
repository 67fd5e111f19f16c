/**
 * The dispatcher: `notify()` queues and returns at once (it never awaits the network and never
 * throws), and each sink drains its own bounded queue on its own schedule — a coalescing window
 * (a burst becomes one message), a token bucket, and exponential back-off with jitter for
 * failures worth retrying. `close()` stops every timer and aborts what is in flight.
 */
import { type Logger, logger } from "../shared/mod.ts";
import { TokenBucket } from "./_bucket.ts";
import { realTimers, type Timers } from "./_timers.ts";
import { type Message, type Notification, type Redact, renderMessage } from "./message.ts";
import { NOTIFICATION_KINDS, type NotificationKind } from "./schema.ts";
import { DeliveryError, type Sink } from "./sink.ts";

export interface NotifierOptions {
  /** Masks secrets (the vault's and the configured patterns) in every field sent. */
  redact: Redact;
  /** Kinds sent (default all); others are ignored by `notify`. */
  kinds?: readonly NotificationKind[];
  /** Per sink (default 20 a minute, 5 at once). */
  rate?: { perMinute: number; burst: number };
  /** Notifications arriving this long after the first go as one message (default 2000). */
  coalesceMs?: number;
  /** Waiting notifications per sink (default 256); the oldest are dropped beyond it. */
  queueSize?: number;
  /** Attempts after the first for a retriable failure (default 6). */
  maxRetries?: number;
  /** Back-off before retry n: min(maxMs, baseMs·2^(n−1)), half of it jittered. */
  backoff?: { baseMs: number; maxMs: number };
  /** Longest `retry_after` honoured (default 1 hour). */
  maxRetryAfterMs?: number;
  timers?: Timers;
  /** In [0, 1): the jitter source. */
  random?: () => number;
  /** Where problems go (stderr by default). Messages never carry a credential. */
  log?: Logger;
}

/** What one sink has done since the notifier started. */
export interface SinkStats {
  /** Notifications waiting. */
  queued: number;
  /** Messages delivered. */
  sent: number;
  /** Notifications lost: the queue overflowed, the far side refused, or retries ran out. */
  dropped: number;
  /** Retries scheduled. */
  retries: number;
  /** Messages the far side refused or that failed every retry. */
  failed: number;
}

const DEFAULTS = {
  perMinute: 20,
  burst: 5,
  coalesceMs: 2000,
  queueSize: 256,
  maxRetries: 6,
  baseMs: 1000,
  maxMs: 300_000,
  maxRetryAfterMs: 3_600_000,
} as const;

interface Channel {
  sink: Sink;
  bucket: TokenBucket;
  queue: Notification[];
  /** Dropped notifications the next delivered message has to mention. */
  unreported: number;
  /** Failures of the message being retried. */
  attempt: number;
  timer: unknown;
  inflight: { abort: AbortController; done: Promise<void> } | undefined;
  stats: Omit<SinkStats, "queued">;
}

export class Notifier implements AsyncDisposable {
  readonly #channels: Channel[];
  readonly #kinds: ReadonlySet<NotificationKind>;
  readonly #redact: Redact;
  readonly #timers: Timers;
  readonly #random: () => number;
  readonly #log: Logger;
  readonly #coalesceMs: number;
  readonly #queueSize: number;
  readonly #maxRetries: number;
  readonly #baseMs: number;
  readonly #maxMs: number;
  readonly #maxRetryAfterMs: number;
  #closing: Promise<void> | undefined;

  /** Sinks are owned from here on: `close()` closes them. */
  constructor(sinks: readonly Sink[], options: NotifierOptions) {
    if (typeof options.redact !== "function") throw new TypeError("Notifier needs a redact");
    this.#timers = options.timers ?? realTimers;
    this.#random = options.random ?? Math.random;
    this.#log = options.log ?? logger("notify");
    this.#redact = options.redact;
    this.#kinds = new Set(options.kinds ?? NOTIFICATION_KINDS);
    this.#coalesceMs = nonNegative(options.coalesceMs ?? DEFAULTS.coalesceMs, "coalesceMs");
    this.#queueSize = positiveInt(options.queueSize ?? DEFAULTS.queueSize, "queueSize");
    this.#maxRetries = nonNegative(options.maxRetries ?? DEFAULTS.maxRetries, "maxRetries");
    this.#baseMs = nonNegative(options.backoff?.baseMs ?? DEFAULTS.baseMs, "backoff.baseMs");
    this.#maxMs = nonNegative(options.backoff?.maxMs ?? DEFAULTS.maxMs, "backoff.maxMs");
    this.#maxRetryAfterMs = nonNegative(
      options.maxRetryAfterMs ?? DEFAULTS.maxRetryAfterMs,
      "maxRetryAfterMs",
    );
    const names = new Set<string>();
    for (const s of sinks) {
      if (names.has(s.name)) throw new TypeError(`Two notification sinks named "${s.name}"`);
      names.add(s.name);
    }
    const now = this.#timers.now();
    this.#channels = sinks.map((sink) => ({
      sink,
      bucket: new TokenBucket(
        options.rate?.perMinute ?? DEFAULTS.perMinute,
        options.rate?.burst ?? DEFAULTS.burst,
        now,
      ),
      queue: [],
      unreported: 0,
      attempt: 0,
      timer: undefined,
      inflight: undefined,
      stats: { sent: 0, dropped: 0, retries: 0, failed: 0 },
    }));
  }

  /** Names of the sinks messages go to. */
  get sinks(): string[] {
    return this.#channels.map((c) => c.sink.name);
  }

  /**
   * Queues `n` for every sink and returns at once. Never throws and never waits: safe inside a
   * bus subscriber. Ignored after `close()` and for kinds not configured.
   */
  notify(n: Notification): void {
    try {
      if (this.#closing !== undefined || !this.#kinds.has(n.kind)) return;
      for (const ch of this.#channels) {
        ch.queue.push(n);
        this.#trim(ch);
        if (ch.timer === undefined && ch.inflight === undefined) {
          this.#schedule(ch, this.#coalesceMs);
        }
      }
    } catch (err) {
      // notify runs on the daemon's paths: a bug here must cost a notification, not a request.
      this.#log.error("could not queue a notification", { error: errorText(err) });
    }
  }

  /** Counters per sink name. */
  stats(): Record<string, SinkStats> {
    return Object.fromEntries(
      this.#channels.map((c) => [c.sink.name, { queued: c.queue.length, ...c.stats }]),
    );
  }

  /** Stops every timer, aborts requests in flight and closes the sinks. Idempotent. */
  close(): Promise<void> {
    return this.#closing ??= (async () => {
      for (const ch of this.#channels) {
        if (ch.timer !== undefined) this.#timers.clearTimeout(ch.timer);
        ch.timer = undefined;
        ch.inflight?.abort.abort();
      }
      await Promise.all(this.#channels.map((ch) => ch.inflight?.done));
      for (const ch of this.#channels) {
        try {
          ch.sink.close?.();
        } catch (err) {
          this.#log.warn("could not close a notification sink", {
            sink: ch.sink.name,
            error: errorText(err),
          });
        }
      }
    })();
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  /** Drops the oldest beyond the queue's bound, counting them. */
  #trim(ch: Channel): void {
    while (ch.queue.length > this.#queueSize) {
      ch.queue.shift();
      ch.unreported++;
      ch.stats.dropped++;
    }
  }

  #schedule(ch: Channel, ms: number): void {
    if (ch.timer !== undefined) this.#timers.clearTimeout(ch.timer);
    ch.timer = this.#timers.setTimeout(() => {
      ch.timer = undefined;
      this.#flush(ch);
    }, Math.max(0, Math.ceil(ms)));
  }

  #flush(ch: Channel): void {
    if (this.#closing !== undefined || ch.inflight !== undefined || ch.queue.length === 0) return;
    const now = this.#timers.now();
    const wait = ch.bucket.waitMs(now);
    if (wait > 0 || !ch.bucket.take(now)) {
      this.#schedule(ch, Math.max(wait, 1));
      return;
    }
    const batch = ch.queue.splice(0);
    const reported = ch.unreported;
    let message: Message;
    try {
      message = renderMessage(batch, { redact: this.#redact, dropped: reported });
    } catch (err) {
      this.#log.error("could not write a notification", { error: errorText(err) });
      this.#lose(ch, batch.length);
      return;
    }
    const abort = new AbortController();
    const done = (async () => {
      try {
        await ch.sink.send(message, abort.signal);
        ch.stats.sent++;
        ch.unreported -= reported;
        ch.attempt = 0;
      } catch (err) {
        if (this.#closing === undefined) this.#failed(ch, batch, err);
      } finally {
        ch.inflight = undefined;
        if (this.#closing === undefined && ch.timer === undefined && ch.queue.length > 0) {
          this.#schedule(ch, 0);
        }
      }
    })();
    ch.inflight = { abort, done };
  }

  #failed(ch: Channel, batch: Notification[], err: unknown): void {
    const retriable = err instanceof DeliveryError && err.retriable;
    const fields = { sink: ch.sink.name, notifications: batch.length, error: errorText(err) };
    if (!retriable) {
      ch.stats.failed++;
      ch.attempt = 0;
      this.#log.warn("a notification was refused: not retrying", fields);
      this.#lose(ch, batch.length);
      return;
    }
    ch.attempt++;
    if (ch.attempt > this.#maxRetries) {
      ch.stats.failed++;
      this.#log.warn("a notification failed every retry: dropped", {
        ...fields,
        attempts: ch.attempt,
      });
      ch.attempt = 0;
      this.#lose(ch, batch.length);
      return;
    }
    ch.stats.retries++;
    // Back in front, so the retry also carries what arrived meanwhile (one message, not two).
    ch.queue.unshift(...batch);
    this.#trim(ch);
    const asked = err instanceof DeliveryError ? err.retryAfterMs : undefined;
    const delay = asked !== undefined
      ? Math.min(asked, this.#maxRetryAfterMs)
      : this.#backoff(ch.attempt);
    this.#log.debug("a notification will be retried", {
      ...fields,
      attempt: ch.attempt,
      delay_ms: delay,
    });
    this.#schedule(ch, delay);
  }

  #lose(ch: Channel, n: number): void {
    ch.unreported += n;
    ch.stats.dropped += n;
  }

  #backoff(attempt: number): number {
    const full = Math.min(this.#maxMs, this.#baseMs * 2 ** (attempt - 1));
    return full / 2 + this.#random() * (full / 2);
  }
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function nonNegative(n: number, name: string): number {
  if (!Number.isFinite(n) || n < 0) throw new RangeError(`Bad notifier option "${name}"`);
  return n;
}

function positiveInt(n: number, name: string): number {
  if (!Number.isInteger(n) || n < 1) throw new RangeError(`Bad notifier option "${name}"`);
  return n;
}
