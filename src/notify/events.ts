/**
 * From daemon bus events (src/shared/bus.ts; most are audit records mirrored by
 * src/control/recorder.ts, with `actor: {kind, id}` added) to notifications. `notificationFor` is
 * pure; `notificationsFromBus` subscribes, remembers each live job's command (job.finished does
 * not carry it) and hands notifications to the notifier without waiting.
 */
import type { Notification } from "./message.ts";
import type { FailureStatus } from "./schema.ts";

/** The part of a bus event read here (BusEvent from src/shared satisfies it). */
export interface BusEventLike {
  type: string;
  data: Record<string, unknown>;
}

/**
 * Published by the daemon when a job starts waiting for input (not an audit event; the lead's
 * wiring publishes it). `owner` as jobs keep it (`operator:<id>` for an operator's job).
 */
export const INPUT_NEEDED_EVENT = "job.awaiting_input";

export interface EventMapOptions {
  /** Final statuses reported as failures (default failed, timed_out, killed). */
  failureStatuses?: readonly FailureStatus[];
  /** Also report `exited` with a non-zero code (default false). */
  nonzeroExit?: boolean;
  /** The command of a job, for events that do not carry it (job.finished). */
  commandOf?: (jobId: string) => string | undefined;
}

const DEFAULT_FAILURES: readonly FailureStatus[] = ["failed", "timed_out", "killed"];

const OUTCOME: Record<string, string> = {
  failed: "failed",
  timed_out: "timed out",
  killed: "was killed",
  orphaned: "was orphaned (the daemon stopped while it ran)",
};

/** The notification an event calls for, or undefined. Never throws on odd payloads. */
export function notificationFor(
  event: BusEventLike,
  options: EventMapOptions = {},
): Notification | undefined {
  const d = event.data ?? {};
  const actor = actorOf(d);
  switch (event.type) {
    case "approval.requested": // src/control/trail.ts approvalRequested
      return {
        kind: "approval_pending",
        ...actor,
        ...field("approval_id", str(d.approval_id)),
        ...field("job_id", str(d.job_id)),
        ...field("command", argv(d.command)),
        ...field("reason", decisionReason(d.decision)),
      };
    case "exec.approval_requested": // a program of a running job, stopped at its execve
      return {
        kind: "approval_pending",
        ...actor,
        ...field("approval_id", str(d.approval_id)),
        ...field("job_id", str(d.job_id)),
        ...field("command", argv(d.argv) ?? str(d.path)),
        ...field("reason", decisionReason(d.decision)),
      };
    case "action.approval_requested": { // remote sessions, fleet runs, forwards, files
      const kind = str(d.kind);
      const summary = argv(d.summary);
      return {
        kind: "approval_pending",
        ...actor,
        ...field("approval_id", str(d.approval_id)),
        ...field(
          "command",
          summary === undefined ? kind : kind === undefined ? summary : `${kind}: ${summary}`,
        ),
        ...field("reason", decisionReason(d.decision)),
      };
    }
    case INPUT_NEEDED_EVENT: {
      const owner = str(d.owner);
      return {
        kind: "input_needed",
        ...(owner === undefined ? actor : ownerActor(owner)),
        ...field("job_id", str(d.job_id)),
        ...field("command", argv(d.command)),
        ...field("reader", str(d.reader)),
      };
    }
    case "job.finished": { // src/control/trail.ts finished
      const status = str(d.status);
      if (status === undefined) return undefined;
      const failures = options.failureStatuses ?? DEFAULT_FAILURES;
      let outcome: string | undefined;
      if ((failures as readonly string[]).includes(status)) {
        outcome = OUTCOME[status] ?? status;
        const signal = str(d.signal);
        if (signal !== undefined) outcome += ` (${signal})`;
      } else if (
        status === "exited" && options.nonzeroExit === true && typeof d.exit_code === "number" &&
        d.exit_code !== 0
      ) {
        outcome = `exited with ${d.exit_code}`;
      }
      if (outcome === undefined) return undefined;
      const jobId = str(d.job_id);
      return {
        kind: "job_failed",
        ...actor,
        ...field("job_id", jobId),
        outcome,
        ...field("reason", str(d.reason)),
        ...field("command", jobId === undefined ? undefined : options.commandOf?.(jobId)),
      };
    }
    case "stop_all": { // src/control/operator.ts stopAll, before it acts
      const ms = typeof d.barrier_ms === "number" ? d.barrier_ms : undefined;
      return {
        kind: "stop_all",
        ...actor,
        outcome: "every job is being stopped" +
          (ms === undefined ? "" : `; new work is refused for ${Math.round(ms / 1000)} s`),
      };
    }
    case "stop_all.done": {
      const jobs = Array.isArray(d.stopped_jobs) ? d.stopped_jobs.length : 0;
      const approvals = Array.isArray(d.cancelled_approvals) ? d.cancelled_approvals.length : 0;
      return {
        kind: "stop_all",
        ...actor,
        outcome: `done: ${plural(jobs, "job")} stopped, ${plural(approvals, "approval")} cancelled`,
      };
    }
    default:
      return undefined;
  }
}

/** What notificationsFromBus needs of the bus (EventBus satisfies it). */
export interface BusLike {
  subscribe(listener: (e: BusEventLike) => void): () => void;
}

/** What notificationsFromBus needs of the notifier (Notifier satisfies it). */
export interface NotifyTarget {
  notify(n: Notification): void;
}

/** Jobs whose command is remembered for their job.finished (the oldest forgotten first). */
const MAX_REMEMBERED_JOBS = 4096;

/**
 * Subscribes `notifier` to `bus`; returns the unsubscribe function. The listener is cheap and
 * synchronous (the bus calls subscribers inline): it maps and queues, nothing else.
 */
export function notificationsFromBus(
  bus: BusLike,
  notifier: NotifyTarget,
  options: Omit<EventMapOptions, "commandOf"> = {},
): () => void {
  const commands = new Map<string, string>();
  const mapOptions: EventMapOptions = { ...options, commandOf: (id) => commands.get(id) };
  return bus.subscribe((e) => {
    try {
      const d = e.data ?? {};
      const jobId = str(d.job_id);
      if (
        jobId !== undefined &&
        (e.type === "job.requested" || e.type === "approval.requested" ||
          e.type === "job.started_by_operator")
      ) {
        const command = argv(d.command);
        if (command !== undefined) {
          commands.delete(jobId);
          commands.set(jobId, command);
          if (commands.size > MAX_REMEMBERED_JOBS) {
            commands.delete(commands.keys().next().value!);
          }
        }
      }
      const n = notificationFor(e, mapOptions);
      if (e.type === "job.finished" && jobId !== undefined) commands.delete(jobId);
      if (n !== undefined) notifier.notify(n);
    } catch {
      // a payload this code did not expect costs its notification, nothing else
    }
  });
}

function str(v: unknown): string | undefined {
  return typeof v === "string" && v !== "" ? v : undefined;
}

function argv(v: unknown): string | undefined {
  if (!Array.isArray(v)) return str(v);
  const parts = v.filter((x): x is string => typeof x === "string");
  return parts.length === 0 ? undefined : parts.join(" ");
}

function decisionReason(v: unknown): string | undefined {
  if (v === null || typeof v !== "object") return undefined;
  const d = v as { reason?: unknown; rule?: { pattern?: unknown } };
  return str(d.reason) ?? (str(d.rule?.pattern) ? `rule "${d.rule?.pattern}"` : undefined);
}

type Actor = Pick<Notification, "actor" | "actor_kind">;

function actorOf(d: Record<string, unknown>): Actor {
  const a = d.actor;
  if (a === null || typeof a !== "object") return {};
  const { kind, id } = a as { kind?: unknown; id?: unknown };
  const actorId = str(id);
  if (actorId === undefined) return {};
  const actorKind = kind === "operator" || kind === "system" ? kind : "agent";
  return { actor: actorId, actor_kind: actorKind };
}

function ownerActor(owner: string): Actor {
  return owner.startsWith("operator:")
    ? { actor: owner.slice("operator:".length), actor_kind: "operator" }
    : { actor: owner, actor_kind: "agent" };
}

function field<K extends keyof Notification>(
  key: K,
  value: Notification[K] | undefined,
): Partial<Notification> {
  return value === undefined ? {} : { [key]: value } as Partial<Notification>;
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}
