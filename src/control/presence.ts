/**
 * Which agents are connected, and what happens to the sessions of one that went away. An agent
 * is present while at least one of its connections (a stdio shim, an MCP HTTP session) is open.
 * When the last one closes, a grace period starts; an agent that reconnects within it keeps
 * everything. After it, the agent's idle sessions are closed; a session whose job still runs is
 * closed when that job ends (it is allowed to finish), one an operator holds when it is released.
 * Every reaping is audited (`agent.gone`, then each `session.closed` with the reason).
 */
import type { Engine, Session } from "../engine/mod.ts";
import { logger } from "../shared/mod.ts";
import type { AgentOps } from "./agent.ts";
import type { Recorder } from "./recorder.ts";
import { SYSTEM } from "./recorder.ts";

const log = logger("control");

/** How often sessions left busy at the end of a grace are looked at again. */
const RECHECK_MS = 1000;
/** Agents tracked at once (connections beyond are still served, just not reaped). */
export const MAX_TRACKED_AGENTS = 10_000;

export interface PresenceOptions {
  engine: Engine;
  agents: AgentOps;
  recorder: Recorder;
  /** Grace after an agent's last connection closed; null: never reap. */
  graceMs: number | null;
}

interface Tracked {
  connections: number;
  via: string;
  /** Grace timer, then the re-check timer while busy sessions remain. */
  timer: ReturnType<typeof setTimeout> | undefined;
  gone: boolean;
}

export class Presence {
  readonly #o: PresenceOptions;
  readonly #agents = new Map<string, Tracked>();
  #closed = false;

  constructor(options: PresenceOptions) {
    this.#o = options;
  }

  /** A connection of `agent` opened; call the returned function when it closes (idempotent). */
  attach(agent: string, via: string): () => void {
    let t = this.#agents.get(agent);
    if (!t) {
      if (this.#agents.size >= MAX_TRACKED_AGENTS) return () => {};
      t = { connections: 0, via, timer: undefined, gone: false };
      this.#agents.set(agent, t);
    }
    t.connections++;
    t.via = via;
    if (t.timer !== undefined) {
      clearTimeout(t.timer);
      t.timer = undefined;
    }
    if (t.gone) {
      t.gone = false;
      this.#safeRecord(() =>
        this.#o.recorder.note(SYSTEM, "agent.returned", {
          agent,
          sessions: this.#o.engine.registry.sessionsOf(agent).map((s) => s.id),
        })
      );
    }
    let detached = false;
    return () => {
      if (detached) return;
      detached = true;
      this.#detach(agent);
    };
  }

  /** Agents with an open connection now. */
  connected(): string[] {
    return [...this.#agents].filter(([, t]) => t.connections > 0).map(([id]) => id);
  }

  close(): void {
    this.#closed = true;
    for (const t of this.#agents.values()) clearTimeout(t.timer);
    this.#agents.clear();
  }

  #detach(agent: string): void {
    const t = this.#agents.get(agent);
    if (!t) return;
    t.connections = Math.max(0, t.connections - 1);
    if (t.connections > 0 || this.#closed) return;
    const grace = this.#o.graceMs;
    if (grace === null) {
      this.#agents.delete(agent);
      return;
    }
    t.timer = setTimeout(() => this.#graceOver(agent), grace);
  }

  #graceOver(agent: string): void {
    const t = this.#agents.get(agent);
    if (!t || t.connections > 0 || this.#closed) return;
    t.timer = undefined;
    const sessions = this.#o.engine.registry.sessionsOf(agent);
    if (!t.gone) {
      t.gone = true;
      this.#safeRecord(() =>
        this.#o.recorder.note(SYSTEM, "agent.gone", {
          agent,
          via: t.via,
          sessions: sessions.map((s) => s.id),
          grace_ms: this.#o.graceMs ?? 0,
        })
      );
      this.#o.agents.forgetDefault(agent);
      // Its port forwards listen for nobody now.
      this.#o.agents.remote?.closeForwardsOf(agent, "its agent went away").catch((err) =>
        log.warn("could not close a gone agent's forwards", { agent, error: err })
      );
    }
    let left = 0;
    for (const s of sessions) {
      if (reapable(s)) {
        s.close("its agent went away").catch((err) =>
          log.warn("could not close a gone agent's session", { session: s.id, error: err })
        );
      } else left++;
    }
    if (left > 0) t.timer = setTimeout(() => this.#graceOver(agent), RECHECK_MS);
    else this.#agents.delete(agent);
  }

  #safeRecord(f: () => void): void {
    try {
      f();
    } catch (err) {
      log.error("could not audit an agent's presence", { error: err });
    }
  }
}

/** Idle (no job, no reservation) and not held by an operator. */
function reapable(s: Session): boolean {
  return s.state === "ready" && !s.job && !s.lease;
}
