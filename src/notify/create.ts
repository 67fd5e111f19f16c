/**
 * Builds the notifier a parsed `notifications:` section describes: the sinks it enables, with
 * their credentials read and checked now (a bad token file fails the daemon's start with a
 * clear error, rather than every message later).
 */
import { type Logger, logger, TermadaError } from "../shared/mod.ts";
import type { Timers } from "./_timers.ts";
import { DesktopSink, findOnPath } from "./desktop.ts";
import type { Redact } from "./message.ts";
import { Notifier } from "./notifier.ts";
import type { NotificationsConfig } from "./schema.ts";
import type { Sink } from "./sink.ts";
import { loadBotToken, TelegramSink } from "./telegram.ts";

export interface CreateNotifierOptions {
  /** Masks secrets in what is sent (the daemon's redactor as text → text). */
  redact: Redact;
  /** Resolves `telegram.bot_token_vault`; called when a message is sent (locked: retried). */
  vaultToken?: (entry: string) => Promise<string>;
  /** The PATH searched for notify-send (default the daemon's). */
  path?: string;
  log?: Logger;
  timers?: Timers;
  random?: () => number;
}

/**
 * A notifier with every enabled sink (possibly none: then `notify` does nothing). Throws
 * INVALID_ARGUMENT when an enabled sink cannot be set up (token file, CA file, vault callback).
 * A missing notify-send only disables the desktop sink, with one warning.
 */
export function createNotifier(
  config: NotificationsConfig,
  options: CreateNotifierOptions,
): Notifier {
  const log = options.log ?? logger("notify");
  const sinks: Sink[] = [];
  const { desktop, telegram } = config;
  if (desktop.enabled) {
    const command = findOnPath("notify-send", options.path ?? Deno.env.get("PATH") ?? "");
    if (command === undefined) {
      log.warn("desktop notifications are off: notify-send is not on PATH", {
        hint: "install libnotify-bin (Debian/Ubuntu) or libnotify",
      });
    } else {
      sinks.push(
        new DesktopSink({
          command,
          urgency: desktop.urgency,
          timeoutMs: desktop.timeout_ms,
          ...(options.timers ? { timers: options.timers } : {}),
        }),
      );
    }
  }
  if (telegram.enabled) {
    let token: () => string | Promise<string>;
    if (telegram.bot_token_file !== undefined) {
      const value = loadBotToken(telegram.bot_token_file);
      token = () => value;
    } else if (telegram.bot_token_vault !== undefined && options.vaultToken !== undefined) {
      const entry = telegram.bot_token_vault;
      const resolve = options.vaultToken;
      token = () => resolve(entry);
    } else {
      throw new TermadaError("INVALID_ARGUMENT", "Cannot set up Telegram notifications: no token", {
        hint: "Set notifications.telegram.bot_token_file (or bot_token_vault with a vault)",
        details: { key: "notifications.telegram" },
      });
    }
    let caCerts: string[] | undefined;
    if (telegram.ca_file !== undefined) {
      try {
        caCerts = [Deno.readTextFileSync(telegram.ca_file)];
      } catch (err) {
        throw new TermadaError(
          "INVALID_ARGUMENT",
          `Cannot set up Telegram notifications: cannot read the CA file "${telegram.ca_file}"`,
          {
            cause: err,
            hint: "ca_file must be a readable PEM file",
            details: { key: "notifications.telegram.ca_file", file: telegram.ca_file },
          },
        );
      }
    }
    sinks.push(
      new TelegramSink({
        token,
        chatId: telegram.chat_id!,
        apiBase: telegram.api_base,
        timeoutMs: telegram.timeout_ms,
        ...(caCerts ? { caCerts } : {}),
        ...(options.timers ? { timers: options.timers } : {}),
      }),
    );
  }
  return new Notifier(sinks, {
    redact: options.redact,
    kinds: config.events,
    rate: { perMinute: config.rate.per_minute, burst: config.rate.burst },
    coalesceMs: config.coalesce_ms,
    queueSize: config.queue_size,
    maxRetries: config.max_retries,
    log,
    ...(options.timers ? { timers: options.timers } : {}),
    ...(options.random ? { random: options.random } : {}),
  });
}
