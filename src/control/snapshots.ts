/**
 * Snapshots as the edges call them (docs/SNAPSHOTS.md): agents take and list their own
 * (`snapshot_create`, `snapshot_list`: a snapshot reads a directory, so it passes the gateway as
 * a `file.read` of it, and Termada's own control plane is never copied); a policy's `snapshot`
 * rules take one of a command's directory before it starts (audited; a failure refuses the
 * command unless the policy says `on_failure: run`); operators list, show, take, restore and
 * remove any (`/api/snapshots`, `termada snapshot`), each audited — a restore's intent is durable
 * before a file changes, and its own pre-restore snapshot makes it undoable. The store itself
 * (content-addressed objects, manifests, atomic restore) is src/snapshot.
 */
import { resolve } from "node:path";
import type { Engine, Reservation } from "../engine/mod.ts";
import { type CompiledPolicy, compilePolicy, decide } from "../policy/mod.ts";
import { TermadaError, toTermadaError } from "../shared/mod.ts";
import {
  createSnapshot,
  type CreateSnapshotResult,
  DEFAULT_EXCLUDES,
  getSnapshot,
  listSnapshots,
  removeSnapshot,
  restoreSnapshot,
  type SnapshotInfo,
} from "../snapshot/mod.ts";
import type {
  OperatorSnapshotCreateInput,
  SnapshotCreateInput,
  SnapshotCreateResult,
  SnapshotDetail,
  SnapshotList,
  SnapshotListInput,
  SnapshotRestoreInput,
  SnapshotRestoreResult,
  SnapshotView,
} from "../wire/mod.ts";
import { SNAPSHOT_WIRE_LIMITS } from "../wire/mod.ts";
import type { ApprovalBook } from "./approvals.ts";
import type { FileOps } from "./files.ts";
import type { Gateway } from "./gateway.ts";
import type { Actor, Recorder } from "./recorder.ts";

/** A policy's `snapshot` section (src/config: policies.<name>.snapshot). */
export interface SnapshotPolicy {
  commands: readonly string[];
  on_failure: "refuse" | "run";
  excludes?: readonly string[];
  include_git: boolean;
  max_files?: number;
  max_bytes?: number;
}

export interface SnapshotOpsOptions {
  /** `<state>/snapshots` (0700; the store makes it). */
  root: string;
  engine: Engine;
  gateway: Gateway;
  approvals: ApprovalBook;
  files: FileOps;
  recorder: Recorder;
  /** The agent's policy's `snapshot` rules, as the live config says now. */
  rules?: (agent: string) => SnapshotPolicy | undefined;
}

const L = SNAPSHOT_WIRE_LIMITS;
const agentName = (owner: string) => `agent:${owner}`;

export class SnapshotOps {
  readonly #o: SnapshotOpsOptions;
  /** Each policy's command patterns, compiled once per rules object (a reload makes new ones). */
  readonly #compiled = new WeakMap<SnapshotPolicy, CompiledPolicy>();

  constructor(o: SnapshotOpsOptions) {
    this.#o = o;
  }

  // ── agents ────────────────────────────────────────────────────────────────

  /** snapshot_create: a directory of this machine (default: the session's cwd). */
  async create(owner: string, req: SnapshotCreateInput): Promise<SnapshotCreateResult> {
    const engine = this.#o.engine;
    const sessionId = req.session;
    const session = sessionId === undefined
      ? undefined
      : engine.registry.ownSession(owner, sessionId);
    if (session?.remote) {
      throw new TermadaError(
        "NOT_SUPPORTED",
        `Cannot snapshot in session "${session.id}": it runs on server "${session.target}"`,
        { hint: "Snapshots copy directories of this machine; use a local session" },
      );
    }
    if (engine.runAs !== undefined) {
      throw new TermadaError(
        "NOT_SUPPORTED",
        `Cannot snapshot: local programs run as "${engine.runAs.user}" (security.run_as) and ` +
          "the snapshot would read as the daemon's user",
      );
    }
    const cwd = session?.cwd ?? engine.defaultCwd();
    const dir = resolve(cwd.startsWith("/") ? cwd : engine.defaultCwd(), req.path ?? ".");
    const real = await realDir(dir);
    const around = await this.#o.files.forbiddenAround(real);
    const lexical = real === dir ? around : await this.#o.files.forbiddenAround(dir);
    const forbidden = around.inside || lexical.inside
      ? `"${dir}" is part of Termada's own control plane (state, config, tokens, credentials) ` +
        "or a kernel view: never reachable by agents"
      : undefined;
    const subjects = [{ kind: "file.read" as const, target: "local", path: dir }];
    if (real !== dir) subjects.push({ kind: "file.read", target: "local", path: real });
    const action = await this.#o.gateway.admitAction(
      {
        owner,
        kind: "file.read",
        subjects,
        ...(forbidden ? { forbidden } : {}),
        summary: ["snapshot", real, "on local"],
        ...(session ? { sessionId: session.id } : {}),
      },
      (a, c) => this.#o.approvals.askAction(a, c),
    );
    try {
      const r = await createSnapshot(this.#o.root, real, {
        excludes: withHidden(real, req.excludes ?? DEFAULT_EXCLUDES, around.below),
        include_git: req.include_git ?? false,
        ...(req.label ? { label: req.label } : {}),
        created_by: agentName(owner),
        reason: "snapshot_create",
      });
      this.#o.gateway.actionDone(action, {
        ok: true,
        facts: {
          snapshot_id: r.snapshot.id,
          dir: real,
          files: r.snapshot.files,
          bytes: r.snapshot.bytes,
        },
      });
      this.#created({ kind: "agent", id: owner }, r, "agent", session?.id);
      return createResult(r);
    } catch (err) {
      this.#o.gateway.actionDone(action, { ok: false, error: toTermadaError(err).message });
      throw err;
    }
  }

  /** snapshot_list: the caller's own snapshots (taken by it or before its commands). */
  async list(owner: string, req: SnapshotListInput = {}): Promise<SnapshotList> {
    const all = await listSnapshots(this.#o.root, req.path ? { dir: req.path } : {});
    return { snapshots: all.filter((s) => s.created_by === agentName(owner)).map(view) };
  }

  /**
   * The work a policy's `snapshot` rules put before a job (LaunchSpec.prepare), or undefined
   * when no rule matches its command. A command that cannot be analysed counts as matching.
   */
  before(res: Reservation): (() => Promise<void>) | undefined {
    const job = res.job;
    const rules = this.#o.rules?.(job.owner);
    if (!rules || rules.commands.length === 0) return undefined;
    let compiled = this.#compiled.get(rules);
    if (!compiled) {
      compiled = compilePolicy({ allow: [], deny: rules.commands, confirm: [] });
      this.#compiled.set(rules, compiled);
    }
    if (decide(job.command, compiled).action !== "deny") return undefined;
    return async () => {
      const session = res.session;
      const dir = job.mode === "background" ? res.cwd : session?.cwd ?? res.cwd;
      const actor: Actor = { kind: "agent", id: job.owner };
      try {
        if (session?.remote) {
          throw new TermadaError(
            "NOT_SUPPORTED",
            `the directory is on server "${session.target}"; snapshots copy this machine's`,
          );
        }
        const real = await realDir(dir);
        const around = await this.#o.files.forbiddenAround(real);
        if (around.inside) {
          throw new TermadaError(
            "DENIED_BY_POLICY",
            `"${real}" is part of Termada's control plane`,
          );
        }
        const r = await createSnapshot(this.#o.root, real, {
          excludes: withHidden(real, rules.excludes ?? DEFAULT_EXCLUDES, around.below),
          include_git: rules.include_git,
          limits: {
            ...(rules.max_files !== undefined ? { max_files: rules.max_files } : {}),
            ...(rules.max_bytes !== undefined ? { max_bytes: rules.max_bytes } : {}),
          },
          label: job.command.join(" ").slice(0, L.labelChars),
          created_by: agentName(job.owner),
          reason: `before job ${job.id} (policy)`,
        });
        this.#created(actor, r, "policy", session?.id, job.id);
      } catch (err) {
        const e = toTermadaError(err);
        const run = rules.on_failure === "run";
        this.#o.recorder.record(actor, "snapshot.failed", {
          dir,
          error: e.message,
          reason: "policy",
          job_id: job.id,
          ran_anyway: run,
        });
        if (run) return;
        throw new TermadaError(
          e.code === "DENIED_BY_POLICY" ? "DENIED_BY_POLICY" : e.code,
          `Cannot run job "${job.id}": the snapshot the policy takes before it failed: ${e.message}`,
          {
            cause: e,
            retriable: false,
            details: { job_id: job.id, ...(e.details?.state ? { state: e.details.state } : {}) },
            hint: e.hint ??
              "Raise the policy's snapshot limits, exclude large directories, or set on_failure: run",
          },
        );
      }
    };
  }

  // ── operators ─────────────────────────────────────────────────────────────

  async operatorList(dir?: string): Promise<SnapshotList> {
    return { snapshots: (await listSnapshots(this.#o.root, dir ? { dir } : {})).map(view) };
  }

  async show(id: string): Promise<SnapshotDetail> {
    const m = await getSnapshot(this.#o.root, id);
    return {
      snapshot: view(m.info),
      entries: m.entries.slice(0, L.entriesListed).map((e) =>
        e.type === "file"
          ? { path: e.path, type: e.type, size: e.size, sha256: e.sha256 }
          : e.type === "symlink"
          ? { path: e.path, type: e.type, target: e.target }
          : { path: e.path, type: e.type }
      ),
      skipped_paths: m.skipped.slice(0, L.skippedListed),
    };
  }

  /** An operator's snapshot of any directory (the operator is trusted; it is audited). */
  async operatorCreate(by: Actor, req: OperatorSnapshotCreateInput): Promise<SnapshotCreateResult> {
    const real = await realDir(resolve("/", req.dir));
    const r = await createSnapshot(this.#o.root, real, {
      ...(req.excludes ? { excludes: req.excludes } : {}),
      include_git: req.include_git ?? false,
      ...(req.label ? { label: req.label } : {}),
      created_by: `operator:${by.id}`,
      reason: "operator",
    });
    this.#created(by, r, "operator");
    return createResult(r);
  }

  /**
   * Restores a snapshot (atomic per file). The intent is on disk before anything changes; the
   * result names the undo snapshot (restoring it undoes this).
   */
  async restore(by: Actor, id: string, req: SnapshotRestoreInput): Promise<SnapshotRestoreResult> {
    const info = (await getSnapshot(this.#o.root, id)).info;
    const target = req.target ? resolve("/", req.target) : info.dir;
    const deleteExtra = req.delete_extra ?? info.kind === "pre_restore";
    await this.#o.recorder.intent(by, "snapshot.restore_requested", {
      snapshot_id: id,
      target,
      delete_extra: deleteExtra,
    });
    const r = await restoreSnapshot(this.#o.root, id, {
      target,
      delete_extra: deleteExtra,
      created_by: `${by.kind}:${by.id}`,
      reason: `undo of restoring ${id}`,
    });
    this.#o.recorder.record(by, "snapshot.restored", {
      snapshot_id: id,
      target: r.target,
      undo_snapshot_id: r.undo_snapshot_id,
      restored: r.restored,
      created: r.created,
      unchanged: r.unchanged,
      deleted: r.deleted,
      failed: r.failed,
      failures: r.failures.slice(0, 20).map((f) => `${f.path}: ${f.error}`),
    });
    return {
      snapshot_id: r.snapshot_id,
      target: r.target,
      undo_snapshot_id: r.undo_snapshot_id,
      delete_extra: r.delete_extra,
      restored: r.restored,
      created: r.created,
      unchanged: r.unchanged,
      deleted: r.deleted,
      failed: r.failed,
      failures: r.failures,
    };
  }

  async remove(by: Actor, id: string): Promise<{ snapshot_id: string; freed_bytes: number }> {
    const r = await removeSnapshot(this.#o.root, id);
    this.#o.recorder.record(by, "snapshot.removed", {
      snapshot_id: id,
      removed_objects: r.removed_objects,
      freed_bytes: r.freed_bytes,
    });
    return { snapshot_id: id, freed_bytes: r.freed_bytes };
  }

  #created(
    actor: Actor,
    r: CreateSnapshotResult,
    reason: string,
    sessionId?: string,
    jobId?: string,
  ): void {
    this.#o.recorder.note(actor, "snapshot.created", {
      snapshot_id: r.snapshot.id,
      dir: r.snapshot.dir,
      files: r.snapshot.files,
      bytes: r.snapshot.bytes,
      skipped: r.snapshot.skipped,
      reason,
      ...(jobId ? { job_id: jobId } : {}),
      ...(sessionId ? { session_id: sessionId } : {}),
      ...(r.pruned.length > 0 ? { pruned: r.pruned.slice(0, 100) } : {}),
    });
  }
}

/** The real path of a directory; NOT_FOUND / INVALID_ARGUMENT otherwise. */
async function realDir(dir: string): Promise<string> {
  let real: string;
  try {
    real = await Deno.realPath(dir);
  } catch {
    throw new TermadaError("NOT_FOUND", `Cannot snapshot "${dir}": it does not exist`);
  }
  if (!(await Deno.stat(real)).isDirectory) {
    throw new TermadaError("INVALID_ARGUMENT", `Cannot snapshot "${dir}": it is not a directory`);
  }
  return real;
}

/**
 * The excludes plus Termada's own paths below `dir` (anchored: relative to it), so a snapshot of
 * a home directory never copies the state directory's tokens. Globs in such a path only widen
 * what is left out.
 */
function withHidden(dir: string, excludes: readonly string[], below: readonly string[]): string[] {
  const prefix = dir.endsWith("/") ? dir : `${dir}/`;
  const hidden = below.map((p) => p.slice(prefix.length).replace(/\/+$/, "")).filter((p) => p);
  const all = [...new Set([...excludes, ...hidden])];
  if (all.length > L.excludes) {
    throw new TermadaError(
      "INVALID_ARGUMENT",
      `Cannot snapshot "${dir}": at most ${L.excludes} excludes (with Termada's own paths below it)`,
    );
  }
  return all;
}

function view(s: SnapshotInfo): SnapshotView {
  return {
    snapshot_id: s.id,
    dir: s.dir,
    created_at: s.created_at,
    kind: s.kind,
    ...(s.restore_of ? { restore_of: s.restore_of } : {}),
    ...(s.label ? { label: s.label } : {}),
    ...(s.created_by ? { created_by: s.created_by } : {}),
    ...(s.reason ? { reason: s.reason } : {}),
    files: s.files,
    dirs: s.dirs,
    symlinks: s.symlinks,
    bytes: s.bytes,
    skipped: s.skipped,
    changed_during_copy: s.changed_during_copy,
  };
}

function createResult(r: CreateSnapshotResult): SnapshotCreateResult {
  return { ...view(r.snapshot), skipped_paths: r.skipped.slice(0, L.skippedListed) };
}
