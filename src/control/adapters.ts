/**
 * Adapter runs as the edges call them (docs/PLUGINS.md "Adapters"): the adapters the config
 * offers (`file.patch` under its roots, `http.request` to its named endpoints), each run moved
 * through prepare → gateway → execute → verify (→ compensate) by src/adapters' runner, its
 * phases durable in their own SQLite journal (`<state>/adapters.db`, fsync per phase: every
 * phase is about a real side effect). The gateway decides every run as a typed `adapter`
 * action on its resource — and a file patch also as a `file.write` of every file it changes —
 * so the policy, approvals and budgets (with the adapter's cost estimate) hold as for any
 * other action, and the run's intent is in the audit log before anything changes. Runs a crash
 * interrupted are resumed once at start (the daemon's lock makes this the only runner).
 */
import { chmodSync, realpathSync } from "node:fs";
import { DatabaseSync } from "node:sqlite";
import {
  type AdapterRun,
  AdapterRunner,
  AdapterRunStore,
  type AdmissionRequest,
  type AnyAdapter,
  type FilePatchPlan,
  RUNNER_LIMITS,
} from "../adapters/mod.ts";
import type { ResourceSubject } from "../policy/mod.ts";
import { logger, TermadaError, toTermadaError } from "../shared/mod.ts";
import type {
  AdapterListInput,
  AdapterRunInput,
  AdapterRunList,
  AdapterRunView,
  OperatorAdapterList,
} from "../wire/mod.ts";
import type { ApprovalBook } from "./approvals.ts";
import type { AdmittedAction, Gateway } from "./gateway.ts";

const log = logger("adapters");

export interface AdapterOpsOptions {
  gateway: Gateway;
  approvals: ApprovalBook;
  /** The runs' journal (created 0600). */
  dbPath: string;
  /** The adapters the config offers, built by the daemon (src/daemon/adapters.ts). */
  adapters: readonly AnyAdapter[];
  /** Paths no run may change: Termada's control plane and own code (the file tools' list). */
  forbidden: { all: readonly string[]; write: readonly string[] };
}

/** A JSON detail as the wire's object (a bare value becomes `{value}`). */
const detail = (v: unknown): Record<string, unknown> =>
  v !== null && typeof v === "object" && !Array.isArray(v)
    ? v as Record<string, unknown>
    : { value: v };

const under = (path: string, dirs: readonly string[]) =>
  dirs.some((d) => path === d || path.startsWith(d.endsWith("/") ? d : `${d}/`));

function view(r: AdapterRun): AdapterRunView {
  return {
    run_id: r.id,
    adapter: r.adapter,
    phase: r.phase,
    verified: r.verified,
    resource: r.resource,
    summary: r.summary,
    risk: r.risk,
    reversible: r.reversible,
    ...(r.receipt !== null ? { receipt: detail(r.receipt) } : {}),
    ...(r.observed !== undefined ? { observed: detail(r.observed) } : {}),
    ...(r.compensation !== undefined ? { compensation: detail(r.compensation) } : {}),
    ...(r.error ? { error: { code: r.error.code, message: r.error.message } } : {}),
    created_at: new Date(r.created_at).toISOString(),
    updated_at: new Date(r.updated_at).toISOString(),
  };
}

export class AdapterOps {
  readonly #o: AdapterOpsOptions;
  readonly #db: DatabaseSync;
  readonly #runner: AdapterRunner;
  #closed = false;

  /** The forbidden paths as given and as they really are (a symlinked home must not slip by). */
  readonly #forbidden: string[];

  constructor(o: AdapterOpsOptions) {
    this.#o = o;
    const given = [...o.forbidden.all, ...o.forbidden.write];
    const real = given.flatMap((p) => {
      try {
        return [realpathSync(p)];
      } catch {
        return []; // not there (yet): its lexical path still counts
      }
    });
    this.#forbidden = [...new Set([...given, ...real])];
    this.#db = new DatabaseSync(o.dbPath);
    try {
      chmodSync(o.dbPath, 0o600);
      this.#db.exec("PRAGMA busy_timeout = 5000");
      this.#db.exec("PRAGMA locking_mode = EXCLUSIVE");
      this.#db.exec("PRAGMA journal_mode = WAL");
      // A phase is the record of a real side effect: it reaches the disk before the next one.
      this.#db.exec("PRAGMA synchronous = FULL");
      const store = new AdapterRunStore(this.#db);
      store.ensureSchema();
      this.#runner = new AdapterRunner(store, { adapters: o.adapters });
    } catch (err) {
      this.#db.close();
      throw err;
    }
  }

  /** The adapters this daemon offers. */
  adapters(): string[] {
    return this.#runner.adapters();
  }

  /**
   * adapter_run: prepare (no side effect), the gateway (policy, approval — the call waits —,
   * budgets with the adapter's cost), then execute and verify. A refusal throws (the run stays
   * `refused` in the journal); any other outcome is returned as the run's phase.
   */
  async run(owner: string, req: AdapterRunInput, signal?: AbortSignal): Promise<AdapterRunView> {
    this.#need(req.adapter);
    let admitted: AdmittedAction | undefined;
    let refusal: unknown;
    const run = await this.#runner.run(req.adapter, req.input, {
      agent: owner,
      ...(signal ? { signal } : {}),
      admit: async (a) => {
        try {
          admitted = await this.#admit(owner, a, [a.adapter, a.summary]);
          return { allowed: true };
        } catch (err) {
          refusal = err;
          throw err;
        }
      },
    });
    if (refusal !== undefined) throw refusal;
    if (admitted) this.#done(admitted, run);
    return view(run);
  }

  /** adapter_status: one of the caller's runs. */
  get(owner: string, runId: string): AdapterRunView {
    return view(this.#own(owner, runId));
  }

  /** adapter_list: the caller's newest runs (oldest of them first). */
  list(owner: string, req: AdapterListInput = {}): AdapterRunList {
    return {
      runs: this.#runner.list({ agent: owner, limit: req.limit ?? 50, newest: true }).map(view),
      adapters: this.adapters(),
    };
  }

  /** Every agent's newest runs, oldest of them first (operators: GET /api/adapters). */
  listAll(limit = 100): OperatorAdapterList {
    const runs = this.#runner.list({
      limit: Math.min(limit, RUNNER_LIMITS.listMax),
      newest: true,
    });
    return {
      runs: runs.map(view),
      adapters: this.adapters(),
      agents: runs.map((r) => r.agent),
    };
  }

  /** adapter_undo: compensates one of the caller's reversible runs, through the gateway again. */
  async undo(owner: string, runId: string, signal?: AbortSignal): Promise<AdapterRunView> {
    const run = this.#own(owner, runId);
    const action = await this.#admit(owner, {
      runId: run.id,
      adapter: run.adapter,
      agent: owner,
      resource: run.resource,
      summary: run.summary,
      risk: run.risk,
      reversible: run.reversible,
      // The same files as the run itself: an undo writes them too.
      plan: this.#runner.plan(runId) ?? null,
    }, ["undo", run.adapter, run.summary]);
    try {
      const after = await this.#runner.compensate(runId, signal ? { signal } : {});
      this.#o.gateway.actionDone(action, {
        ok: after.phase === "compensated",
        facts: { run_id: after.id, adapter: after.adapter, phase: after.phase, undo: true },
      });
      return view(after);
    } catch (err) {
      this.#o.gateway.actionDone(action, { ok: false, error: toTermadaError(err).message });
      throw err;
    }
  }

  /** Finishes what a crash interrupted (call once at start, with the daemon's lock held). */
  async resume(): Promise<AdapterRun[]> {
    const moved: AdapterRun[] = [];
    for (;;) {
      const batch = await this.#runner.resume();
      moved.push(...batch);
      if (batch.length === 0 || this.#closed) break;
      if (moved.length > 10_000) break; // bounded: the rest wait for the next start
    }
    for (const r of moved) {
      log.info("adapter run resumed", { run: r.id, adapter: r.adapter, phase: r.phase });
    }
    return moved;
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#db.close();
  }

  #need(name: string): void {
    if (this.adapters().includes(name)) return;
    throw new TermadaError("NOT_FOUND", `No adapter "${name}" on this daemon`, {
      hint: this.adapters().length > 0
        ? `Adapters here: ${this.adapters().join(", ")}`
        : "An operator offers adapters in the config (adapters.file_patch, adapters.http)",
    });
  }

  #own(owner: string, runId: string): AdapterRun {
    const run = this.#runner.get(runId);
    if (!run || run.agent !== owner) {
      throw new TermadaError("NOT_FOUND", `No adapter run "${runId}"`, {
        hint: "adapter_list shows your runs",
      });
    }
    return run;
  }

  /** The gateway's decision on a run: the adapter's resource, and each file a patch writes. */
  #admit(owner: string, a: AdmissionRequest, summary: string[]): Promise<AdmittedAction> {
    const subjects: ResourceSubject[] = [];
    let forbidden: string | undefined;
    if (a.adapter !== "file.patch" || a.plan === null) {
      subjects.push({ kind: "adapter", adapter: a.adapter, resource: a.resource });
    } else {
      // A patch is decided file by file (its resource, the directory holding them all, would
      // not match `file.patch:/srv/app/**`).
      for (const f of (a.plan as unknown as FilePatchPlan).files) {
        // Each file as the adapter's own resource (`file.patch:<path>` rules) and as a write
        // (`files.write` rules): a patch is what file_write would be, file by file.
        subjects.push({ kind: "adapter", adapter: a.adapter, resource: f.path });
        subjects.push({ kind: "file.write", target: "local", path: f.path });
        if (under(f.path, this.#forbidden)) {
          forbidden = `"${f.path}" is part of Termada's own control plane or code: never ` +
            "changed by agents";
        }
      }
    }
    return this.#o.gateway.admitAction(
      {
        owner,
        kind: "adapter",
        subjects,
        summary: [...summary, `risk ${a.risk}`, a.reversible ? "reversible" : "not reversible"],
        ...(forbidden ? { forbidden } : {}),
        ...(a.cost !== undefined ? { estimate: { cost: a.cost } } : {}),
      },
      (act, c) => this.#o.approvals.askAction(act, c),
    );
  }

  #done(action: AdmittedAction, run: AdapterRun): void {
    this.#o.gateway.actionDone(action, {
      ok: run.verified,
      ...(run.error ? { error: run.error.message } : {}),
      facts: { run_id: run.id, adapter: run.adapter, phase: run.phase, verified: run.verified },
    });
  }
}
