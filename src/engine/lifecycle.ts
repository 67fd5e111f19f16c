/**
 * The mechanics of a job's life, in two phases so that the control layer can decide in between:
 * `reserve` creates the job and holds what it needs (its session, or a background slot) without
 * running anything; then `start` runs it exactly as reserved, or `abandon` ends it (denied,
 * failed) and gives the hold back. Also stopping (INT → TERM → KILL), signals and typed input.
 * Nothing here decides whether something may run: that is src/control, the only caller.
 */
import { type Matcher, Redactor, type SecretSet } from "../output/mod.ts";
import { descendantsOf, procStat, type PtySpawnOptions, type SignalName } from "../pty/mod.ts";
import { readsCommands } from "./readers.ts";
import { argvToScript, scopeScript, type ShellKind } from "../shell/mod.ts";
import { type Clock, newId, TermadaError, toTermadaError, within } from "../shared/mod.ts";
import type { JobStatus } from "../wire/mod.ts";
import { Job, type JobOutputOptions } from "./job.ts";
import { OneShot, waitDone } from "./oneshot.ts";
import type { Registry } from "./registry.ts";
import type { Session } from "./session.ts";
import type { Spawned } from "./oneshot.ts";

/** What a job runs and where: fixed when it is reserved, never changed afterwards. */
export interface LaunchSpec {
  command: readonly string[];
  cwd?: string;
  env?: Record<string, string>;
  /**
   * Variables whose values are secrets (resolved vault references): never typed into a
   * terminal. A session job gets them through its staged script (removed when it ends), a
   * one-shot job through its environment; not supported beside a session on a server.
   */
  secretEnv?: Record<string, string>;
  /**
   * Makes `secretEnv` when the job starts (not when it is reserved: a job waiting for approval
   * gets its values only once approved, and not at all when the vault was locked meanwhile).
   * Its error ends the job (`denied` for DENIED_BY_POLICY, else `failed`) and is thrown.
   */
  secretSource?: () => Record<string, string>;
  /**
   * Runs when the job starts, before anything else (after an approval, if one was needed): the
   * control layer's work that must precede the command (a policy's snapshot of its directory).
   * Its error ends the job `failed` and is thrown; the command never runs.
   */
  prepare?: () => Promise<void>;
}

/** A job created and holding its resources, not yet running. One owner: the caller. */
export interface Reservation {
  readonly job: Job;
  readonly spec: LaunchSpec;
  /** The session it runs in (foreground) or takes its shell and size from (background). */
  readonly session: Session | undefined;
  /** Foreground: the line typed into the shell. */
  readonly script: string | undefined;
  /** Background: where it starts. */
  readonly cwd: string;
}

export interface LifecycleOptions {
  registry: Registry;
  clock: Clock;
  output: JobOutputOptions;
  redactPatterns: readonly Matcher[];
  secrets?: SecretSet;
  env: Record<string, string>;
  defaultShell: ShellKind;
  defaultCwd: () => string;
  killGraceMs: number;
  /** Starts a background job's program on its PTY (through the sandbox's launcher). */
  spawn: (req: PtySpawnOptions, job: Job) => Promise<Spawned>;
  /** Every job created, before it can run (observers: store rows, audit trail, auto-answers). */
  onJob: (job: Job) => void;
}

export class JobLifecycle {
  readonly #o: LifecycleOptions;
  readonly #oneshots = new Map<string, OneShot>();
  /** Reserved and not yet started or abandoned (waiting for the gate or an operator). */
  readonly #reserved = new Map<string, Reservation>();

  constructor(options: LifecycleOptions) {
    this.#o = options;
  }

  /**
   * Holds `session` for a new job running `spec` (SESSION_BUSY when it is busy or an operator
   * holds it). The caller starts or abandons the reservation.
   */
  async reserveForeground(owner: string, session: Session, spec: LaunchSpec): Promise<Reservation> {
    if (session.lease) throw operatorHolds(session.id);
    if (session.state === "busy" && !session.job) await within(session.ready, 1000);
    if (session.state !== "ready") {
      const running = session.job?.id;
      throw new TermadaError(
        session.state === "closed" ? "NOT_FOUND" : "SESSION_BUSY",
        session.state === "closed"
          ? `Session "${session.id}" is closed`
          : `Session "${session.id}" is busy${running ? ` with job "${running}"` : ""}`,
        {
          details: running ? { job_id: running, session_id: session.id } : undefined,
          hint: running
            ? `Wait for "${running}" (exec_wait), kill it, use another session, or pass mode "background"`
            : "Retry in a moment",
        },
      );
    }
    const script = scriptFor(spec, session.shell);
    const job = this.#newJob(owner, session.id, spec.command, "foreground", session.redactor);
    job.cwd = session.cwd;
    job.requestedCwd = spec.cwd;
    session.reserve(job);
    const res: Reservation = { job, spec, session, script, cwd: session.cwd };
    this.#reserved.set(job.id, res);
    return res;
  }

  /** A slot for a one-shot job beside `base` (QUOTA_EXCEEDED beyond the per-owner limit). */
  reserveBackground(owner: string, base: Session | undefined, spec: LaunchSpec): Reservation {
    let running = 0;
    for (const o of this.#oneshots.values()) if (o.job.owner === owner && !o.job.final) running++;
    for (const r of this.#reserved.values()) {
      if (r.job.owner === owner && r.job.mode === "background") running++;
    }
    const limit = this.#o.registry.limits.backgroundPerOwner;
    if (running >= limit) {
      throw new TermadaError(
        "QUOTA_EXCEEDED",
        `Too many background jobs: ${running} of ${limit} running`,
        { hint: "Wait for or kill a background job (exec_list filter active)" },
      );
    }
    const cwd = spec.cwd ?? base?.cwd ?? this.#o.defaultCwd();
    const job = this.#newJob(
      owner,
      base?.id ?? "background",
      spec.command,
      "background",
      base?.redactor,
    );
    job.cwd = cwd;
    job.requestedCwd = spec.cwd;
    const res: Reservation = { job, spec, session: base, script: undefined, cwd };
    this.#reserved.set(job.id, res);
    return res;
  }

  /** The reservation of a job that has not started, if any. */
  reservationOf(jobId: string): Reservation | undefined {
    return this.#reserved.get(jobId);
  }

  /**
   * Runs a reserved job exactly as reserved. Rejects (and the job ends `failed`) when it cannot
   * start: its session closed meanwhile, the program cannot be spawned.
   */
  async start(res: Reservation): Promise<void> {
    if (this.#reserved.get(res.job.id) !== res) {
      throw new TypeError(`Job "${res.job.id}" is not reserved`);
    }
    const { job } = res;
    if (res.spec.prepare) {
      // Still reserved meanwhile: a kill during it ends the reservation, and nothing starts.
      try {
        await res.spec.prepare();
      } catch (err) {
        const e = toTermadaError(err);
        if (this.#reserved.get(job.id) === res) this.abandon(res, "failed", e.message);
        throw e;
      }
      if (this.#reserved.get(job.id) !== res) {
        throw new TermadaError("NOT_FOUND", `Job "${job.id}" ended before it started`, {
          details: { job_id: job.id },
        });
      }
    }
    this.#reserved.delete(res.job.id);
    if (job.final) {
      throw new TermadaError("NOT_FOUND", `Job "${job.id}" ended before it started`, {
        details: { job_id: job.id },
      });
    }
    if (res.spec.secretSource) {
      try {
        res.spec.secretEnv = res.spec.secretSource();
      } catch (err) {
        const e = toTermadaError(err);
        this.abandon(res, e.code === "DENIED_BY_POLICY" ? "denied" : "failed", e.message);
        throw e;
      }
    }
    job.unpark();
    if (job.mode === "background") {
      const base = res.session && res.session.state !== "closed" ? res.session : undefined;
      if (res.session?.remote && !base) {
        job.finish("failed", { reason: "its session closed before it started" });
        throw sessionClosed(res.session.id, job.id);
      }
      // Beside a session on a server, the job runs on that server (its own terminal there).
      const onServer = base?.remote === true;
      if (onServer && Object.keys(res.spec.secretEnv ?? {}).length > 0) {
        // It would start with `env K=V …` on the SSH exec line, which other users of that
        // server can read in `ps`: no secret travels that way.
        job.finish("failed", { reason: "vault values cannot go to a background job on a server" });
        throw secretsToServerJob();
      }
      const one = await OneShot.start(job, {
        argv: res.spec.command,
        shell: base?.shell ?? this.#o.defaultShell,
        cwd: res.cwd,
        env: onServer
          ? { ...base!.remoteEnv, ...res.spec.env }
          : { ...this.#o.env, ...res.spec.env, ...res.spec.secretEnv },
        cols: base?.cols ?? 120,
        rows: base?.rows ?? 40,
        spawn: onServer ? (req) => base!.spawnBeside(req) : (req) => this.#o.spawn(req, job),
      });
      this.#oneshots.set(job.id, one);
      job.done.then(() => this.#oneshots.delete(job.id));
      return;
    }
    const session = res.session!;
    if (session.state === "closed" || session.job !== job) {
      if (!job.final) job.finish("failed", { reason: "its session closed before it started" });
      throw sessionClosed(session.id, job.id);
    }
    try {
      const secret = Object.keys(res.spec.secretEnv ?? {}).length > 0;
      // With secrets the script is made now: they were resolved after the reservation.
      await session.run(job, secret ? scriptFor(res.spec, session.shell) : res.script!, { secret });
    } catch (err) {
      if (!job.final) {
        job.finish("failed", { reason: `could not start: ${(err as Error).message}` });
      }
      throw sessionClosed(session.id, job.id, err);
    }
  }

  /** Ends a reserved job without running it (`denied` or `failed`) and gives its hold back. */
  abandon(res: Reservation, status: "denied" | "failed", reason: string): void {
    this.#reserved.delete(res.job.id);
    if (!res.job.final) res.job.finish(status, { reason });
    if (res.job.mode === "foreground") res.session?.release(res.job);
  }

  /** Stops a job: INT → TERM → KILL, `graceMs` apart; resolves when it ended (or gave up). */
  async stop(job: Job, graceMs: number | undefined, status: "killed" | "timed_out"): Promise<void> {
    const grace = graceMs ?? this.#o.killGraceMs;
    if (job.final) {
      // Ended, but children it left running (nohup, setsid, `&`) are still its own: end them.
      if (job.processes) {
        if (job.processes.list().length > 0) {
          job.survivors = (await job.processes.end(grace)).survivors;
        } else {
          // Nothing left (they ended on their own): what the job held in the kernel goes too.
          job.survivors = [];
          job.processes.release?.();
        }
      }
      return;
    }
    const res = this.#reserved.get(job.id);
    if (res) {
      // Nothing runs yet: ending the reservation is all a kill means.
      this.abandon(res, "denied", "withdrawn before it ran");
      return;
    }
    job.processes?.stopping?.();
    const one = this.#oneshots.get(job.id);
    if (one) await one.stop(grace, status);
    else {
      const s = this.#o.registry.sessionById(job.sessionId);
      if (s) await s.stopJob(job, grace, status);
    }
    await waitDone(job, 1000);
    // Until the set is empty, not until the prompt returns.
    if (job.processes) job.survivors = (await job.processes.end(0)).survivors;
  }

  /** Stops every running job of every owner (the kill switch's engine half). */
  async stopRunning(graceMs: number, reason: string): Promise<string[]> {
    const active = this.#o.registry.activeJobs().filter((j) => !this.#reserved.has(j.id));
    await Promise.all(active.map((j) => this.stop(j, graceMs, "killed")));
    for (const j of active) if (!j.final) j.finish("killed", { reason });
    return active.map((j) => j.id);
  }

  /** Where input for a job goes, and what the kernel says about its terminal. */
  inputTarget(job: Job): InputTarget {
    const one = this.#oneshots.get(job.id);
    if (one) {
      return {
        write: (s) => one.writeInput(s),
        passwordPrompt: () => passwordMode(one.pty.termMode()),
        redactors: [job.redactor],
        // Its own terminal ends with it: nothing it leaves unread reaches a shell.
        typeAheadSafe: true,
        modes: () => Promise.resolve({ applicationCursor: false, bracketedPaste: false }),
        commandReader: () => commandReaderAmong([one.pty.pid, ...descendantsOf(one.pty.pid)]),
      };
    }
    const s = this.#o.registry.sessionById(job.sessionId);
    if (!s || s.job !== job) {
      throw new TermadaError("INVALID_ARGUMENT", `Job "${job.id}" is not running in a session`);
    }
    if (s.lease && job.mode === "foreground") throw operatorHolds(s.id);
    return {
      write: (t, o) => s.writeInput(t, o),
      passwordPrompt: () => passwordMode(s.pty.termMode()),
      redactors: s.redactor === job.redactor ? [s.redactor] : [s.redactor, job.redactor],
      // bash and zsh drop the lines a job left unread (the `discard` flag); sh cannot.
      typeAheadSafe: !s.remote && (s.shell === "bash" || s.shell === "zsh"),
      modes: () => s.screenModes(),
      // The session shell itself aside: it reads only after the job, and drops what is left.
      commandReader: () => commandReaderAmong(descendantsOf(s.pty.pid)),
    };
  }

  /** Sends a signal to what the job runs in the foreground. */
  signal(job: Job, sig: SignalName): boolean {
    if (job.final) {
      throw new TermadaError(
        "INVALID_ARGUMENT",
        `Cannot signal job "${job.id}": it is ${job.status}`,
      );
    }
    const one = this.#oneshots.get(job.id);
    if (one) return one.signal(sig);
    const s = this.#o.registry.sessionById(job.sessionId);
    if (!s || s.job !== job) {
      throw new TermadaError("INVALID_ARGUMENT", `Job "${job.id}" is not running in a session`);
    }
    return s.signalForeground(sig);
  }

  /** Ends every job and one-shot process (shutdown). Reservations end as denied. */
  async closeAll(): Promise<void> {
    for (const res of [...this.#reserved.values()]) {
      this.abandon(res, "denied", "the daemon shut down before it ran");
    }
    await Promise.all([...this.#oneshots.values()].map((o) => o.close()));
  }

  /** A job an operator typed at the prompt of a session they hold. */
  operatorJob(session: Session, line: string, operator: string): Job {
    const job = this.#newJob(
      `operator:${operator}`,
      session.id,
      [line],
      "foreground",
      session.redactor,
    );
    job.cwd = session.cwd;
    return job;
  }

  #newJob(
    owner: string,
    sessionId: string,
    command: readonly string[],
    mode: "foreground" | "background",
    redactor?: Redactor,
  ): Job {
    const job = new Job({
      id: newId("job"),
      owner,
      sessionId,
      command: [...command],
      mode,
      clock: this.#o.clock,
      redactor: redactor ??
        new Redactor({ extraPatterns: this.#o.redactPatterns, secrets: this.#o.secrets }),
      output: this.#o.output,
    });
    const registry = this.#o.registry;
    registry.addJob(job);
    this.#o.onJob(job);
    job.done.then(() => {
      this.#reserved.delete(job.id);
      job.compact();
      registry.finished(job);
    });
    return job;
  }
}

export interface InputTarget {
  /** `typeAhead`: the job is running, not reading at a prompt (see Session.writeInput). */
  write: (s: string | Uint8Array, options?: { typeAhead?: boolean }) => Promise<void>;
  /** Input written while the job runs cannot outlive it as commands of a shell. */
  typeAheadSafe: boolean;
  /** The terminal modes the program set (how keys and pastes are encoded). */
  modes: () => Promise<{ applicationCursor: boolean; bracketedPaste: boolean }>;
  /**
   * The command name of a process of the job that runs what it reads (a shell, an
   * interpreter), if any: input to a running job may reach it, so it is a command.
   */
  commandReader: () => string | undefined;
  /**
   * True when the terminal reads a line without echoing it (a kernel fact: canonical mode with
   * ECHO off, as getpass, sudo, ssh and `read -s` set it). Line editors (readline in bash or
   * python) turn echo off too but read raw: those are command lines, not passwords.
   */
  passwordPrompt: () => boolean;
  /** Redactors that must learn a secret before it is typed (the session's and the job's). */
  redactors: Redactor[];
}

function commandReaderAmong(pids: readonly number[]): string | undefined {
  // Nothing forked yet: whatever will read it is unknown, so it counts as a command reader.
  if (pids.length === 0) return "a program that has not started yet";
  for (const pid of pids.slice(0, 4096)) {
    const st = procStat(pid);
    // A zombie reads nothing (an earlier job's child nobody reaped yet).
    if (st === undefined || st.state === "Z" || st.state === "X") continue;
    if (readsCommands(pid, st.comm)) return st.comm;
  }
  return undefined;
}

function passwordMode(mode: { echo: boolean; canonical: boolean } | undefined): boolean {
  return mode !== undefined && !mode.echo && mode.canonical;
}

/** The line a session types for `spec`: cwd and env scoped to the command (a subshell). */
function scriptFor(spec: LaunchSpec, shell: ShellKind): string {
  // POSIX sh (dash) has no `$'…'`: its words are quoted the one way every sh reads alike.
  const posix = shell === "sh";
  return scopeScript(argvToScript(spec.command, { posix }), {
    cwd: spec.cwd,
    env: { ...spec.env, ...spec.secretEnv },
    posix,
  });
}

/** Vault values never go to a job beside a session on a server (its argv is visible there). */
export function secretsToServerJob(): TermadaError {
  return new TermadaError(
    "NOT_SUPPORTED",
    "Cannot pass vault values to a background job on a server",
    { hint: 'Run it in the session (mode "foreground"): the value is staged, never typed' },
  );
}

export function operatorHolds(sessionId: string): TermadaError {
  return new TermadaError(
    "SESSION_BUSY",
    `An operator holds the keyboard of session "${sessionId}"`,
    {
      details: { state: "operator", session_id: sessionId },
      hint: "Wait until the operator releases it, or use another session",
    },
  );
}

function sessionClosed(sessionId: string, jobId: string, cause?: unknown): TermadaError {
  return new TermadaError("NOT_FOUND", `Session "${sessionId}" closed before the command started`, {
    cause,
    details: { job_id: jobId, session_id: sessionId },
    hint: "Run it again (your default session is recreated on demand)",
  });
}

/** Statuses a stop may end a job with. */
export type StopStatus = Extract<JobStatus, "killed" | "timed_out">;
