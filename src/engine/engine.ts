/**
 * The command engine's mechanics, assembled: the registry (owners, quotas, lookups), sessions on
 * real PTYs, the two-phase job lifecycle, the readers, and the operator lease. It decides nothing
 * about whether something may run and has no entry that runs a command without a caller having
 * reserved it first; src/control is that caller (and the only one: the edges reach control, not
 * this class). Observers (store rows, the audit trail) are wired by control.
 */
import { join } from "node:path";
import { type PtySpawnOptions, sharedPoller } from "../pty/mod.ts";
import {
  type ExecAnswer,
  type ExecEvent,
  type ExecFastPath,
  type ExecGateMode,
  type Feature,
  type LauncherCode,
  type RunAsUser,
  Sandbox,
  type SandboxReport,
  SandboxUnavailable,
} from "../sandbox/mod.ts";
import type { ShellKind } from "../shell/mod.ts";
import { type Matcher, Redactor, type SecretSet } from "../output/mod.ts";
import { type Clock, compileRegex, newId, systemClock, TermadaError } from "../shared/mod.ts";
import type { Boundary, SessionCreateInput } from "../wire/mod.ts";
import type { Job } from "./job.ts";
import { Leases } from "./lease.ts";
import { JobLifecycle } from "./lifecycle.ts";
import { DEFAULT_OUTPUT, type EngineOutputOptions, JobReader } from "./reads.ts";
import { DEFAULT_LIMITS, type EngineLimits, Registry } from "./registry.ts";
import { type RemoteHooks, Session, type Spawned } from "./session.ts";

/**
 * How a session on a server is started (src/remote builds it for one session id): its private
 * directory there, the shell on a remote terminal, the hooks for files and a dropped link.
 */
export interface RemoteLauncher {
  /** The session's private directory on the server (absolute). */
  dir: string;
  hooks: RemoteHooks;
  spawn(req: PtySpawnOptions): Promise<Spawned>;
}

/** Environment a remote shell gets from us (the server's login environment stays). */
const REMOTE_ENV = { TERM: "xterm-256color", PAGER: "cat", GIT_PAGER: "cat" } as const;

/**
 * What the engine tells its owner as it happens. Called synchronously on the engine's thread;
 * they must be cheap and must not throw.
 */
export interface EngineObservers {
  /** Every job, when it is created (before it can run): agents' and operators'. */
  jobCreated?(job: Job): void;
  /** A session's size changed (its cwd is recorded with each job's end). */
  sessionUpdated?(s: Session): void;
  sessionClosed?(s: Session, reason: string): void;
}

export interface EngineOptions {
  /** Private runtime directory: per-session rc files and staged commands, recordings. */
  runtimeDir: string;
  /**
   * Where each local session's scratch directory is made (default `<runtimeDir>/sessions`).
   * Under `runAs` it must be outside the state directory, which that user cannot enter: the
   * daemon passes a directory of its own (root-owned, 0711) that sessions have hidden but for
   * their own directory (docs/SECURITY.md, run_as).
   */
  sessionsDir?: string;
  /**
   * `security.run_as`: local session shells and one-shot jobs run as this user, with its HOME,
   * USER, LOGNAME and SHELL, starting in its home. Remote sessions are not affected.
   */
  runAs?: RunAsUser;
  limits?: Partial<EngineLimits>;
  output?: Partial<EngineOutputOptions>;
  /** Base environment of every shell (default: this process's, minus TERMADA_* variables). */
  env?: Record<string, string>;
  /**
   * Variables never given to a session (the config's `${NAME}` sources: agent tokens and the
   * like), besides TERMADA_*.
   */
  scrubEnv?: readonly string[];
  defaultShell?: ShellKind;
  /** Where sessions start when no cwd is given (default: $HOME, else the process cwd). */
  defaultCwd?: string;
  /** Record sessions as asciicast v2 (default true) in `recordingsDir`. */
  record?: boolean;
  /** Where recordings go (default `<runtimeDir>/recordings`). */
  recordingsDir?: string;
  recording?: { maxFileBytes?: number; keepFiles?: number };
  /** Source the user's own ~/.bashrc / ~/.zshrc in sessions (default false: a clean shell). */
  userRc?: boolean;
  /** Extra redaction regexes (config `redaction.patterns`), applied with the built-in ones. */
  redactPatterns?: readonly string[];
  /** Daemon-wide secrets (vault values) every redactor of this engine masks. */
  secrets?: SecretSet;
  /** Grace between INT, TERM and KILL when a job is killed (default 2000 ms). */
  killGraceMs?: number;
  /** Time a new shell has to show its first prompt (default 10 s). */
  startTimeoutMs?: number;
  /** The kernel boundary around sessions (docs/SECURITY.md); default: `auto`, nothing hidden. */
  sandbox?: SandboxSettings;
  clock?: Clock;
}

export interface SandboxSettings {
  mode: ExecGateMode;
  /** Paths no session process may reach (state dir, config, socket, cgroup root). */
  hide: readonly string[];
  /** Features treated as absent (tests inject a missing kernel feature this way). */
  missing?: readonly Feature[];
  /** Become the child subreaper and reap adopted orphans (the daemon only). */
  subreaper?: boolean;
  /** Answer execs on the gate's own thread (default: unless TERMADA_GATE_THREAD=off). */
  gateThread?: boolean;
  /** The launcher's own DENO_DIR from source, in the state dir (see SandboxOptions). */
  launcherCache?: string;
  /** The launcher's files to hold it to (tests; see SandboxOptions). */
  launcherCode?: () => LauncherCode;
}

/** Whose program is at the exec gate: its session, owner, and the job running there now. */
export interface ExecContext {
  owner: string;
  sessionId: string;
  job(): Job | undefined;
}

/** What decides each exec (control's exec gate); without one, everything is allowed. */
export type ExecPolicy = (ev: ExecEvent, ctx: ExecContext) => ExecAnswer | Promise<ExecAnswer>;

/** A session to open: the parsed session_create input without target (always local here). */
export type SessionSpec = Omit<SessionCreateInput, "target">;

export class Engine {
  readonly limits: EngineLimits;
  readonly output: EngineOutputOptions;
  readonly registry: Registry;
  readonly jobs: JobLifecycle;
  readonly reads: JobReader;
  readonly leases: Leases;
  readonly clock: Clock;
  #opts: EngineOptions;
  #env: Record<string, string>;
  #redactPatterns: Matcher[];
  #observers: EngineObservers = {};
  #closed = false;
  #execPolicy: ExecPolicy = () => ({ allow: true });
  /** What the gate's thread may decide alone: the default policy allows everything. */
  #execFastPath: (ctx: ExecContext) => ExecFastPath | undefined = () => ({ allowAll: true });
  #execRace: (ev: ExecEvent, ctx: ExecContext, found: string) => void = () => {};
  readonly sandbox: Sandbox<ExecContext>;

  constructor(options: EngineOptions) {
    this.#opts = options;
    this.clock = options.clock ?? systemClock;
    this.limits = { ...DEFAULT_LIMITS, ...options.limits };
    this.output = { ...DEFAULT_OUTPUT, ...options.output };
    this.#env = baseEnv(options.env, options.runAs, options.scrubEnv);
    this.#redactPatterns = (options.redactPatterns ?? []).map((p) =>
      compileRegex(p, { label: "redaction.patterns" })
    );
    this.sandbox = new Sandbox<ExecContext>({
      mode: options.sandbox?.mode ?? "auto",
      hide: options.sandbox?.hide ?? [],
      missing: options.sandbox?.missing,
      subreaper: options.sandbox?.subreaper,
      ...(options.sandbox?.launcherCache ? { launcherCache: options.sandbox.launcherCache } : {}),
      ...(options.sandbox?.launcherCode ? { launcherCode: options.sandbox.launcherCode } : {}),
      ...(options.sandbox?.gateThread !== undefined
        ? { gateThread: options.sandbox.gateThread }
        : {}),
      ...(options.runAs ? { runAs: options.runAs } : {}),
      decide: (ev, ctx) => this.#execPolicy(ev, ctx),
      fastPath: (ctx) => this.#execFastPath(ctx),
      onRace: (ev, ctx, found) => this.#execRace(ev, ctx, found),
    });
    this.registry = new Registry(this.limits, this.clock);
    this.reads = new JobReader(this.clock, this.output);
    this.leases = new Leases(this.clock);
    this.jobs = new JobLifecycle({
      registry: this.registry,
      clock: this.clock,
      output: { retentionBytes: this.output.retentionBytes, headBytes: this.output.headBytes },
      redactPatterns: this.#redactPatterns,
      secrets: options.secrets,
      env: this.#env,
      defaultShell: options.defaultShell ?? "bash",
      defaultCwd: () => this.defaultCwd(),
      killGraceMs: options.killGraceMs ?? 2000,
      onJob: (job) => this.#observers.jobCreated?.(job),
      spawn: (req, job) =>
        this.#spawn(
          { ...req, cgroupName: job.id },
          { owner: job.owner, sessionId: job.sessionId, job: () => job },
          false,
        ),
    });
  }

  /**
   * Sets what decides each exec of a session's processes (once, by control), and what of that
   * the gate's own thread may decide alone (it must agree with `policy`; absent: nothing).
   */
  guardExec(
    policy: ExecPolicy,
    onRace?: (ev: ExecEvent, ctx: ExecContext, found: string) => void,
    fastPath?: (ctx: ExecContext) => ExecFastPath | undefined,
  ): void {
    this.#execPolicy = policy;
    this.#execFastPath = fastPath ?? (() => undefined);
    if (onRace) this.#execRace = onRace;
    this.sandbox.policyChanged(); // snapshots taken before are of the default policy
  }

  /** What the boundary enforces on this machine (capabilities, dashboard, start log). */
  sandboxReport(): SandboxReport {
    return this.sandbox.report();
  }

  /** The same, as the wire says it (no paths: what agents and the dashboard are shown). */
  boundary(): Boundary {
    const r = this.sandbox.report();
    const f = (x: { active: boolean; reason?: string }) => ({
      active: x.active,
      ...(x.reason ? { reason: x.reason } : {}),
    });
    return {
      mode: r.mode,
      exec_gate: f(r.exec_gate),
      hiding: { ...f(r.hiding), ...(r.hiding.how ? { how: r.hiding.how } : {}) },
      landlock: { ...f(r.landlock), abi: r.landlock.abi },
      terminals: f(r.terminals),
      cgroup: f(r.cgroup),
      subreaper: r.subreaper,
      run_as: r.run_as ? { user: r.run_as.user, uid: r.run_as.uid, gid: r.run_as.gid } : null,
    };
  }

  async #spawn(
    req: PtySpawnOptions & { reach?: string[]; cgroupName?: string },
    ctx: ExecContext,
    trustFirstExec: boolean,
  ) {
    try {
      return await this.sandbox.spawn({ ...req, ctx, trustFirstExec });
    } catch (err) {
      if (err instanceof SandboxUnavailable) {
        throw new TermadaError("NOT_SUPPORTED", err.message, {
          hint: "Set security.exec_gate: auto to run without the exec gate (and say so), " +
            "or run on Linux ≥ 5.9 with seccomp",
        });
      }
      throw err;
    }
  }

  /** A redactor with the built-in and the configured patterns (for output outside sessions). */
  newRedactor(): Redactor {
    return new Redactor({ extraPatterns: this.#redactPatterns, secrets: this.#opts.secrets });
  }

  /** Sets who observes the engine (once, by the control layer that owns it). */
  observe(observers: EngineObservers): void {
    this.#observers = observers;
  }

  /**
   * Starts a shell for `owner` (on a server when `remote` is given: it builds the launcher for
   * the new session's id) and resolves once its first prompt is up (quota-checked).
   */
  async openSession(
    owner: string,
    spec: SessionSpec,
    remote?: (id: string) => Promise<RemoteLauncher>,
  ): Promise<Session> {
    this.assertOpen();
    const release = this.registry.claimSessionSlot(owner);
    try {
      const id = newId("ses");
      let launcher: RemoteLauncher | undefined;
      let cwd: string;
      if (remote) {
        launcher = await remote(id);
        // "" = the remote user's home (the shell starts there).
        cwd = spec.cwd ?? "";
      } else {
        cwd = spec.cwd ?? this.defaultCwd();
        try {
          if (!Deno.statSync(cwd).isDirectory) throw new Error("not a directory");
        } catch {
          throw new TermadaError(
            "INVALID_ARGUMENT",
            `Cannot start a session in "${cwd}": not a directory`,
          );
        }
      }
      const cols = spec.cols ?? 120;
      const rows = spec.rows ?? 40;
      const o = this.#opts;
      const s = await Session.start({
        id,
        owner,
        shell: spec.shell ?? o.defaultShell ?? "bash",
        cwd,
        env: {
          ...(launcher ? REMOTE_ENV : this.#env),
          ...spec.env,
          TERMADA_SESSION_ID: id,
          COLUMNS: String(cols),
          LINES: String(rows),
        },
        cols,
        rows,
        workspace: spec.workspace,
        dir: launcher?.dir ?? join(o.sessionsDir ?? join(o.runtimeDir, "sessions"), id),
        // Its rc file and staged commands are read by the shell: the run_as user's own.
        ...(!launcher && o.runAs ? { dirOwner: { uid: o.runAs.uid, gid: o.runAs.gid } } : {}),
        remote: launcher?.hooks,
        recordingPath: o.record === false
          ? undefined
          : join(o.recordingsDir ?? join(o.runtimeDir, "recordings"), `${id}.cast`),
        recording: {
          maxFileBytes: o.recording?.maxFileBytes ?? 16 * 1024 * 1024,
          keepFiles: o.recording?.keepFiles ?? 3,
        },
        ringBytes: this.output.ringBytes,
        redactPatterns: this.#redactPatterns,
        secrets: o.secrets,
        userRc: o.userRc ?? false,
        clock: this.clock,
        startTimeoutMs: o.startTimeoutMs ?? 10_000,
        onOperatorCommand: (sess, line, operator) => this.jobs.operatorJob(sess, line, operator),
        spawn: launcher
          ? (req) => launcher.spawn(req)
          : (req) =>
            this.#spawn({ ...req, cgroupName: id }, {
              owner,
              sessionId: id,
              job: () => this.registry.sessionById(id)?.job,
            }, true),
        onClosed: (closed) => {
          this.registry.removeSession(closed.id);
          this.#observers.sessionClosed?.(closed, closed.closeReason ?? "closed");
        },
      });
      if (this.#closed) {
        await s.close("daemon shutting down");
        this.assertOpen();
      }
      this.registry.addSession(s);
      return s;
    } finally {
      release();
    }
  }

  /** Resizes a session's terminal (the agent's `stty size` follows). */
  resize(s: Session, cols: number, rows: number): void {
    s.resize(cols, rows);
    this.#observers.sessionUpdated?.(s);
  }

  /** Closes every session and background job. The engine refuses work afterwards. */
  async shutdown(): Promise<void> {
    this.#closed = true;
    await this.jobs.closeAll();
    await Promise.all(this.registry.everySession().map((s) => s.close("daemon shutting down")));
    await this.sandbox.close();
    await sharedPoller().stop();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.shutdown();
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Where local sessions start without a cwd: the config's, else HOME (run_as: that user's). */
  defaultCwd(): string {
    return this.#opts.defaultCwd ?? this.#env.HOME ?? Deno.cwd();
  }

  /** `security.run_as`, when local programs run as another user (file tools are refused). */
  get runAs(): RunAsUser | undefined {
    return this.#opts.runAs;
  }

  assertOpen(): void {
    if (this.#closed) {
      throw new TermadaError("STOPPED", "The engine is shutting down", { retriable: true });
    }
  }
}

/**
 * What points into the daemon user's own per-user places: meaningless (and unreachable) for a
 * run_as user, so it is not passed on.
 */
const DAEMON_USER_ENV = [
  "XDG_RUNTIME_DIR",
  "XDG_CONFIG_HOME",
  "XDG_DATA_HOME",
  "XDG_STATE_HOME",
  "XDG_CACHE_HOME",
  "DBUS_SESSION_BUS_ADDRESS",
  "SSH_AUTH_SOCK",
  "MAIL",
  "OLDPWD",
  "PWD",
];

/** Environment for shells: the given base (or ours), minus Termada's own secrets. */
function baseEnv(
  given?: Record<string, string>,
  runAs?: RunAsUser,
  scrub: readonly string[] = [],
): Record<string, string> {
  const env = { ...(given ?? Deno.env.toObject()) };
  for (const k of Object.keys(env)) if (k.startsWith("TERMADA_")) delete env[k];
  for (const k of scrub) delete env[k];
  if (runAs) {
    for (const k of DAEMON_USER_ENV) delete env[k];
    env.HOME = runAs.home;
    env.USER = runAs.user;
    env.LOGNAME = runAs.user;
    env.SHELL = runAs.shell;
  }
  env.TERM = "xterm-256color";
  env.PAGER = "cat";
  env.GIT_PAGER = "cat";
  env.LANG ??= "C.UTF-8";
  return env;
}
