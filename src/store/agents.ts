/**
 * The `agents` table: who has talked to this daemon, and when first and last.
 */
import type { DatabaseSync, StatementSync } from "node:sqlite";
import type { Clock } from "../shared/mod.ts";
import {
  checkId,
  checkText,
  num,
  type Params,
  type Row,
  type StoreRunner,
  type StoreRunners,
  str,
  strOrNull,
} from "./_checks.ts";

export interface AgentRow {
  id: string;
  name: string | null;
  via: string;
  first_seen: number;
  last_seen: number;
}

function toAgent(r: Row): AgentRow {
  return {
    id: str(r.id),
    name: strOrNull(r.name),
    via: str(r.via),
    first_seen: num(r.first_seen),
    last_seen: num(r.last_seen),
  };
}

/** The agents table. Built by `Store` on its connection; reach it as `store.agents`. */
export class AgentRepo {
  readonly #clock: Clock;
  readonly #run: StoreRunner;
  readonly #upsert: StatementSync;
  readonly #list: StatementSync;

  constructor(db: DatabaseSync, clock: Clock, runners: StoreRunners) {
    this.#clock = clock;
    this.#run = runners.run;
    this.#upsert = db.prepare(
      `INSERT INTO agents (id, name, via, first_seen, last_seen)
       VALUES (:id, :name, :via, :now, :now)
       ON CONFLICT (id) DO UPDATE SET
         name = COALESCE(excluded.name, agents.name),
         via = excluded.via,
         last_seen = excluded.last_seen`,
    );
    this.#list = db.prepare(
      "SELECT id, name, via, first_seen, last_seen FROM agents ORDER BY last_seen DESC, id",
    );
  }

  /** Records that an agent was seen now: first_seen is kept, last_seen updated, name kept if omitted. */
  upsert(a: { id: string; name?: string; via: string }): void {
    const params: Params = {
      id: checkId("agent id", a.id),
      name: a.name === undefined ? null : checkText("agent name", a.name),
      via: checkText("agent via", a.via),
      now: this.#clock.now(),
    };
    this.#run("record an agent", () => this.#upsert.run(params));
  }

  /** Every agent, most recently seen first. */
  list(): AgentRow[] {
    return this.#run("list agents", () => this.#list.all().map((r) => toAgent(r as Row)));
  }
}
