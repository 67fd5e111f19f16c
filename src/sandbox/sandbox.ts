/**
 * The session boundary, as the engine uses it: which kernel features this machine has (and why
 * not, when it lacks one), and `spawn()`, which starts a program on a PTY through the launcher
 * so that it runs with the exec filter (every exec reaches `decide`), the control plane hidden
 * (a private mount namespace where the launcher may mount, else Landlock rules), Landlock's
 * scoping (no signals, ptrace or abstract sockets outside the session), and its own cgroup
 * (kill means gone). What it starts comes back with its ProcessScope.
 *
 * With `security.run_as` every program becomes that user before it runs: in the launcher, or
 * behind `setpriv` when no launcher is needed (never as the daemon's user instead).
 *
 * Modes (`security.exec_gate`): `required` refuses to start what cannot get the exec filter;
 * `auto` (default) uses what exists and reports what is missing; `off` starts programs directly,
 * as before. A missing feature can be injected (tests, diagnostics): it behaves exactly as absent.
 */
import {
  allPids,
  numericEntries,
  procStat,
  type Pty,
  Pty as PtyClass,
  type PtySpawnOptions,
  readProcFile,
} from "../pty/mod.ts";
import { logger, TermadaError } from "../shared/mod.ts";
import { cstr, LINUX, S_IFMT, S_IFREG, statPath, sys, syscalls } from "../../ffi/mod.ts";
import { type Cgroup, CgroupTree, detectCgroup } from "./cgroup.ts";
import {
  type ExecDecider,
  type ExecEvent,
  ExecGate,
  GateCounters,
  type GateStats,
  gateStats,
} from "./gate.ts";
import type { ExecFastPath } from "./fast_path.ts";
import { GateThread } from "./gate_thread.ts";
import { landlockAbi } from "./landlock.ts";
import { controlPair, handshake, LaunchChannel, launcherArgv, launcherEnv } from "./launch.ts";
import { LauncherCode } from "./launcher_code.ts";
import { becomeSubreaper } from "./reaper.ts";
import { ProcessScope } from "./scope.ts";
import { type RunAsUser, SETPRIV, setprivArgv } from "./run_as.ts";
import { notifySupported } from "./seccomp.ts";
import type { LaunchReady, LaunchSpec } from "./spec.ts";

const log = logger("sandbox");

export type ExecGateMode = "required" | "auto" | "off";
export type Feature = "seccomp" | "landlock" | "cgroup" | "mounts" | "terminals";

export interface FeatureState {
  active: boolean;
  /** Why not, when it is not active. */
  reason?: string;
}

export interface SandboxReport {
  mode: ExecGateMode;
  exec_gate: FeatureState;
  /** How the control plane's files are hidden: `mounts` (nothing else changes) or `landlock`. */
  hiding: FeatureState & { how?: "mounts" | "landlock"; paths: string[] };
  landlock: FeatureState & { abi: number };
  /**
   * Each session on a devpts instance of its own (needs the mount namespace): no process of a
   * session can open another terminal of the host. Off: the daemon user's other terminals
   * (other sessions', the user's own) are reachable by `/dev/pts/N`.
   */
  terminals: FeatureState;
  cgroup: FeatureState & { root?: string };
  subreaper: boolean;
  /** `security.run_as`: the user local session shells and one-shot jobs run as, or null. */
  run_as: { user: string; uid: number; gid: number } | null;
}

export interface SandboxOptions<C> {
  mode: ExecGateMode;
  /** Paths no session process may reach (state dir, config, socket dir). */
  hide: readonly string[];
  decide: ExecDecider<C>;
  /**
   * What the gate's own thread may decide alone for `ctx` (fast_path.ts): it must give the
   * answers `decide` would. Absent or undefined: every exec is asked of `decide`.
   */
  fastPath?: (ctx: C) => ExecFastPath | undefined;
  /**
   * Answer execs on a thread of the gate's own (gate_thread.ts; default: unless the environment
   * says TERMADA_GATE_THREAD=off). Off: on the daemon's thread, over the shared Poller.
   */
  gateThread?: boolean;
  /** An allowed exec turned out to run something else (a pointer or file race): it was killed. */
  onRace?: (ev: ExecEvent, ctx: C, found: string) => void;
  /** Where to make this daemon's cgroup (default: below its own cgroup). */
  cgroupBase?: string;
  /**
   * `security.run_as`: every program starts as this user (through the launcher, or `setpriv`
   * when nothing else applies). The daemon checked it may (run_as.ts) before building this.
   */
  runAs?: RunAsUser;
  /** Features to treat as absent (injection for tests and diagnostics). */
  missing?: readonly Feature[];
  /**
   * The launcher's own DENO_DIR when it runs from source (its compiled modules), in the state
   * dir that sessions cannot reach; default: the daemon's.
   */
  launcherCache?: string;
  /** The launcher's files to hold it to (tests pin others; default: LauncherCode.pin()). */
  launcherCode?: () => LauncherCode;
  /**
   * Become the child subreaper and reap orphans (the daemon; never a test process, whose other
   * children Deno itself waits for).
   */
  subreaper?: boolean;
}

export interface SpawnRequest<C> extends PtySpawnOptions {
  ctx: C;
  /** The first exec is the daemon's own choice (a session's shell): allowed without asking. */
  trustFirstExec: boolean;
  /** Name of the cgroup to start in (a session's or a one-shot job's), when cgroups are on. */
  cgroupName?: string;
  /** Paths inside hidden ones this program may use (its session's own scratch directory). */
  reach?: readonly string[];
}

export interface Spawned {
  pty: Pty;
  /** Its processes (cgroup or process tree) for kills and listings. */
  scope: ProcessScope;
  /** Stops watching execs (they fail from now on); idempotent. */
  detach(): void;
  report: LaunchReady | undefined;
}

interface GateCtx<C> {
  ctx: C;
  scope: ProcessScope | undefined;
  /** The launcher's filter has killable waits: allowed execs can be verified (frozen hold). */
  killable: boolean;
}

function detectSeccomp(missing: Set<Feature>): FeatureState {
  if (missing.has("seccomp")) {
    return { active: false, reason: "seccomp user notification marked missing (injected)" };
  }
  if (Deno.build.os !== "linux") {
    return { active: false, reason: `not available on ${Deno.build.os}` };
  }
  if (!syscalls()) return { active: false, reason: `no syscall table for ${Deno.build.arch}` };
  try {
    if (!notifySupported()) {
      return { active: false, reason: "the kernel has no seccomp user notification (Linux ≥ 5.9)" };
    }
  } catch (err) {
    return { active: false, reason: `seccomp unavailable: ${(err as Error).message}` };
  }
  return { active: true };
}

const OFF = "security.exec_gate is off";

export class Sandbox<C> {
  readonly mode: ExecGateMode;
  readonly gate: ExecGate<GateCtx<C>>;
  readonly #o: SandboxOptions<C>;
  readonly #missing: Set<Feature>;
  readonly #seccomp: FeatureState;
  readonly #landlock: FeatureState & { abi: number };
  #hiding: FeatureState & { how?: "mounts" | "landlock"; paths: string[] };
  readonly #terminals: FeatureState;
  readonly #cgroup: FeatureState & { root?: string };
  readonly #tree: CgroupTree | undefined;
  readonly #hide: string[];
  /** The launcher's files as they were at start: a launch refuses to run a changed one. */
  #code: LauncherCode | undefined;
  /** The launcher's cache directories were made 0700 (after the first launch made them). */
  #cachePrivate = false;
  readonly subreaper: boolean;
  #reapTimer: ReturnType<typeof setInterval> | undefined;
  readonly #useThread: boolean;
  /** The gate thread's counters (kept across its restarts). */
  readonly #threadCounters = new GateCounters(new SharedArrayBuffer(GateCounters.BYTES));
  #thread: GateThread<GateCtx<C>> | undefined;
  #threadFailed = false;
  #barrierUp = false;

  constructor(options: SandboxOptions<C>) {
    this.#o = options;
    this.mode = options.mode;
    const missing = this.#missing = new Set(options.missing ?? []);
    const off = options.mode === "off";
    this.#seccomp = off ? { active: false, reason: OFF } : detectSeccomp(missing);
    const abi = missing.has("landlock") ? 0 : safeAbi();
    this.#landlock = off ? { active: false, abi, reason: OFF } : abi > 0 ? { active: true, abi } : {
      active: false,
      abi,
      reason: missing.has("landlock")
        ? "Landlock marked missing (injected)"
        : "the kernel has no Landlock (Linux ≥ 5.13 with landlock in lsm=)",
    };
    let tree: CgroupTree | undefined;
    let cgroup: FeatureState & { root?: string };
    if (off) cgroup = { active: false, reason: OFF };
    else if (missing.has("cgroup")) {
      cgroup = { active: false, reason: "cgroup v2 marked missing (injected)" };
    } else {
      const found = detectCgroup(options.cgroupBase ? { base: options.cgroupBase } : {});
      if (found.ok) {
        tree = new CgroupTree(found.root);
        void tree.sweepStale().catch(() => {});
        cgroup = { active: true, root: found.root };
      } else cgroup = { active: false, reason: found.reason };
    }
    this.#tree = tree;
    this.#cgroup = cgroup;
    // The cgroup hierarchy is part of the control plane: a session that could write
    // cgroup.procs elsewhere could leave its cgroup.
    this.#hide = [...options.hide, ...(tree ? [cgroupMountOf(tree.root)] : [])];
    const mounts = !missing.has("mounts") && sys().geteuid() === 0;
    this.#hiding = off
      ? { active: false, reason: OFF, paths: [] }
      : mounts
      ? { active: true, how: "mounts", paths: [...this.#hide] }
      : this.#landlock.active
      ? { active: true, how: "landlock", paths: [...this.#hide] }
      : {
        active: false,
        reason: "neither a mount namespace (needs root) nor Landlock is available",
        paths: [...this.#hide],
      };
    this.#terminals = off
      ? { active: false, reason: OFF }
      : missing.has("terminals")
      ? { active: false, reason: "private terminals marked missing (injected)" }
      : this.#hiding.how === "mounts"
      ? { active: true }
      : {
        active: false,
        reason: "a devpts instance per session needs a mount namespace (a root daemon): " +
          "sessions can open the daemon user's other terminals (/dev/pts/N)",
      };
    this.subreaper = !off && options.subreaper === true && becomeSubreaper();
    if (!off && options.subreaper === true) {
      // Not dumpable: /proc/<daemon>/environ, maps, fd… need CAP_SYS_PTRACE, which sessions of a
      // root daemon lose (the launcher drops it) and others never had. Landlock's scoping stops
      // signals and ptrace, but not those reads.
      sys().prctl(LINUX.PR_SET_DUMPABLE, 0n, 0n, 0n, 0n);
      // Measured: that is not enough on every kernel (6.18 still lets a same-uid process read
      // environ). So the environment block the kernel shows as /proc/<pid>/environ is wiped.
      scrubEnvironBlock();
    }
    if (this.subreaper) {
      // Orphans of sessions are ours now: reap the ones no Pty waits for, or they stay zombies.
      this.#reapTimer = setInterval(() => reapOrphans(), 1000);
      Deno.unrefTimer(this.#reapTimer as unknown as number);
    }
    this.#useThread = options.gateThread ?? Deno.env.get("TERMADA_GATE_THREAD") !== "off";
    this.gate = new ExecGate<GateCtx<C>>(this.#decide, {
      holdOf: (g) => {
        if (!g.killable || !g.scope?.cgroup) return undefined;
        const hold = g.scope.hold();
        return hold ? { hold, home: g.scope.cgroup } : undefined;
      },
      onRace: (ev, g, found) => options.onRace?.(ev, g.ctx, found),
      // As on the gate thread: no exec rules, no stop-all: nothing to read.
      quick: (pid, g) => {
        if (this.#barrierUp) return undefined;
        try {
          if (options.fastPath?.(g.ctx)?.allowAll !== true) return undefined;
        } catch {
          return undefined; // the decider decides (and says why)
        }
        g.scope?.note(pid);
        return { allow: true };
      },
    });
    if (this.mode !== "off") {
      const features = [
        ["exec gate", this.#seccomp],
        ["hiding the control plane", this.#hiding],
        ["private terminals", this.#terminals],
        ["landlock", this.#landlock],
        ["cgroup", this.#cgroup],
      ] as const;
      for (const [name, f] of features) {
        if (!f.active) {
          log.warn(`${name} unavailable: sessions run without it`, {
            reason: f.reason,
            mode: this.mode,
          });
        }
      }
    }
  }

  /** What this daemon enforces, and why not where it does not (capabilities, dashboard, log). */
  report(): SandboxReport {
    return {
      mode: this.mode,
      exec_gate: { ...this.#seccomp },
      hiding: { ...this.#hiding, paths: [...this.#hiding.paths] },
      landlock: { ...this.#landlock },
      terminals: { ...this.#terminals },
      cgroup: { ...this.#cgroup },
      subreaper: this.subreaper,
      run_as: this.#o.runAs
        ? { user: this.#o.runAs.user, uid: this.#o.runAs.uid, gid: this.#o.runAs.gid }
        : null,
    };
  }

  gateStats(): GateStats {
    return gateStats([this.gate.counters, this.#threadCounters]);
  }

  /** Where execs are answered now: the gate's own thread, or the daemon's (and why). */
  gateThreadState(): "thread" | "main" | "main (the gate thread failed)" {
    if (this.#threadFailed) return "main (the gate thread failed)";
    return this.#useThread ? "thread" : "main";
  }

  /** The rules changed (a policy reload): the gate thread's snapshots are stale. */
  policyChanged(): void {
    this.#thread?.policyChanged();
  }

  /** Stop-all rose or lifted: while up, the gate thread asks `decide` about every exec. */
  barrier(up: boolean): void {
    this.#barrierUp = up;
    this.#thread?.barrier(up);
  }

  /** Tests: makes the gate thread fail (its sessions must fail closed). */
  injectGateThreadFailure(): boolean {
    if (!this.#thread) return false;
    this.#thread.injectFailure();
    return true;
  }

  readonly #decide = (ev: ExecEvent, g: GateCtx<C>) => {
    g.scope?.note(ev.pid);
    return this.#o.decide(ev, g.ctx);
  };

  /** The gate thread, started on first use (undefined: off, or it failed once). */
  #gateThread(): GateThread<GateCtx<C>> | undefined {
    if (!this.#useThread || this.#threadFailed || !this.#seccomp.active) return undefined;
    if (this.#thread) return this.#thread;
    let t: GateThread<GateCtx<C>>;
    try {
      t = new GateThread<GateCtx<C>>(
        {
          decide: this.#decide,
          fastPath: (g) => this.#o.fastPath?.(g.ctx),
          note: (g, pid, start) => g.scope?.note(pid, start),
          onRace: (ev, g, found) => this.#o.onRace?.(ev, g.ctx, found),
        },
        this.#threadCounters,
        () => {
          if (this.#thread !== t) return;
          this.#thread = undefined;
          if (t.failed) this.#threadFailed = true;
        },
      );
    } catch (err) {
      log.error("the exec gate thread did not start: execs are answered on the main thread", {
        error: err,
      });
      this.#threadFailed = true;
      return undefined;
    }
    if (this.#barrierUp) t.barrier(true);
    return this.#thread = t;
  }

  #attach(fd: number, g: GateCtx<C>, trustFirst: boolean): { close(): void } {
    const t = this.#gateThread();
    if (t?.usable) {
      return t.attach(fd, g, {
        trustFirst,
        cgroup: g.scope?.cgroup?.path ?? null,
        killable: g.killable,
      });
    }
    return this.gate.attach(fd, g, { trustFirst });
  }

  /**
   * Refuses up front what `required` cannot give (session_create, exec_start): the exec filter
   * must exist on this machine.
   */
  assertCanSpawn(): void {
    if (this.mode === "required" && !this.#seccomp.active) {
      throw new SandboxUnavailable(`security.exec_gate is required, but ${this.#seccomp.reason}`);
    }
  }

  /** Starts `req.argv` on a PTY inside the boundary (or directly when nothing applies). */
  async spawn(req: SpawnRequest<C>): Promise<Spawned> {
    this.assertCanSpawn();
    const useSeccomp = this.#seccomp.active;
    if (useSeccomp) this.#gateThread(); // it boots while the launcher starts
    const useLandlock = this.#landlock.active;
    const cgroup = req.cgroupName ? this.#createCgroup(req.cgroupName) : undefined;
    const runAs = this.#o.runAs;
    if (!useSeccomp && !useLandlock && !cgroup && !this.#hiding.active) {
      // No launcher: with run_as, setpriv drops to the user (never the daemon's user instead).
      const pty = PtyClass.spawn(
        runAs ? { ...req, argv: setprivArgv(runAs, requireSetpriv(req.argv)) } : req,
      );
      if (runAs) handTerminal(pty, runAs);
      return { pty, scope: new ProcessScope(pty.pid), detach() {}, report: undefined };
    }
    const spec: LaunchSpec = {
      v: 1,
      argv: [...req.argv],
      env: req.env ?? {},
      cgroup: cgroup?.path ?? null,
      seccomp: useSeccomp,
      landlock: this.#hiding.active || useLandlock
        ? { hide: [...this.#hide], allow: [...(req.reach ?? [])] }
        : null,
      mounts: this.#hiding.how === "mounts",
      terminal: this.#terminals.active,
      required: this.mode === "required" ? ["seccomp"] : [],
      user: runAs ? { uid: runAs.uid, gid: runAs.gid, tty_gid: runAs.ttyGid } : null,
    };
    // The launcher runs as the daemon's user before any boundary: never a changed one.
    this.#code ??= this.#o.launcherCode?.() ?? LauncherCode.pin();
    const changed = this.#code.changed();
    if (changed !== undefined) {
      log.error("the launcher's code changed since the daemon started: nothing is launched", {
        file: changed,
      });
      await cgroup?.remove().catch(() => false);
      throw new TermadaError(
        "INTERNAL",
        `Cannot start a session: "${changed}", part of the launcher, changed since the daemon started`,
        {
          hint: "Nothing was started. If you updated Termada, restart the daemon " +
            "(termada daemon restart). Otherwise something rewrote the daemon's own code: " +
            "check that file before restarting (docs/SECURITY.md)",
        },
      );
    }
    const pair = controlPair();
    let pty: Pty;
    try {
      pty = PtyClass.spawn({
        ...req,
        argv: launcherArgv(),
        env: launcherEnv(this.#o.launcherCache),
        control: pair.child,
      });
    } catch (err) {
      sys().close(pair.parent);
      await cgroup?.remove().catch(() => false);
      throw err;
    } finally {
      sys().close(pair.child);
    }
    const scope = new ProcessScope(pty.pid, cgroup);
    const channel = new LaunchChannel(pair.parent);
    const gctx: GateCtx<C> = { ctx: req.ctx, scope, killable: false };
    let handle: { close(): void } | undefined;
    try {
      const { report } = await handshake(
        channel,
        pty.pid,
        spec,
        (fd, ready) => {
          gctx.killable = ready.killable === true;
          handle = this.#attach(fd, gctx, req.trustFirstExec);
        },
        (fd, tty) => pty.adoptMaster(fd, tty),
      );
      this.#noteReport(report);
      if (!this.#cachePrivate && this.#o.launcherCache) {
        // deno made the launcher's cache with the usual 0755 directories (inside the 0700
        // state dir): private like every directory of the state dir.
        this.#cachePrivate = true;
        privateDirs(this.#o.launcherCache);
      }
      return { pty, scope, detach: () => handle?.close(), report };
    } catch (err) {
      handle?.close();
      await pty.close({ graceMs: 0 });
      await scope.end({ wholeCgroup: true, graceMs: 0 }).catch(() => {});
      await scope.dispose().catch(() => false);
      throw err;
    }
  }

  /** Ends every cgroup of this daemon and removes its tree (shutdown). */
  async close(): Promise<void> {
    clearInterval(this.#reapTimer);
    await this.#thread?.stop();
    await this.#tree?.removeAll().catch(() => false);
  }

  #createCgroup(name: string): Cgroup | undefined {
    if (!this.#tree) return undefined;
    try {
      return this.#tree.create(name);
    } catch (err) {
      log.warn("cgroup not created: this one runs without", { name, error: err });
      return undefined;
    }
  }

  #noteReport(r: LaunchReady): void {
    if (r.landlock && "error" in r.landlock && this.#landlock.active) {
      log.warn("landlock failed in a launcher", { error: r.landlock.error });
    }
    if (r.mounts && this.#hiding.how === "mounts") {
      log.warn("no mount namespace in a launcher: Landlock hid the paths instead", {
        error: r.mounts.error,
      });
    }
    if (r.seccomp && this.#seccomp.active) {
      log.warn("exec filter failed in a launcher: this program runs without it", {
        error: r.seccomp.error,
      });
    }
    if (r.cgroup) log.warn("a launcher could not join its cgroup", { error: r.cgroup.error });
    if (r.terminal && "error" in r.terminal && this.#terminals.active) {
      log.warn("no private devpts in a launcher: this session can open other terminals", {
        error: r.terminal.error,
      });
    }
    if (r.proc) {
      log.warn("no private /proc in a launcher: other users' processes stay visible", {
        error: r.proc.error,
      });
    }
  }
}

/** Makes `root` and every directory below it 0700 (bounded: 4096 directories). */
function privateDirs(root: string): void {
  const todo = [root];
  for (let n = 0; todo.length > 0 && n < 4096; n++) {
    const dir = todo.pop()!;
    try {
      Deno.chmodSync(dir, 0o700);
      for (const e of Deno.readDirSync(dir)) if (e.isDirectory) todo.push(`${dir}/${e.name}`);
    } catch {
      // gone meanwhile, or not ours: nothing to tighten
    }
  }
}

export class SandboxUnavailable extends Error {
  override name = "SandboxUnavailable";
}

/** `argv` as given, once `setpriv` is known to exist; else the session or job is refused. */
function requireSetpriv(argv: readonly string[]): readonly string[] {
  const st = statPath(SETPRIV);
  if (!st || (st.mode & S_IFMT) !== S_IFREG || (st.mode & 0o111) === 0) {
    throw new TermadaError(
      "NOT_SUPPORTED",
      `Cannot start "${argv[0]}" as the security.run_as user: ${SETPRIV} is missing`,
      {
        hint: "Install util-linux (it provides setpriv), or enable the session boundary " +
          "(security.exec_gate: auto), whose launcher drops to the user itself",
      },
    );
  }
  return argv;
}

/**
 * The terminal of a program setpriv started becomes the user's (0620, as login does), so its
 * programs can reopen it by name. Done right after the spawn: until then it is the daemon's,
 * which only takes rights away.
 */
function handTerminal(pty: Pty, user: RunAsUser): void {
  try {
    Deno.chownSync(pty.ttyPath, user.uid, user.ttyGid);
    Deno.chmodSync(pty.ttyPath, 0o620);
  } catch (err) {
    log.warn("the terminal could not be given to the run_as user", {
      tty: pty.ttyPath,
      error: err,
    });
  }
}

function safeAbi(): number {
  try {
    return landlockAbi();
  } catch {
    return 0;
  }
}

/**
 * What to hide of the cgroup filesystems: all of `/sys/fs/cgroup` (every v1 hierarchy too: a v1
 * freezer could freeze the daemon) when our tree is under it, else the tree itself.
 */
function cgroupMountOf(dir: string): string {
  return /^\/sys\/fs\/cgroup(\/|$)/.test(dir) ? "/sys/fs/cgroup" : dir;
}

/** Reaps zombie children of this process that no Pty is waiting for (adopted orphans). */
export function reapOrphans(): number {
  let n = 0;
  const status = new Int32Array(1);
  for (const pid of childCandidates()) {
    if (PtyClass.owns(pid)) continue;
    const st = procStat(pid);
    if (st?.ppid !== Deno.pid || st.state !== "Z") continue;
    if (sys().waitpid(pid, status, 1 /* WNOHANG */) === pid) n++;
  }
  return n;
}

/**
 * Pids that may be our children: what every one of our threads' `children` file lists (an
 * orphan may be adopted by any thread, and `children` lists a thread's own only), a dozen reads
 * instead of one per process of the machine. Without those files (a kernel without
 * CONFIG_PROC_CHILDREN) every pid, from a /proc scan. The caller checks each one's ppid.
 */
function childCandidates(): number[] {
  const self = Deno.pid;
  const main = readProcFile(`/proc/${self}/task/${self}/children`);
  if (main === undefined) return allPids();
  const out = parsePids(main);
  for (const tid of taskIds(self)) {
    if (tid === self) continue;
    // undefined: the thread ended meanwhile; its children moved to another one (next round).
    const text = readProcFile(`/proc/${self}/task/${tid}/children`);
    if (text !== undefined) out.push(...parsePids(text));
  }
  return out;
}

function parsePids(text: string): number[] {
  const out: number[] = [];
  for (const s of text.split(" ")) {
    const pid = Number(s);
    if (pid > 0 && Number.isInteger(pid)) out.push(pid);
  }
  return out;
}

/** The thread ids of process `pid` (/proc/<pid>/task, through libc). */
function taskIds(pid: number): number[] {
  return numericEntries(`/proc/${pid}/task`);
}

/**
 * Moves this process's environment to the heap (clearenv + setenv, so getenv and Deno.env keep
 * working) and zeroes the original block on the stack — the memory /proc/<pid>/environ reads.
 * Afterwards nobody reads the daemon's start-up environment (tokens an operator exported, …)
 * through /proc. Returns whether it was wiped.
 */
function scrubEnvironBlock(): boolean {
  const stat = readProcFile("/proc/self/stat");
  if (stat === undefined) return false;
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  // Fields 50 and 51 (env_start, env_end): index 47 and 48 after the state (field 3).
  const start = BigInt(f[47] ?? "0");
  const end = BigInt(f[48] ?? "0");
  if (start === 0n || end <= start || end - start > 1n << 24n) return false;
  const env = Deno.env.toObject();
  const libc = sys();
  libc.clearenv();
  for (const [k, v] of Object.entries(env)) libc.setenv(cstr(k), cstr(v), 1);
  libc.memset(Deno.UnsafePointer.create(start), 0, end - start);
  return true;
}
