/**
 * The contract between the dispatcher and a place messages go (Telegram, the desktop): `send`
 * delivers one message or throws a `DeliveryError` saying whether trying again can help.
 */
import { TermadaError } from "../shared/mod.ts";
import type { Message } from "./message.ts";

export interface Sink {
  /** Short and stable (`telegram`, `desktop`): it names the sink in logs and stats. */
  readonly name: string;
  /**
   * Delivers one message. Must stop promptly when `signal` aborts (the notifier is closing or
   * the request took too long) and must never put a credential in what it throws.
   */
  send(message: Message, signal: AbortSignal): Promise<void>;
  /** Releases what the sink holds (an HTTP client). Called once, after the last send ended. */
  close?(): void;
}

/**
 * A message could not be delivered. `retriable`: a network error, a timeout, HTTP 5xx or 429;
 * `retryAfterMs`: how long the far side asked us to wait (Telegram's `retry_after`).
 */
export class DeliveryError extends TermadaError {
  readonly retryAfterMs: number | undefined;

  constructor(
    message: string,
    options: { retriable: boolean; retryAfterMs?: number; status?: number },
  ) {
    super(options.retriable ? "SERVER_UNREACHABLE" : "INVALID_ARGUMENT", message, {
      retriable: options.retriable,
    });
    this.name = "DeliveryError";
    this.retryAfterMs = options.retryAfterMs;
  }
}
