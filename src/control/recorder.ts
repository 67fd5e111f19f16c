/**
 * The one way anything is written to the audit log: typed events only (src/audit/events.ts), a
 * refusal when the log cannot be written (AUDIT_UNAVAILABLE: nothing may happen that the log
 * does not show), and every record, as written (redacted, with its seq and hash), mirrored on
 * the event bus for live views and the mission projector.
 *
 * Three durabilities: `record` (fsynced before it returns: rare operator and daemon events),
 * `intent` (on disk before the promise resolves, the fdatasync shared by concurrent callers and
 * run off the main thread: what must be durable before a side effect), and `note` (written now,
 * durable with the next group sync: outcomes).
 */
import type { AuditEventName, AuditEvents } from "../audit/mod.ts";
import type { EventBus } from "../shared/mod.ts";
import { TermadaError } from "../shared/mod.ts";

export type ActorKind = "agent" | "operator" | "system";
export interface Actor {
  kind: ActorKind;
  id: string;
  /**
   * An operator's proven identity (docs/GOVERNANCE.md): `token` — the static operator token
   * (one principal, whatever name the client gives); `jwt` — an operator JWT's subject, tenant,
   * roles, how they signed in (`amr`) and on whose behalf (`delegation`). Approvals count
   * distinct principals and check roles and MFA on these fields only.
   */
  auth?: OperatorAuth;
}

export interface OperatorAuth {
  /** `elicitation`: the human at the agent's own MCP client answered (docs/GOVERNANCE.md). */
  via: "token" | "jwt" | "elicitation";
  principal: string;
  tenant?: string;
  roles: readonly string[];
  amr: readonly string[];
  delegation?: readonly string[];
}

/** What the audit log returns for a written record. */
export interface WrittenRecord {
  seq: number;
  hash: string;
  /** The data as written (redacted). */
  data: Record<string, unknown>;
}

/** The audit log's write side (src/audit's AuditLog satisfies it). */
export interface AuditSink {
  append(actor: Actor, event: string, data?: Record<string, unknown>): WrittenRecord;
  write(actor: Actor, event: string, data?: Record<string, unknown>): WrittenRecord;
  appendDurable(
    actor: Actor,
    event: string,
    data?: Record<string, unknown>,
  ): Promise<WrittenRecord>;
  readonly healthy: boolean;
  resume?(): { failure: string; verified_records: number };
}

export const SYSTEM: Actor = Object.freeze({ kind: "system", id: "termada" });

/** Where a record was written (seq and hash), for anchors. */
export interface Written {
  seq: number;
  hash: string;
}

export class Recorder {
  readonly #sink: AuditSink;
  readonly #bus: EventBus | undefined;
  #before: (() => void) | undefined;

  constructor(sink: AuditSink, bus?: EventBus) {
    this.#sink = sink;
    this.#bus = bus;
  }

  /**
   * Runs `flush` before every record is written: the trail writes job outcomes just after their
   * reply is sent, and any later record (of any job, mission or operator) comes after them in
   * the chain, as if they had been written at once.
   */
  beforeEachRecord(flush: (() => void) | undefined): void {
    this.#before = flush;
  }

  /** Written and fsynced before it returns. */
  record<E extends AuditEventName>(actor: Actor, event: E, data: AuditEvents[E]): Written {
    this.#before?.();
    return this.#mirror(
      actor,
      event,
      this.#guard(() => this.#sink.append(asLogged(actor), event, plain(data))),
    );
  }

  /** Written now; durable with the next group sync (a daemon crash keeps it). For outcomes. */
  note<E extends AuditEventName>(actor: Actor, event: E, data: AuditEvents[E]): Written {
    this.#before?.();
    return this.#mirror(
      actor,
      event,
      this.#guard(() => this.#sink.write(asLogged(actor), event, plain(data))),
    );
  }

  /** Resolves once the record is on disk: run the side effect only after this. */
  async intent<E extends AuditEventName>(
    actor: Actor,
    event: E,
    data: AuditEvents[E],
  ): Promise<Written> {
    this.#before?.();
    let written: WrittenRecord;
    try {
      written = await this.#sink.appendDurable(asLogged(actor), event, plain(data));
    } catch (err) {
      throw asUnavailable(err);
    }
    return this.#mirror(actor, event, written);
  }

  get healthy(): boolean {
    return this.#sink.healthy;
  }

  /** AUDIT_UNAVAILABLE when the log is latched unhealthy (checked before a side effect). */
  assertHealthy(): void {
    if (!this.#sink.healthy) {
      throw new TermadaError("AUDIT_UNAVAILABLE", "The audit log cannot be written: nothing runs", {
        retriable: false,
        hint: "An operator must repair it, then run `termada audit resume` (or restart Termada)",
      });
    }
  }

  /** Reopens a log latched by a write failure (the chain is verified first). */
  resume(by: Actor): { failure: string; verified_records: number } {
    if (!this.#sink.resume) {
      throw new TermadaError("NOT_SUPPORTED", "This audit log cannot be resumed");
    }
    const r = this.#sink.resume();
    if (r.failure !== "") {
      this.record(by, "audit.resumed", { after: r.failure, verified_records: r.verified_records });
    }
    return r;
  }

  #guard(write: () => WrittenRecord): WrittenRecord {
    try {
      return write();
    } catch (err) {
      throw asUnavailable(err);
    }
  }

  #mirror(actor: Actor, event: string, w: WrittenRecord): Written {
    // As the log keeps it: kind and id (how an operator proved it is in the event's data).
    this.#bus?.publish(event, {
      actor: { kind: actor.kind, id: actor.id },
      ...w.data,
      audit_seq: w.seq,
      audit_hash: w.hash,
    });
    return { seq: w.seq, hash: w.hash };
  }
}

/** The actor as the log keeps it: kind and id (how an operator proved it is in the data). */
function asLogged(actor: Actor): Actor {
  return actor.auth === undefined ? actor : { kind: actor.kind, id: actor.id };
}

function plain(data: object): Record<string, unknown> {
  return data as Record<string, unknown>;
}

function asUnavailable(err: unknown): TermadaError {
  if (err instanceof TermadaError && err.code === "AUDIT_UNAVAILABLE") return err;
  if (err instanceof TermadaError && err.code === "INVALID_ARGUMENT") return err;
  return new TermadaError("AUDIT_UNAVAILABLE", "The audit log cannot be written: nothing runs", {
    cause: err,
    retriable: false,
    hint: "An operator must repair it, then run `termada audit resume` (or restart Termada)",
  });
}
