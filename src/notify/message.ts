/**
 * What a notification says, and the one place its text is made: every field the daemon gives is
 * passed through the caller's `redact`, stripped of control characters and cut short, then the
 * notifications of one batch become one message. Never output, never a token.
 */
import { NOTIFICATION_KINDS, type NotificationKind } from "./schema.ts";

/** One thing a person should know about. Fields are raw: `renderMessage` cleans them. */
export interface Notification {
  kind: NotificationKind;
  /** The agent concerned (a job's owner), or the operator who acted (stop-all). */
  actor?: string;
  /** What `actor` is (default `agent`). */
  actor_kind?: "agent" | "operator" | "system";
  approval_id?: string;
  job_id?: string;
  /** What runs or is asked for, as people read it (argv joined by spaces). */
  command?: string;
  /** Why (the policy rule's reason, a job's end reason). */
  reason?: string;
  /** job_failed: how it ended ("failed", "timed out", "exited with 2"); stop_all: the phase. */
  outcome?: string;
  /** The process waiting for input (bash, python3, ssh…). */
  reader?: string;
}

/** One message as a sink sends it (already clean). */
export interface Message {
  title: string;
  body: string;
  /** Approvals and stop-all: people should look now. */
  urgent: boolean;
  /** Notifications it carries. */
  count: number;
}

export const MESSAGE_LIMITS = {
  /** Characters of a command shown (after redaction). */
  commandChars: 200,
  reasonChars: 200,
  idChars: 64,
  /** Characters given to `redact` at most (a 20 KB command line is cut first). */
  redactInputChars: 16_384,
  /** Lines of a batch listed before "…and N more". */
  batchLines: 10,
  /** Whole body (Telegram allows 4096 characters per message; room for the title). */
  bodyChars: 3500,
} as const;

const KIND_ORDER: ReadonlyMap<NotificationKind, number> = new Map(
  NOTIFICATION_KINDS.map((k, i) => [k, i]),
);
const URGENT: ReadonlySet<NotificationKind> = new Set(["approval_pending", "stop_all"]);

const TITLE_ONE: Record<NotificationKind, string> = {
  stop_all: "Stop-all",
  approval_pending: "Approval waiting",
  input_needed: "Job waiting for input",
  job_failed: "Job failed",
};
const TITLE_MANY: Record<NotificationKind, (n: number) => string> = {
  stop_all: () => "Stop-all",
  approval_pending: (n) => `${n} approvals waiting`,
  input_needed: (n) => `${n} jobs waiting for input`,
  job_failed: (n) => `${n} jobs failed`,
};

export type Redact = (text: string) => string;

/**
 * One message for a batch (in arrival order) plus `dropped` notifications lost earlier.
 * `redact` runs on every field; if it throws, the field is withheld rather than sent unmasked.
 */
export function renderMessage(
  batch: readonly Notification[],
  options: { redact: Redact; dropped?: number },
): Message {
  const dropped = options.dropped ?? 0;
  const clean = (text: string | undefined, max: number) =>
    text === undefined ? undefined : cleanText(text, max, options.redact);
  const sorted = batch.map((n, i) => ({ n, i })).sort((a, b) =>
    (KIND_ORDER.get(a.n.kind)! - KIND_ORDER.get(b.n.kind)!) || a.i - b.i
  ).map((x) => x.n);
  const lines = sorted.slice(0, MESSAGE_LIMITS.batchLines).map((n) => lineOf(n, clean));
  if (sorted.length > MESSAGE_LIMITS.batchLines) {
    lines.push(`…and ${sorted.length - MESSAGE_LIMITS.batchLines} more`);
  }
  if (dropped > 0) {
    lines.push(
      `${dropped} earlier notification${dropped === 1 ? " was" : "s were"} dropped ` +
        "(too many at once, or undeliverable)",
    );
  }
  const kinds = new Set(sorted.map((n) => n.kind));
  let title: string;
  if (sorted.length === 0) title = "Notifications dropped";
  else if (kinds.size === 1) {
    const k = sorted[0]!.kind;
    title = sorted.length === 1 ? TITLE_ONE[k] : TITLE_MANY[k](sorted.length);
  } else title = `${sorted.length} notifications`;
  return {
    title,
    body: cut(lines.join("\n"), MESSAGE_LIMITS.bodyChars),
    urgent: sorted.some((n) => URGENT.has(n.kind)),
    count: sorted.length,
  };
}

type Clean = (text: string | undefined, max: number) => string | undefined;

function lineOf(n: Notification, clean: Clean): string {
  const actor = clean(n.actor, MESSAGE_LIMITS.idChars);
  const job = clean(n.job_id, MESSAGE_LIMITS.idChars);
  const approval = clean(n.approval_id, MESSAGE_LIMITS.idChars);
  const command = clean(n.command, MESSAGE_LIMITS.commandChars);
  const reason = clean(n.reason, MESSAGE_LIMITS.reasonChars);
  const outcome = clean(n.outcome, MESSAGE_LIMITS.reasonChars);
  const reader = clean(n.reader, MESSAGE_LIMITS.idChars);
  const who = actor === undefined ? undefined : `${n.actor_kind ?? "agent"} "${actor}"`;
  const ofAgent = who === undefined ? "" : ` of ${who}`;
  const cmd = command === undefined ? "" : `: ${command}`;
  const why = reason === undefined ? "" : ` (${reason})`;
  switch (n.kind) {
    case "approval_pending":
      return `Approval ${approval ?? "?"}${who === undefined ? "" : ` for ${who}`}${cmd}${why}`;
    case "input_needed":
      return `Job ${job ?? "?"}${ofAgent} waits for input${
        reader === undefined ? "" : ` (${reader})`
      }${cmd}`;
    case "job_failed":
      return `Job ${job ?? "?"}${ofAgent} ${outcome ?? "failed"}${why}${cmd}`;
    case "stop_all":
      return `Stop-all${who === undefined ? "" : ` by ${who}`}: ${outcome ?? "requested"}`;
  }
}

// deno-lint-ignore no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]+/g;

/**
 * Redacted first (a secret must be whole to be recognized), then flattened to one line (no
 * control characters, no bidi overrides that could disguise a command) and cut to `max`.
 */
export function cleanText(text: string, max: number, redact: Redact): string {
  let masked: string;
  try {
    masked = redact(text.slice(0, MESSAGE_LIMITS.redactInputChars));
  } catch {
    // A redactor that fails must not let the text through unmasked.
    return "[withheld: redaction failed]";
  }
  return cut(masked.replace(CONTROL, " ").trim(), max);
}

/** At most `max` characters (UTF-16 units), never splitting a surrogate pair, "…" when cut. */
export function cut(text: string, max: number): string {
  if (text.length <= max) return text;
  let end = Math.max(0, max - 1);
  const code = text.charCodeAt(end - 1);
  if (code >= 0xd800 && code <= 0xdbff) end--;
  return text.slice(0, end) + "…";
}
