/**
 * Answers a person types for an agent's job (exec_write {human}): a one-time page of the daemon
 * (`/secret/<token>` on its loopback port) where the human types a password; the value goes to
 * the program and the redactor, never to the agent. Each request is bound to one job of one
 * agent, used once, and expires; the token in the URL is the capability (256 bits).
 */
import { randomHex, TermadaError } from "../shared/mod.ts";

/** Requests waiting at once (all agents); the oldest expired ones are pruned first. */
export const HUMAN_INPUT_MAX = 64;
/** How long a page stays valid. */
export const HUMAN_INPUT_TTL_MS = 5 * 60_000;
/** The longest answer a page takes. */
export const HUMAN_INPUT_MAX_BYTES = 4096;

export interface HumanRequest {
  token: string;
  owner: string;
  jobId: string;
  command: readonly string[];
  message: string;
  expiresAt: number;
}

export class HumanInputs {
  readonly #requests = new Map<string, HumanRequest>();
  readonly #now: () => number;

  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  create(owner: string, jobId: string, command: readonly string[], message: string): HumanRequest {
    const now = this.#now();
    for (const [t, r] of this.#requests) if (r.expiresAt <= now) this.#requests.delete(t);
    if (this.#requests.size >= HUMAN_INPUT_MAX) {
      throw new TermadaError(
        "QUOTA_EXCEEDED",
        `Cannot ask a person: ${HUMAN_INPUT_MAX} requests already wait for an answer`,
        { hint: "Answer or let the open ones expire (5 minutes)" },
      );
    }
    const token = randomHex(32);
    const r = {
      token,
      owner,
      jobId,
      command: [...command],
      message,
      expiresAt: now + HUMAN_INPUT_TTL_MS,
    };
    this.#requests.set(token, r);
    return r;
  }

  /** The open request behind `token` (NOT_FOUND: unknown, used or expired). */
  get(token: string): HumanRequest {
    const r = /^[0-9a-f]{64}$/.test(token) ? this.#requests.get(token) : undefined;
    if (!r || r.expiresAt <= this.#now()) {
      if (r) this.#requests.delete(token);
      throw new TermadaError(
        "NOT_FOUND",
        "This page is no longer valid (used, expired or unknown)",
      );
    }
    return r;
  }

  /** Takes the request for its one use. */
  take(token: string): HumanRequest {
    const r = this.get(token);
    this.#requests.delete(token);
    return r;
  }
}
