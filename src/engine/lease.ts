/**
 * The operator's keyboard lease on a session: while an operator holds it, agents' commands there
 * get SESSION_BUSY (state "operator") and only the holder types into the terminal; a job already
 * running goes on. The holder may also pause what agents read of the current job.
 */
import { TermadaError } from "../shared/mod.ts";
import type { Clock } from "../shared/mod.ts";
import type { Session } from "./session.ts";

/** Most bytes an operator types in one request. */
export const MAX_OPERATOR_INPUT = 65_536;

/** What an operator does with a session's lease (see `Leases.check`). */
export type LeaseAction = "take" | "release" | "pause" | "resume" | "type";

export class Leases {
  readonly #clock: Clock;

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  /**
   * Throws what `action` would throw, and does nothing: the caller records the action only once
   * it is sure to happen (a refused takeover leaves no `session.takeover` record).
   */
  check(s: Session, operator: string, action: LeaseAction, text = ""): void {
    switch (action) {
      case "take":
      case "release":
        assertNotHeldByOther(s, operator);
        return;
      case "pause":
        return assertHolder(s, operator, "pause its output");
      case "resume":
        return assertHolder(s, operator, "resume its output");
      case "type":
        assertHolder(s, operator, "type into it");
        if (text.length > MAX_OPERATOR_INPUT) {
          throw new TermadaError("INVALID_ARGUMENT", "Input over 64 KiB");
        }
    }
  }

  take(s: Session, operator: string): void {
    this.check(s, operator, "take");
    s.lease = { operator, since: this.#clock.now() };
  }

  /** Hands the keyboard back to agents (and releases paused output). */
  release(s: Session, operator: string): void {
    if (!s.lease) return;
    this.check(s, operator, "release");
    s.lease = undefined;
    if (s.outputPaused) {
      s.outputPaused = false;
      s.job?.releaseOutput();
    }
  }

  /** Holds back what agents read from the session's current job. Only the lease holder. */
  pauseOutput(s: Session, operator: string): void {
    this.check(s, operator, "pause");
    s.outputPaused = true;
    s.job?.holdOutput();
  }

  resumeOutput(s: Session, operator: string): void {
    this.check(s, operator, "resume");
    s.outputPaused = false;
    s.job?.releaseOutput();
  }

  /** Keys from the operator who holds the keyboard, written to the terminal. */
  async type(s: Session, operator: string, text: string): Promise<void> {
    this.check(s, operator, "type", text);
    await s.operatorInput(text);
  }
}

function assertHolder(s: Session, operator: string, what: string): void {
  if (s.lease?.operator !== operator) {
    throw new TermadaError("INVALID_ARGUMENT", `Take over session "${s.id}" before you ${what}`, {
      details: { session_id: s.id },
    });
  }
}

function assertNotHeldByOther(s: Session, operator: string): void {
  if (s.lease && s.lease.operator !== operator) {
    throw new TermadaError(
      "SESSION_BUSY",
      `Operator "${s.lease.operator}" holds session "${s.id}"`,
      { details: { state: "operator", session_id: s.id } },
    );
  }
}
