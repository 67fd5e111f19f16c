/**
 * Outbound-only Telegram: one `sendMessage` call per message over HTTPS, plain text (no parse
 * mode, no link previews). Nothing is ever read from Telegram but the answer to that call. The
 * bot token is part of the request URL, so every error text made here is scrubbed of it.
 */
import { TermadaError } from "../shared/mod.ts";
import { realTimers, type Timers } from "./_timers.ts";
import { cleanText, cut, type Message } from "./message.ts";
import { DEFAULT_TELEGRAM_API } from "./schema.ts";
import { DeliveryError, type Sink } from "./sink.ts";

/** Telegram's limit on a message's text. */
export const TELEGRAM_TEXT_MAX = 4096;
/** How a bot token looks (`123456789:AA…`); anything else is refused before it is sent. */
const TOKEN_SHAPE = /^[0-9]{1,20}:[A-Za-z0-9_-]{20,200}$/;
/** Anything shaped like a token in a URL path, whoever's it is. */
const TOKEN_IN_TEXT = /bot[0-9]{1,20}(?::|%3A)[A-Za-z0-9_-]+/gi;
/** Bytes of an answer read at most (the API's answers are tiny). */
const MAX_ANSWER_BYTES = 65_536;

export interface TelegramOptions {
  /** The bot token, resolved when a message is sent (the vault may still be locked: retried). */
  token: () => string | Promise<string>;
  chatId: string;
  /** `https://` only (default https://api.telegram.org). */
  apiBase?: string;
  /** PEM certificates to trust for `apiBase` (a private CA); the system's roots otherwise. */
  caCerts?: readonly string[];
  /** Per request (default 10 s). */
  timeoutMs?: number;
  timers?: Timers;
}

export class TelegramSink implements Sink {
  readonly name = "telegram";
  readonly #token: () => string | Promise<string>;
  readonly #chatId: string;
  readonly #apiBase: string;
  readonly #timeoutMs: number;
  readonly #timers: Timers;
  readonly #client: Deno.HttpClient | undefined;

  constructor(options: TelegramOptions) {
    const base = options.apiBase ?? DEFAULT_TELEGRAM_API;
    let url: URL;
    try {
      url = new URL(base);
    } catch {
      throw new TypeError(`Telegram api_base "${base}" is not a URL`);
    }
    // The token travels in the URL path: it must never cross the network in clear text.
    if (url.protocol !== "https:") throw new TypeError(`Telegram api_base must be https://`);
    this.#apiBase = base.replace(/\/+$/, "");
    this.#token = options.token;
    this.#chatId = options.chatId;
    this.#timeoutMs = options.timeoutMs ?? 10_000;
    this.#timers = options.timers ?? realTimers;
    this.#client = options.caCerts === undefined
      ? undefined
      : Deno.createHttpClient({ caCerts: [...options.caCerts] });
  }

  async send(message: Message, signal: AbortSignal): Promise<void> {
    let token: string;
    try {
      token = (await this.#token()).trim();
    } catch (err) {
      throw new DeliveryError(
        `Cannot send to Telegram: the bot token is not available: ${scrubToken(errText(err))}`,
        { retriable: true },
      );
    }
    if (!TOKEN_SHAPE.test(token)) {
      throw new DeliveryError("Cannot send to Telegram: the bot token is malformed", {
        retriable: false,
      });
    }
    const scrub = (s: string) => scrubToken(s, token);
    const text = cut(scrub(`Termada: ${message.title}\n${message.body}`), TELEGRAM_TEXT_MAX);
    const abort = new AbortController();
    const stop = () => abort.abort();
    signal.addEventListener("abort", stop, { once: true });
    let timedOut = false;
    const timer = this.#timers.setTimeout(() => {
      timedOut = true;
      abort.abort();
    }, this.#timeoutMs);
    try {
      if (signal.aborted) abort.abort();
      let res: Response;
      try {
        res = await fetch(`${this.#apiBase}/bot${token}/sendMessage`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ chat_id: this.#chatId, text, disable_web_page_preview: true }),
          // A redirect would send the request (and the token in its path) somewhere unplanned.
          redirect: "manual",
          signal: abort.signal,
          ...(this.#client ? { client: this.#client } : {}),
        });
      } catch (err) {
        if (timedOut) {
          throw new DeliveryError(
            `Cannot send to Telegram: no answer within ${this.#timeoutMs} ms`,
            { retriable: true },
          );
        }
        if (signal.aborted) {
          throw new DeliveryError("Cannot send to Telegram: cancelled", { retriable: false });
        }
        // Deno's fetch errors quote the URL, and the URL holds the token.
        throw new DeliveryError(
          `Cannot send to Telegram: ${scrub(errText(err))}`,
          { retriable: true },
        );
      }
      let answer: string;
      try {
        answer = await readBounded(res, MAX_ANSWER_BYTES);
      } catch (err) {
        if (timedOut) {
          throw new DeliveryError(
            `Cannot send to Telegram: no answer within ${this.#timeoutMs} ms`,
            { retriable: true },
          );
        }
        throw new DeliveryError(
          `Cannot send to Telegram: the answer was cut off: ${scrub(errText(err))}`,
          { retriable: true },
        );
      }
      checkAnswer(res.status, answer, scrub);
    } finally {
      this.#timers.clearTimeout(timer);
      signal.removeEventListener("abort", stop);
    }
  }

  close(): void {
    this.#client?.close();
  }
}

interface ApiAnswer {
  ok?: unknown;
  description?: unknown;
  error_code?: unknown;
  parameters?: { retry_after?: unknown };
}

function checkAnswer(status: number, text: string, scrub: (s: string) => string): void {
  let body: ApiAnswer | undefined;
  try {
    const parsed: unknown = JSON.parse(text);
    if (parsed !== null && typeof parsed === "object") body = parsed as ApiAnswer;
  } catch {
    body = undefined; // a proxy's HTML error page: the status decides
  }
  if (status >= 200 && status < 300 && body?.ok === true) return;
  const description = typeof body?.description === "string"
    ? ` "${cleanText(body.description, 200, scrub)}"`
    : "";
  const retryAfter = body?.parameters?.retry_after;
  if (status === 429 || body?.error_code === 429) {
    const seconds = typeof retryAfter === "number" && Number.isFinite(retryAfter) &&
        retryAfter >= 0
      ? Math.min(retryAfter, 86_400)
      : undefined;
    throw new DeliveryError(`Telegram is rate limiting this bot (HTTP 429)${description}`, {
      retriable: true,
      ...(seconds === undefined ? {} : { retryAfterMs: seconds * 1000 }),
      status,
    });
  }
  if (status >= 500) {
    throw new DeliveryError(`Telegram failed to take the message (HTTP ${status})${description}`, {
      retriable: true,
      status,
    });
  }
  if (status >= 300 && status < 400) {
    throw new DeliveryError(
      `Telegram's api_base redirected (HTTP ${status}): it must be the Bot API itself`,
      { retriable: false, status },
    );
  }
  throw new DeliveryError(
    `Telegram refused the message (HTTP ${status})${description}${hintFor(status)}`,
    { retriable: false, status },
  );
}

function hintFor(status: number): string {
  if (status === 401 || status === 404) return ": check the bot token";
  if (status === 403) return ": send /start to the bot, or add it to the group, first";
  if (status === 400) return ": check chat_id";
  if (status >= 200 && status < 300) return ': the answer was not {"ok":true}';
  return "";
}

async function readBounded(res: Response, max: number): Promise<string> {
  if (res.body === null) return "";
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  try {
    while (true) {
      const { done, value } = await reader.read();
      if (done) break;
      total += value.length;
      if (total > max) {
        await reader.cancel();
        break;
      }
      chunks.push(value);
    }
  } finally {
    reader.releaseLock();
  }
  const all = new Uint8Array(Math.min(total, max));
  let at = 0;
  for (const c of chunks) {
    all.set(c.subarray(0, all.length - at), at);
    at += c.length;
  }
  return new TextDecoder().decode(all);
}

/** `text` without the token (`token` given) or anything token-shaped after `/bot`. */
export function scrubToken(text: string, token?: string): string {
  let out = text;
  if (token !== undefined && token.length >= 8) {
    out = out.split(token).join("[token]").split(encodeURIComponent(token)).join("[token]");
  }
  return out.replace(TOKEN_IN_TEXT, "bot[token]");
}

/**
 * Reads the bot token from `path`: a regular file of the daemon's user, not readable by group or
 * others (0600 or 0400), holding only the token. Errors name the file, never its content.
 */
export function loadBotToken(path: string): string {
  const refuse = (why: string, hint: string, cause?: unknown) =>
    new TermadaError("INVALID_ARGUMENT", `Cannot use the bot token file "${path}": ${why}`, {
      hint,
      details: { key: "notifications.telegram.bot_token_file", file: path },
      ...(cause === undefined ? {} : { cause }),
    });
  let info: Deno.FileInfo;
  try {
    info = Deno.statSync(path);
  } catch (err) {
    throw refuse("it cannot be read", "Write the token to it and `chmod 600` it", err);
  }
  if (!info.isFile) throw refuse("it is not a regular file", "Point it at a file");
  const mode = (info.mode ?? 0) & 0o777;
  if ((mode & 0o077) !== 0) {
    throw refuse(
      `group or others may read it (mode ${mode.toString(8).padStart(4, "0")})`,
      `Run \`chmod 600 "${path}"\``,
    );
  }
  let uid: number | null = null;
  try {
    uid = Deno.uid();
  } catch {
    uid = null; // no --allow-sys=uid: the mode check above still holds
  }
  if (uid !== null && info.uid !== null && info.uid !== uid) {
    throw refuse("another user owns it", "The daemon's own user must own the token file");
  }
  if (info.size > 1024) throw refuse("it is too large for a token", "Keep only the token in it");
  let text: string;
  try {
    text = Deno.readTextFileSync(path);
  } catch (err) {
    throw refuse("it cannot be read", "Check its owner and mode", err);
  }
  const token = text.trim();
  if (!TOKEN_SHAPE.test(token)) {
    throw refuse(
      "it does not hold a bot token",
      'It must hold only the token BotFather gave ("123456789:AA…")',
    );
  }
  return token;
}

/** The message and its causes' (Deno's fetch puts the URL, token included, in the cause). */
function errText(err: unknown): string {
  const parts: string[] = [];
  for (let e: unknown = err, depth = 0; e !== undefined && depth < 4; depth++) {
    parts.push(e instanceof Error ? e.message : String(e));
    e = e instanceof Error ? e.cause : undefined;
  }
  return parts.join(": ");
}
