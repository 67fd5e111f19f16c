/**
 * The `notifications:` config section (docs/NOTIFICATIONS.md). Strict like the rest of the
 * config: unknown keys are errors, every string and number is bounded. The schema is pure: the
 * bot token file's owner and mode are checked when the token is read (`loadBotToken`), not here.
 */
import { z } from "zod";

/** What may be notified, in the order messages list them (most urgent first). */
export const NOTIFICATION_KINDS = [
  "stop_all",
  "approval_pending",
  "input_needed",
  "job_failed",
] as const;
export type NotificationKind = typeof NOTIFICATION_KINDS[number];

/** Final job statuses that count as a failure (`exited` with a non-zero code is opt-in). */
export const FAILURE_STATUSES = ["failed", "timed_out", "killed", "orphaned"] as const;
export type FailureStatus = typeof FAILURE_STATUSES[number];

/** Bounds and defaults of the section. */
export const NOTIFY_LIMITS = {
  pathBytes: 4096,
  perMinuteMax: 600,
  burstMax: 100,
  queueMax: 4096,
  retriesMax: 12,
  coalesceMsMax: 60_000,
  timeoutMsMin: 100,
  timeoutMsMax: 120_000,
  urlChars: 2048,
  /** Telegram chat ids are 64-bit integers (negative for groups) or a public `@channelname`. */
  chatIdChars: 33,
} as const;

/** The Bot API the token is sent to unless `api_base` says otherwise. */
export const DEFAULT_TELEGRAM_API = "https://api.telegram.org";

const int = (min: number, max: number) => z.number().int().min(min).max(max);

const AbsolutePath = z.string().min(1).max(NOTIFY_LIMITS.pathBytes)
  .refine((s) => s.startsWith("/"), "must be an absolute path")
  .refine((s) => !s.includes("\0"), "must not contain NUL bytes");

/** As the vault names entries (VAULT_NAME_PATTERN, src/vault/format.ts). */
const VaultEntryName = z.string().regex(
  /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/,
  "must be a vault entry name (letters, digits, '.', '_', '-'; at most 64)",
);

const CHAT_ID = /^(?:-?[1-9][0-9]{0,19}|@[A-Za-z][A-Za-z0-9_]{3,31})$/;
const ChatId = z.union([
  z.string().max(NOTIFY_LIMITS.chatIdChars).regex(
    CHAT_ID,
    'must be a numeric chat id ("123456789", "-1001234567890") or "@channelname"',
  ),
  z.number().int().min(-Number.MAX_SAFE_INTEGER).max(Number.MAX_SAFE_INTEGER)
    .refine((n) => n !== 0, "must not be 0")
    // Ids of supergroups pass 2^53: written as YAML numbers they would be rounded.
    .transform((n) => String(n)),
]);

const HttpsUrl = z.string().max(NOTIFY_LIMITS.urlChars).refine((u) => {
  try {
    const url = new URL(u);
    return url.protocol === "https:" && url.username === "" && url.password === "" &&
      url.search === "" && url.hash === "";
  } catch {
    return false;
  }
}, "must be an https:// URL without credentials, query or fragment");

const Desktop = z.strictObject({
  enabled: z.boolean().default(false),
  /** `auto`: critical for approvals and stop-all, normal for the rest. */
  urgency: z.enum(["auto", "low", "normal", "critical"]).default("auto"),
  /** notify-send is killed after this long. */
  timeout_ms: int(NOTIFY_LIMITS.timeoutMsMin, 30_000).default(5000),
});

const Telegram = z.strictObject({
  enabled: z.boolean().default(false),
  /** A file holding only the token, owned by the daemon's user, mode 0600 or 0400. */
  bot_token_file: AbsolutePath.optional(),
  /** A vault entry holding the token (resolved by the daemon when a message is sent). */
  bot_token_vault: VaultEntryName.optional(),
  chat_id: ChatId.optional(),
  api_base: HttpsUrl.default(DEFAULT_TELEGRAM_API),
  /** A PEM CA bundle to trust for `api_base` (a private CA, or the tests' local server). */
  ca_file: AbsolutePath.optional(),
  /** Per request. */
  timeout_ms: int(NOTIFY_LIMITS.timeoutMsMin, NOTIFY_LIMITS.timeoutMsMax).default(10_000),
}).superRefine((t, ctx) => {
  if (t.bot_token_file !== undefined && t.bot_token_vault !== undefined) {
    ctx.addIssue({
      code: "custom",
      path: ["bot_token_vault"],
      message: "cannot be used with bot_token_file (give one token source)",
    });
  }
  if (!t.enabled) return;
  if (t.bot_token_file === undefined && t.bot_token_vault === undefined) {
    ctx.addIssue({
      code: "custom",
      path: ["bot_token_file"],
      message: "is required when telegram is enabled (or bot_token_vault); " +
        "the token is never written in the config itself",
    });
  }
  if (t.chat_id === undefined) {
    ctx.addIssue({
      code: "custom",
      path: ["chat_id"],
      message: "is required when telegram is enabled",
    });
  }
});

const Rate = z.strictObject({
  /** Messages per minute and per sink (a token bucket refilled at this rate). */
  per_minute: int(1, NOTIFY_LIMITS.perMinuteMax).default(20),
  /** Messages that may go at once before the rate applies. */
  burst: int(1, NOTIFY_LIMITS.burstMax).default(5),
});

const Failures = z.strictObject({
  statuses: z.array(z.enum(FAILURE_STATUSES)).max(FAILURE_STATUSES.length)
    .default(["failed", "timed_out", "killed"]),
  /** Also notify `exited` jobs with a non-zero exit code (noisy: grep exits 1). */
  nonzero_exit: z.boolean().default(false),
});

/** The `notifications:` section. Schema and inferred type share this name. */
export const NotificationsConfig = z.strictObject({
  desktop: Desktop.prefault({}),
  telegram: Telegram.prefault({}),
  events: z.array(z.enum(NOTIFICATION_KINDS)).max(NOTIFICATION_KINDS.length)
    .default([...NOTIFICATION_KINDS])
    .refine((l) => new Set(l).size === l.length, "must not list a kind twice"),
  failures: Failures.prefault({}),
  rate: Rate.prefault({}),
  /** Notifications arriving within this window after the first are sent as one message. */
  coalesce_ms: int(0, NOTIFY_LIMITS.coalesceMsMax).default(2000),
  /** Notifications waiting per sink; beyond it the oldest are dropped (and counted). */
  queue_size: int(1, NOTIFY_LIMITS.queueMax).default(256),
  /** Attempts after the first before a message is dropped. */
  max_retries: int(0, NOTIFY_LIMITS.retriesMax).default(6),
});
export type NotificationsConfig = z.infer<typeof NotificationsConfig>;
