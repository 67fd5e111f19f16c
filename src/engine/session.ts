/**
 * A persistent shell session: an interactive shell on its own PTY with the integration loaded,
 * the marker parser that cuts its byte stream into command boundaries, the raw side (replay
 * ring, asciicast recording, lazy screen) and at most one foreground job at a time.
 *
 * Byte path: PTY → MarkerParser → (raw: literal redaction → ring + recording)
 *                                 (job zone, between `start` and `end` markers: Job.feed)
 */
import { dirname } from "node:path";
import {
  ALL_FLAGS,
  AsciicastRecorder,
  classify,
  HAS_ESC,
  type Matcher,
  RawRing,
  Redactor,
  type ScreenChanges,
  ScreenMirror,
  type ScreenModes,
  type ScreenSnapshot,
  type SecretSet,
} from "../output/mod.ts";
import {
  type ExitStatus,
  killTree,
  procStat,
  type PtySpawnOptions,
  SIGNAL_NUMBERS,
  signalGroup,
  type SignalName,
  snapshotTree,
} from "../pty/mod.ts";
import {
  type Marker,
  MarkerParser,
  type ShellKind,
  shellLaunch,
  typedCommand,
} from "../shell/mod.ts";
import { type Clock, logger, randomHex, TermadaError, within } from "../shared/mod.ts";
import {
  type Cgroup,
  launchProblems,
  type LaunchReady,
  nowTicks,
  type ProcessRef,
  type ProcessScope,
} from "../sandbox/mod.ts";
import { signalProgram } from "./handover.ts";
import { InputWatcher } from "./input.ts";
import { waitDone } from "./oneshot.ts";
import type { Job } from "./job.ts";

const log = logger("engine");
/**
 * How long the raw stream (ring, recording, live terminals) holds a bulk chunk's tail that may
 * be a token cut by the read, when no more output follows (src/output/redact.ts).
 */
const RAW_RELEASE_MS = 50;
/** Process groups remembered per job to find what its leftovers spawn (the first ones kept). */
const MAX_JOB_GROUPS = 64;

export type SessionState = "starting" | "ready" | "busy" | "closed";

export interface SessionOptions {
  id: string;
  owner: string;
  shell: ShellKind;
  cwd: string;
  env: Record<string, string>;
  cols: number;
  rows: number;
  workspace?: string;
  /** Private directory for generated rc files and staged commands (created 0700). */
  dir: string;
  /**
   * `security.run_as`: the files written into the directory belong to this user (the shell,
   * running as it, reads them); the directory stays the daemon's, 0711. Unset: all the daemon's.
   */
  dirOwner?: { uid: number; gid: number };
  /** asciicast file, or undefined to not record. */
  recordingPath?: string;
  recording?: { maxFileBytes: number; keepFiles: number };
  ringBytes: number;
  /** Extra redaction patterns from the configuration. */
  redactPatterns?: readonly Matcher[];
  /** Daemon-wide secrets (vault values) masked besides this session's own. */
  secrets?: SecretSet;
  userRc: boolean;
  clock: Clock;
  startTimeoutMs: number;
  onClosed: (s: Session) => void;
  /** Called when an operator holding the keyboard starts a command at the prompt. */
  onOperatorCommand?: (s: Session, line: string, operator: string) => Job;
  /** Starts the shell on its PTY (through the sandbox's launcher, or on a server). */
  spawn: (req: PtySpawnOptions & { reach?: string[] }) => Promise<Spawned>;
  /** Set for a session on a server: where its files go and how a dropped link is handled. */
  remote?: RemoteHooks;
}

/** What a session on a server needs besides its terminal. */
export interface RemoteHooks {
  /** The server's inventory name (labels, records). */
  server: string;
  /** Writes private files on the server (mode 0600, their directory 0700). */
  writeFiles(files: readonly { path: string; content: string }[]): Promise<void>;
  /** Removes the session's directory on the server (best effort). */
  removeDir(dir: string): Promise<void>;
  /** Reconnect attempts after the link drops, before the session closes. */
  reconnectAttempts: number;
  /** The link dropped (the job that ran is orphaned) / came back with a fresh shell. */
  onLinkLost?(s: Session, reason: string, job: Job | undefined): void;
  onReconnected?(s: Session, attempt: number): void;
}

/**
 * What a session drives: a local Pty, or a terminal on a server (src/remote). Remote ones
 * cannot tell the foreground process group or the tty modes (undefined) and have pid 0.
 */
export interface Terminal {
  readonly pid: number;
  readonly ttyPath: string;
  readonly cols: number;
  readonly rows: number;
  readonly remote?: boolean;
  setSink(onData: (chunk: Uint8Array) => void, onEnd?: () => void): void;
  readonly exited: Promise<ExitStatus>;
  readonly outputEnded: Promise<void>;
  readonly exitStatus: ExitStatus | undefined;
  write(data: Uint8Array | string): Promise<void>;
  resize(cols: number, rows: number): void;
  foregroundPgid(): number | undefined;
  termMode(): { echo: boolean; canonical: boolean } | undefined;
  signal(sig: SignalName, target?: "foreground" | "child" | "group"): boolean;
  close(options?: { graceMs?: number }): Promise<ExitStatus>;
  /** Remote: why it ended, when the link (not the shell) went away. */
  readonly linkLost?: string;
}

/** A program started on a terminal, with its processes and the handle that stops watching execs. */
export interface Spawned {
  pty: Terminal;
  /** Its processes (local only: a server's are out of reach). */
  scope?: ProcessScope;
  detach(): void;
  /** What its launcher reported (local sessions in the boundary): its failed steps go in hints. */
  report?: LaunchReady;
}

export class Session {
  readonly id: string;
  readonly owner: string;
  readonly shell: ShellKind;
  readonly workspace: string | undefined;
  readonly createdAt: number;
  readonly redactor: Redactor;
  readonly ring: RawRing;
  cwd: string;
  state: SessionState = "starting";
  closeReason: string | undefined;
  job: Job | undefined;
  /** An operator holds the keyboard: agents cannot run or type here until released. */
  lease: { operator: string; since: number } | undefined;
  /** While true (and leased), what agents read from the current job is held back. */
  outputPaused = false;
  /** What the operator typed since the last prompt (the command line of an operator job). */
  #operatorLine = "";
  /** Where it runs: "local" or the server's name. */
  readonly target: string;
  /** Link state of a remote session (undefined for local ones). */
  link: { reconnects: number; lastError?: string; lostAt?: number } | undefined;
  /** Said once in the next result on this session (a reconnect reset cwd and env). */
  notice: string | undefined;
  #opts: SessionOptions;
  #nonce = "";
  #spawnReq: (PtySpawnOptions & { reach?: string[] }) | undefined;
  #pty!: Terminal;
  #spawned: Spawned | undefined;
  #parser: MarkerParser;
  #rawRedact: ReturnType<Redactor["stream"]>;
  /** When the current job started, in clock ticks (its processes start from then). */
  #jobFrom: number | undefined;
  /** Releases the raw stream's token hold when no output followed (RAW_RELEASE_MS). */
  #rawTimer: ReturnType<typeof setTimeout> | undefined;
  #recorder: AsciicastRecorder | undefined;
  #screen: ScreenMirror;
  #zone = false;
  /** A command line was typed and its `start` marker has not arrived. */
  #sent = false;
  #stagePath: string | undefined;
  #staged = false;
  /** The staged script on the server holds secrets: overwritten when the job ends. */
  #stagedSecret = false;
  /**
   * Input was written while the job ran (exec_write to a running job): what it did not read
   * must not reach this shell as commands. `discard` is the flag file the shell checks before
   * its next prompt (it then drops every complete line waiting); the next typed command starts
   * with Ctrl-U so a partial one cannot prefix it.
   */
  #typeAhead = false;
  #killLine = false;
  #rawListeners = new Set<(bytes: Uint8Array, endOffset: number) => void>();
  #closedP = Promise.withResolvers<void>();
  #closedDone = false;
  readonly #closeListeners = new Set<() => void>();
  #ready = Promise.withResolvers<void>();
  #input!: InputWatcher;
  #closing: Promise<void> | undefined;
  #endPromptTimer: ReturnType<typeof setTimeout> | undefined;

  private constructor(opts: SessionOptions) {
    this.id = opts.id;
    this.owner = opts.owner;
    this.shell = opts.shell;
    this.workspace = opts.workspace;
    this.cwd = opts.cwd;
    this.createdAt = opts.clock.now();
    this.#opts = opts;
    this.target = opts.remote?.server ?? "local";
    if (opts.remote) this.link = { reconnects: 0 };
    this.redactor = new Redactor({ extraPatterns: opts.redactPatterns, secrets: opts.secrets });
    this.#rawRedact = this.redactor.stream();
    this.#parser = new MarkerParser(randomHex(16));
    this.ring = new RawRing(opts.ringBytes);
    this.#screen = new ScreenMirror(this.ring, { cols: opts.cols, rows: opts.rows });
  }

  /** Starts the shell and resolves once its first prompt is up. */
  static async start(opts: SessionOptions): Promise<Session> {
    const s = new Session(opts);
    const nonce = randomHex(16);
    s.#nonce = nonce;
    s.#parser = new MarkerParser(nonce);
    const launch = shellLaunch(opts.shell, { nonce, dir: opts.dir, userRc: opts.userRc });
    s.#launchFiles = launch.files;
    if (!opts.remote) {
      Deno.mkdirSync(opts.dir, { recursive: true, mode: 0o700 });
      for (const f of launch.files) Deno.writeTextFileSync(f.path, f.content, { mode: 0o600 });
      if (opts.dirOwner) Deno.chmodSync(opts.dir, 0o711);
      for (const f of launch.files) s.#ownPrivate(f.path);
    }
    if (opts.recordingPath) {
      try {
        Deno.mkdirSync(dirname(opts.recordingPath), { recursive: true, mode: 0o700 });
        s.#recorder = await AsciicastRecorder.open(opts.recordingPath, {
          cols: opts.cols,
          rows: opts.rows,
          title: `termada ${opts.id}`,
          maxFileBytes: opts.recording?.maxFileBytes,
          keepFiles: opts.recording?.keepFiles,
          clock: opts.clock,
        });
      } catch (err) {
        log.warn("recording disabled", { session: opts.id, error: err });
      }
    }
    s.#spawnReq = {
      reach: [opts.dir],
      argv: launch.argv,
      cwd: opts.cwd,
      env: { ...opts.env, ...launch.env },
      cols: opts.cols,
      rows: opts.rows,
    };
    try {
      if (opts.remote) await opts.remote.writeFiles(launch.files);
      s.#attach(await opts.spawn(s.#spawnReq));
    } catch (err) {
      await s.#recorder?.close();
      await s.#cleanupFiles();
      if (err instanceof TermadaError) throw err;
      throw new TermadaError("INTERNAL", `Cannot start ${opts.shell} in "${opts.cwd}"`, {
        cause: err,
        hint: "Check that the shell is installed and the directory exists",
      });
    }
    const first = await within(s.#ready.promise.then(() => "ready" as const), opts.startTimeoutMs);
    if (first === undefined || s.state === "closed") {
      const tail = new TextDecoder().decode(s.ring.snapshot().slice(-300));
      // What the boundary could not set up (a half-built mount namespace hides the shell's own
      // rc file: it then shows the system's prompt, not ours) says why, where there is a why.
      const problems = launchProblems(s.#spawned?.report);
      await s.close("shell did not start");
      throw new TermadaError("INTERNAL", `Shell ${opts.shell} did not show its prompt`, {
        hint: `Last output: ${JSON.stringify(tail)}${
          problems.length > 0 ? `; the session's boundary reported: ${problems.join("; ")}` : ""
        }`,
      });
    }
    return s;
  }

  #launchFiles: readonly { path: string; content: string }[] = [];

  /**
   * Gives a file the daemon wrote in this session's directory to the run_as user (`dirOwner`),
   * so the shell can read it; a no-op without run_as. Whoever writes a file there the shell must
   * read (the staged command too) calls this after writing it. The directory itself stays the
   * daemon's (0711: the user may open what it is given by name, and never create, rename or
   * replace an entry — a symlink it planted where the daemon writes next would be followed).
   */
  #ownPrivate(path: string): void {
    const o = this.#opts.dirOwner;
    if (o && !this.#opts.remote) Deno.chownSync(path, o.uid, o.gid);
  }

  /** Takes a started terminal: output to the parser, its exit to the session. */
  #attach(spawned: Spawned): void {
    this.#spawned = spawned;
    const pty = spawned.pty;
    this.#pty = pty;
    this.#input = new InputWatcher(pty, pty.pid, () => (this.#zone ? this.job : undefined), true);
    pty.setSink((c) => {
      if (this.#pty === pty) this.#onData(c);
    }, () => {
      if (this.#pty === pty) this.#onOutputEnd();
    });
    pty.exited.then(() => {
      if (this.#pty === pty) this.#onShellExit();
    });
  }

  get pty(): Terminal {
    return this.#pty;
  }

  get remote(): boolean {
    return this.#opts.remote !== undefined;
  }

  /** The environment this session's shell was given by us (for jobs beside it on its server). */
  get remoteEnv(): Record<string, string> {
    const env = { ...this.#opts.env };
    delete env.TERMADA_SESSION_ID;
    return env;
  }

  /** Starts another program where this session runs (a background job on its server). */
  spawnBeside(req: PtySpawnOptions): Promise<Spawned> {
    if (!this.#opts.remote) throw new TypeError("spawnBeside is for sessions on a server");
    return this.#opts.spawn(req);
  }
  // Between two terminals (a remote session reconnecting) the last known size stands.
  #cols = 0;
  #rows = 0;
  get pid(): number {
    return this.#pty?.pid ?? 0;
  }
  get cols(): number {
    return this.#pty?.cols ?? (this.#cols || this.#opts.cols);
  }
  get rows(): number {
    return this.#pty?.rows ?? (this.#rows || this.#opts.rows);
  }

  /** Types a job's command into the shell. The caller checked the session is ready. */
  /** Holds the session for a job that waits for approval: no other command runs meanwhile. */
  reserve(job: Job): void {
    if (this.state !== "ready") throw new Error(`session ${this.id} is ${this.state}`);
    this.state = "busy";
    this.job = job;
    this.#ready = Promise.withResolvers();
  }

  /** Gives a reservation back (the job was denied or cancelled). */
  release(job: Job): void {
    if (this.job !== job || this.#sent || this.#zone || this.state !== "busy") return;
    this.job = undefined;
    this.state = "ready";
    this.#ready.resolve();
  }

  /** `secret`: the script holds secret values: staged (never typed), wiped when the job ends. */
  async run(job: Job, script: string, options: { secret?: boolean } = {}): Promise<void> {
    const reserved = this.state === "busy" && this.job === job && !this.#sent && !this.#zone;
    if (this.state !== "ready" && !reserved) {
      throw new Error(`session ${this.id} is ${this.state}`);
    }
    this.state = "busy";
    this.job = job;
    this.#sent = true;
    this.#zone = false;
    if (!reserved) this.#ready = Promise.withResolvers();
    this.#stagePath ??= `${this.#opts.dir}/cmd.sh`;
    const typed = typedCommand(this.shell, script, this.#stagePath, { stage: options.secret });
    if (this.#killLine) {
      // A partial line the last job left unread would otherwise prefix this command.
      typed.line = "\x15" + typed.line;
      this.#killLine = false;
    }
    if (typed.staged !== undefined) {
      if (this.#opts.remote) {
        await this.#opts.remote.writeFiles([{ path: this.#stagePath, content: typed.staged }]);
        if (options.secret) this.#stagedSecret = true;
      } else {
        Deno.writeTextFileSync(this.#stagePath, typed.staged, { mode: 0o600 });
        // Under run_as the session's user must read it (root wrote it).
        this.#ownPrivate(this.#stagePath);
        this.#staged = true;
      }
    }
    this.#recorder?.marker(`job ${job.id}`);
    this.#trackProcesses(job);
    try {
      await this.#pty.write(typed.line);
    } catch (err) {
      this.#sent = false;
      job.finish("failed", { reason: `could not type the command: ${(err as Error).message}` });
      this.#jobDone();
      throw err;
    }
  }

  /**
   * The job's processes: those of this session that started while it ran, and what those it
   * left running start after it ended. With cgroups these are moved to a cgroup of the job's own
   * when it ends (scope.adopt), which keeps whatever they start. Without, they are found by
   * process group when the parent that made them is gone (a double fork in a `nohup` loop is
   * re-parented to the daemon). While the job is being stopped, whatever starts in the session
   * meanwhile is its own too (a `trap` that runs `setsid …` on TERM), unless another job of the
   * session runs.
   */
  #trackProcesses(job: Job): void {
    const scope = this.#spawned?.scope;
    if (!scope) return;
    // One tick (10 ms) of slack each side: /proc start times and the uptime clock are read
    // at different moments and both truncate to a tick.
    const from = nowTicks() - 1;
    let to: number | undefined;
    /** What the job left running, moved to a cgroup of its own when it ended (scope.adopt). */
    let leftovers: Cgroup | undefined;
    /** Nothing was left when it ended (cgroups say so): its set stays empty, unread. */
    let nothingLeft = false;
    const ended = () => {
      if (to !== undefined) return;
      to = nowTicks() + 1;
      const adopted = scope.adopt(job.id);
      if (adopted === "none") nothingLeft = true;
      else leftovers = adopted;
    };
    job.done.then(ended);
    /** Process groups of the job's processes (never the shell's), each with when it was seen. */
    const groups = new Map<number, number>();
    let stopping: number | undefined;
    const list = (): ProcessRef[] => {
      if (job.final) ended(); // a reader may come before the job's done callbacks
      if (nothingLeft) return [];
      const all = scope.startedBetween(from, undefined);
      const shellGroup = procStat(scope.root)?.pgrp;
      const other = this.job !== undefined && this.job !== job ? this.#jobFrom : undefined;
      const mine: ProcessRef[] = [];
      const later: { p: ProcessRef; pgrp: number | undefined }[] = [];
      for (const p of all) {
        if (to === undefined || p.startTime <= to) {
          mine.push(p);
          const g = p.pgrp ?? procStat(p.pid)?.pgrp;
          if (
            g !== undefined && g !== shellGroup && !groups.has(g) && groups.size < MAX_JOB_GROUPS
          ) {
            groups.set(g, p.startTime);
          }
        } else later.push({ p, pgrp: p.pgrp ?? procStat(p.pid)?.pgrp });
      }
      for (const { p, pgrp } of later) {
        if (other !== undefined && p.startTime >= other) continue; // the running job's
        const seen = pgrp === undefined ? undefined : groups.get(pgrp);
        if (
          (seen !== undefined && p.startTime >= seen) ||
          (stopping !== undefined && p.startTime >= stopping)
        ) {
          mine.push(p);
        }
      }
      // Whatever the leftovers started since, in any process group or session: still theirs.
      if (leftovers) {
        const have = new Set(mine.map((p) => p.pid));
        for (const pid of leftovers.procs()) {
          const st = have.has(pid) ? undefined : procStat(pid);
          if (st && st.state !== "Z") mine.push({ pid, startTime: st.startTime, pgrp: st.pgrp });
        }
      }
      return mine;
    };
    const release = () => {
      const cg = leftovers;
      leftovers = undefined;
      cg?.remove({ timeoutMs: 0 }).catch(() => false); // only if empty: else session close ends it
    };
    this.#jobFrom = from;
    job.processes = {
      list,
      stopping: () => {
        stopping ??= nowTicks() - 1;
      },
      end: async (graceMs) => {
        stopping ??= nowTicks() - 1;
        const r = await scope.end({
          set: list,
          graceMs,
          ...(leftovers ? { cgroup: leftovers } : {}),
        });
        if (r.survivors.length === 0) release();
        return r;
      },
      release,
    };
  }

  /**
   * Writes input for the current job. `typeAhead`: the job is running, not reading at a prompt
   * (control checked it may be written to): the shell is told to drop what the job leaves
   * unread, before the bytes go (local sessions only; control refuses it on a server).
   */
  async writeInput(
    data: string | Uint8Array,
    options: { typeAhead?: boolean } = {},
  ): Promise<void> {
    if (options.typeAhead && !this.#typeAhead) {
      if (this.#opts.remote) {
        throw new TermadaError("NOT_SUPPORTED", "Type-ahead cannot be discarded on a server");
      }
      const flag = `${this.#opts.dir}/discard`;
      Deno.writeTextFileSync(flag, "", { mode: 0o600 });
      this.#ownPrivate(flag);
      this.#typeAhead = true;
    }
    await this.#live().write(data);
    this.job?.resumed();
    this.#input.poke();
  }

  /** What the program asked of the terminal (application cursor keys, bracketed paste). */
  screenModes(): Promise<ScreenModes> {
    return this.#screen.modes();
  }

  /** Writes raw bytes to the terminal (operator takeover, tests). */
  writeRaw(data: Uint8Array | string): Promise<void> {
    try {
      return this.#live().write(data);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /** The terminal now; a remote session between two terminals is SESSION_BUSY. */
  #live(): Terminal {
    if (this.#pty) return this.#pty;
    throw new TermadaError(
      "SESSION_BUSY",
      `Session "${this.id}" is reconnecting to "${this.target}"`,
      {
        retriable: true,
        details: { session_id: this.id, state: "reconnecting" },
        hint: "Retry in a moment; session_list shows its link",
      },
    );
  }

  /** Keys typed by the operator holding the keyboard (remembered as the command line). */
  operatorInput(text: string): Promise<void> {
    for (const ch of text) {
      if (ch === "\r" || ch === "\n") continue;
      if (ch === "\x7f" || ch === "\b") this.#operatorLine = this.#operatorLine.slice(0, -1);
      else if (ch === "\x03" || ch === "\x15") this.#operatorLine = "";
      else if (ch >= " " && this.#operatorLine.length < 4096) this.#operatorLine += ch;
    }
    try {
      return this.#live().write(text);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  resize(cols: number, rows: number): void {
    this.#cols = cols;
    this.#rows = rows;
    this.#pty?.resize(cols, rows);
    this.#screen.resize(cols, rows);
    this.#recorder?.resize(cols, rows);
  }

  /** Resolves once the session is closed and cleaned up. */
  get closed(): Promise<void> {
    return this.#closedP.promise;
  }

  /**
   * Calls `cb` once the session is closed and cleaned up (soon, if it is already); returns the
   * unsubscribe. For watchers that may go before the session does: a reaction chained to
   * `closed` would keep each of them (and what it holds) until the session ends.
   */
  onClose(cb: () => void): () => void {
    if (this.#closedDone) {
      queueMicrotask(cb);
      return () => {};
    }
    this.#closeListeners.add(cb);
    return () => void this.#closeListeners.delete(cb);
  }

  /**
   * Live raw terminal bytes (redacted, markers removed) as they reach the replay ring, with the
   * ring offset after them: for operators' live terminals. Returns the unsubscribe function.
   */
  onRaw(listener: (bytes: Uint8Array, endOffset: number) => void): () => void {
    this.#rawListeners.add(listener);
    return () => this.#rawListeners.delete(listener);
  }

  /**
   * The screen as text. The rows are redacted again: a full-screen program may draw a secret
   * with escape sequences between its bytes (the raw stream's redactor sees it split), but the
   * rendered row holds it whole.
   */
  async screen(): Promise<ScreenSnapshot> {
    const snap = await this.#screen.snapshot();
    return {
      ...snap,
      lines: snap.lines.map((l) => this.redactor.redactPiece(l)),
      title: this.redactor.redactPiece(snap.title),
    };
  }

  /** The rows changed since `since` (every row without one), redacted like `screen()`. */
  async screenSince(since?: string): Promise<ScreenChanges> {
    const c = await this.#screen.since(since);
    return {
      ...c,
      lines: c.lines.map((l) => ({ row: l.row, text: this.redactor.redactPiece(l.text) })),
      title: this.redactor.redactPiece(c.title),
    };
  }

  /** Sends a signal to what runs in the foreground of the terminal (see `signalProgram`). */
  signalForeground(sig: SignalName): boolean {
    const pty = this.#pty;
    if (!pty) return false;
    const job = this.job;
    if (pty.remote || !job) return pty.signal(sig, "foreground");
    return signalProgram(pty, {
      startedAt: job.startedAt,
      live: () => !job.final && this.#pty === pty,
      started: () => this.#zone,
    }, sig);
  }

  /**
   * Stops the current job: INT → TERM → KILL to its process group and every process that
   * descended from it (even ones that left the group), `graceMs` apart. The shell survives
   * unless the job is the shell itself ignoring signals; then the session is closed.
   */
  async stopJob(job: Job, graceMs: number, status: "killed" | "timed_out"): Promise<void> {
    if (job.final || this.job !== job) return;
    if (this.#opts.remote) return await this.#stopRemoteJob(job, graceMs, status);
    const shellPgid = this.#pty.pid;
    const fg = this.#pty.foregroundPgid();
    const roots = fg !== undefined && fg !== shellPgid
      ? snapshotTree(this.#pty.pid).filter((p) => p.pgrp === fg)
      : [];
    const tree = roots.flatMap((r) => [r, ...snapshotTree(r.pid)]);
    const steps: SignalName[] = ["INT", "TERM", "KILL"];
    for (const sig of steps) {
      job.stopping = { status, signal: sig };
      if (sig === "INT" || fg === shellPgid || fg === undefined) {
        this.#pty.signal(sig, "foreground");
      } else signalGroup(fg, sig);
      if (sig !== "INT") killTree(tree, sig);
      if (await waitDone(job, sig === "KILL" ? 2000 : graceMs)) return;
    }
    // Still running: the shell itself is stuck (a builtin loop ignoring signals).
    await this.close(`job ${job.id} could not be stopped`);
  }

  /**
   * On a server the job's processes are out of reach: ^C, then ^\, then the shell is hung up
   * (SIGHUP to what it runs) and a fresh one started. Best effort, and the result says so.
   */
  async #stopRemoteJob(job: Job, graceMs: number, status: "killed" | "timed_out"): Promise<void> {
    for (const sig of ["INT", "QUIT"] as const) {
      job.stopping = { status, signal: sig };
      this.#pty.signal(sig, "foreground");
      if (await waitDone(job, graceMs)) return;
    }
    job.stopping = { status, signal: "HUP" };
    job.finish(status, {
      signal: "HUP",
      reason: `best effort on server "${this.target}": ^C and ^\\ did not end it, so the ` +
        "remote shell was hung up; a process that ignores SIGHUP may still run there",
    });
    this.#jobDone();
    this.#zone = false;
    this.#sent = false;
    await this.#relaunch("the shell was hung up to stop a job", false);
  }

  /**
   * The link to the server dropped (or the shell was hung up): whatever ran is orphaned, and a
   * fresh shell is started with back-off (cwd and environment are lost; `notice` says so).
   */
  async #reconnect(reason: string): Promise<void> {
    const job = this.job;
    if (job && !job.final) {
      job.finish("orphaned", {
        reason: `the link to server "${this.target}" dropped (${reason}); the remote process ` +
          "may still run there",
      });
    }
    if (this.link) {
      this.link.lastError = reason;
      this.link.lostAt = this.#opts.clock.now();
    }
    this.#opts.remote?.onLinkLost?.(this, reason, job);
    this.#jobDone();
    this.#zone = false;
    this.#sent = false;
    await this.#relaunch(reason);
  }

  /** `lost`: the link dropped (counted in `link.reconnects`), not a hang-up of ours. */
  async #relaunch(reason: string, lost = true): Promise<void> {
    const remote = this.#opts.remote!;
    this.state = "starting";
    this.#ready = Promise.withResolvers();
    const old = this.#pty;
    this.#cols = old?.cols ?? this.#cols;
    this.#rows = old?.rows ?? this.#rows;
    this.#input?.stop();
    // The old terminal is detached first: nothing it still says reaches the parser.
    this.#pty = undefined as unknown as Terminal;
    old?.close({ graceMs: 200 }).catch(() => {});
    const closed = () => this.#closing !== undefined;
    for (let attempt = 1; attempt <= remote.reconnectAttempts; attempt++) {
      if (closed()) return;
      if (attempt > 1) {
        await new Promise((r) => setTimeout(r, Math.min(500 * 2 ** (attempt - 2), 30_000)));
        if (closed()) return;
      }
      try {
        this.#parser = new MarkerParser(this.#nonce);
        await remote.writeFiles(this.#launchFiles);
        const spawned = await this.#opts.spawn(this.#spawnReq!);
        if (closed()) {
          await spawned.pty.close({ graceMs: 100 });
          return;
        }
        this.#attach(spawned);
        const up = await within(this.#ready.promise.then(() => true), this.#opts.startTimeoutMs);
        if (up && !closed()) {
          if (lost) this.link!.reconnects++;
          this.notice = `Session "${this.id}" reconnected to "${this.target}" at ${
            new Date(this.#opts.clock.now()).toISOString()
          } after ${reason}: this is a fresh shell, cwd and environment were reset`;
          this.cwd = this.#opts.cwd;
          if (lost) remote.onReconnected?.(this, attempt);
          return;
        }
        this.#pty = undefined as unknown as Terminal;
        await spawned.pty.close({ graceMs: 100 });
      } catch (err) {
        if (this.link) this.link.lastError = (err as Error).message;
        log.info("reconnect failed", { session: this.id, attempt, error: err });
      }
    }
    await this.close(`the link to "${this.target}" could not be re-established`);
  }

  /** Closes the session; a running job ends as `killed`. Idempotent. */
  close(reason = "closed"): Promise<void> {
    return this.#closing ??= this.#teardown(reason);
  }

  async #teardown(reason: string): Promise<void> {
    this.closeReason ??= reason;
    const job = this.job;
    if (job?.status === "pending_approval") {
      // It never ran: nothing was killed.
      job.finish("denied", { reason: `the session closed (${reason}) before an operator decided` });
    }
    if (job && !job.final) job.stopping = { status: "killed", signal: "HUP" };
    this.state = "closed";
    this.#clearTimers();
    await this.#pty?.close({ graceMs: 300 }).catch(() => undefined);
    // Everything the session led to, wherever it went (setsid, nohup, double fork): gone.
    const scope = this.#spawned?.scope;
    if (scope) {
      const end = await scope.end({ wholeCgroup: true, graceMs: 100 }).catch((err) => {
        log.warn("could not end a session's processes", { session: this.id, error: err });
        return undefined;
      });
      // The job the close killed reports what could not be ended, like a kill does.
      if (job) job.survivors = end ? end.survivors.map((s) => ({ ...s })) : undefined;
      if (end && end.survivors.length > 0) {
        log.warn("processes survived a session close", {
          session: this.id,
          survivors: end.survivors,
        });
      }
      await scope.dispose().catch(() => false);
    }
    this.#spawned?.detach();
    if (job && !job.final) job.finish("killed", { signal: "HUP", reason: `session ${reason}` });
    this.job = undefined;
    this.#ready.resolve();
    if (this.#rawTimer !== undefined) clearTimeout(this.#rawTimer);
    this.#rawTimer = undefined;
    this.#emitRaw(this.#rawRedact.release()); // not a literal's start: that never goes out
    this.#screen.dispose();
    await this.#recorder?.close();
    await this.#cleanupFiles();
    this.#closedP.resolve();
    this.#closedDone = true;
    const listeners = [...this.#closeListeners];
    this.#closeListeners.clear();
    for (const cb of listeners) queueMicrotask(cb);
    this.#opts.onClosed(this);
  }

  async #cleanupFiles(): Promise<void> {
    if (this.#opts.remote) {
      await this.#opts.remote.removeDir(this.#opts.dir).catch(() => {/* best effort */});
      return;
    }
    try {
      await Deno.remove(this.#opts.dir, { recursive: true });
    } catch {
      // already gone: nothing to clean
    }
  }

  /** Resolves when the shell is ready for the next command (or closed). */
  get ready(): Promise<void> {
    return this.#ready.promise;
  }

  #onData(chunk: Uint8Array): void {
    let fed = false;
    // One scan tells every stage below what it can skip; bytes carried over from the last chunk
    // were not scanned, so then nothing is skipped.
    const flags = this.#parser.carrying ? ALL_FLAGS : classify(chunk);
    for (const piece of this.#parser.push(chunk, (flags & HAS_ESC) !== 0)) {
      if ("marker" in piece) {
        this.#onMarker(piece.marker);
        continue;
      }
      this.#emitRaw(this.#rawRedact.push(piece.data, flags));
      if (this.#zone && this.job) {
        this.job.feed(piece.data, flags);
        fed = true;
      }
    }
    if (fed) this.#input.poke();
    if (this.#rawTimer !== undefined) {
      clearTimeout(this.#rawTimer);
      this.#rawTimer = undefined;
    }
    // A bulk chunk's tail that may be a token cut by the read waits for the next chunk; when
    // none comes, it goes out as it is.
    if (this.#rawRedact.tokenHeld) {
      this.#rawTimer = setTimeout(() => {
        this.#rawTimer = undefined;
        this.#emitRaw(this.#rawRedact.release());
      }, RAW_RELEASE_MS);
    }
  }

  /** Redacted raw bytes to the ring, the recording and the operators' terminals. */
  #emitRaw(raw: Uint8Array): void {
    if (raw.length === 0) return;
    this.ring.append(raw);
    this.#recorder?.output(raw);
    for (const l of this.#rawListeners) l(raw, this.ring.totalBytes);
  }

  #onMarker(m: Marker): void {
    switch (m.kind) {
      case "start":
        if (this.#sent) {
          this.#sent = false;
          this.#zone = true;
          this.#input.poke();
        } else if (!this.job && this.lease && this.#opts.onOperatorCommand) {
          // The operator typed a command at the prompt: it becomes an operator job.
          const line = this.#operatorLine.trim() || "(typed by the operator)";
          this.#operatorLine = "";
          this.job = this.#opts.onOperatorCommand(this, line, this.lease.operator);
          this.state = "busy";
          this.#ready = Promise.withResolvers();
          this.#zone = true;
        }
        return;
      case "end": {
        this.cwd = m.cwd;
        if (this.#typeAhead) {
          // The shell dropped the waiting lines before this marker: the flag has served.
          this.#typeAhead = false;
          this.#killLine = true;
          try {
            Deno.removeSync(`${this.#opts.dir}/discard`);
          } catch {
            // already gone
          }
        }
        const job = this.job;
        if (job && (this.#zone || this.#sent)) {
          this.#zone = false;
          this.#sent = false;
          job.finish("exited", { exitCode: m.status, cwd: m.cwd, source: "shell" });
          this.#jobDone();
          // Normally the prompt marker follows at once; if PS1 was replaced, do not hang.
          this.#endPromptTimer = setTimeout(() => this.#onPrompt(), 300);
        }
        return;
      }
      case "prompt":
        this.#onPrompt();
        return;
    }
  }

  #onPrompt(): void {
    clearTimeout(this.#endPromptTimer);
    this.#endPromptTimer = undefined;
    if (this.state === "closed") return;
    if (this.job && !this.job.final) return; // a nested prompt while a job runs
    this.state = "ready";
    this.#ready.resolve();
  }

  #jobDone(): void {
    this.#input?.stop();
    this.job = undefined;
    if (this.#stagedSecret && this.#opts.remote) {
      this.#stagedSecret = false;
      const path = this.#stagePath!;
      this.#opts.remote.writeFiles([{ path, content: "" }]).catch((err) =>
        log.warn("could not wipe a staged script holding secrets on the server", {
          session: this.id,
          error: err,
        })
      );
    }
    if (this.#staged) {
      this.#staged = false;
      try {
        Deno.removeSync(this.#stagePath!);
      } catch {
        // the command removed or moved it itself; nothing to clean
      }
    }
  }

  #onOutputEnd(): void {
    const rest = this.#parser.flush();
    if (rest && this.#zone && this.job) this.job.feed(rest);
  }

  async #onShellExit(): Promise<void> {
    if (this.state === "closed") return;
    if (this.#opts.remote && this.#closing === undefined) {
      const lost = this.#pty.linkLost;
      if (lost !== undefined || this.state === "starting") {
        if (this.state !== "starting") await this.#reconnect(lost ?? "the shell ended");
        return;
      }
    }
    // Let the last bytes drain (EIO) unless a leftover background process holds the tty.
    await within(this.#pty.outputEnded, 200);
    const st = this.#pty.exitStatus;
    const job = this.job;
    if (job && !job.final) {
      const code = st?.code ?? (st?.signal ? 128 + (SIGNAL_NUMBERS[st.signal] ?? 0) : undefined);
      job.finish("exited", {
        exitCode: code ?? undefined,
        source: "kernel",
        signal: st?.signal ?? undefined,
        reason: "the shell exited; the session is closed",
      });
    }
    await this.close("shell exited");
  }

  #clearTimers(): void {
    this.#input?.stop();
    clearTimeout(this.#endPromptTimer);
    this.#endPromptTimer = undefined;
  }
}
