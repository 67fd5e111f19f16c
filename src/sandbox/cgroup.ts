/**
 * cgroup v2 session boundaries: find a writable cgroup2 directory for this daemon, create one
 * cgroup per session under it, list, freeze and kill everything inside one (`cgroup.kill` reaches
 * processes that escaped with setsid, nohup or a double fork), and remove them again. Linux only;
 * on machines without a usable cgroup2 tree `detectCgroup` says why and callers fall back to
 * signalling process trees (see reaper.ts).
 *
 * Layout: `<parent>/termada-<daemon pid>/<session>[/<child>…]`. `<parent>` is the daemon's own
 * cgroup (from `/proc/self/cgroup`) or an explicit `base`. We never enable controllers in any
 * `cgroup.subtree_control`, so the cgroup v2 "no internal processes" rule does not apply: the
 * daemon may keep living in `<parent>` next to our child directory, and a session cgroup may hold
 * processes and child cgroups at once.
 *
 * Every file operation goes through libc (open/read/write, opendir, mkdirat/unlinkat via
 * syscall): Deno 2.9's file APIs demand --allow-all for anything under /proc AND /sys, so
 * this module needs only --allow-ffi.
 *
 * Bounds: `procs()` returns at most MAX_PROCS pids and walks at most MAX_CGROUPS directories,
 * MAX_DEPTH levels deep; `remove()` retries for at most its `timeoutMs`.
 */
import { resolve } from "node:path";
import { LINUX, openLibc } from "../../ffi/mod.ts";
import { procStat } from "../pty/mod.ts";
import { TermadaError } from "../shared/mod.ts";

/** At most this many pids are returned by `Cgroup.procs()`. */
export const MAX_PROCS = 4096;
/** At most this many cgroup directories are visited by one walk. */
export const MAX_CGROUPS = 1024;
/** Walks stop this many levels below the cgroup they start from. */
export const MAX_DEPTH = 16;
/** Default time `remove()` waits for killed processes to leave before giving up. */
export const REMOVE_TIMEOUT_MS = 2000;

const NAME_RE = /^[a-z0-9_-]{1,64}$/;
const STALE_RE = /^termada-(\d{1,10})$/;
const POLL_MS = 20;

/** Result of `detectCgroup`: a directory we created and own, or why cgroups are unusable. */
export type CgroupSupport =
  | {
    ok: true;
    /** `<parent>/termada-<pid>`, created by this call (or left by an earlier call of ours). */
    root: string;
    /** Where `<parent>` came from. */
    source: "base" | "own-cgroup";
  }
  | { ok: false; reason: string };

/** A failed cgroup file operation: the path concerned and the OS error as `cause`. */
export class CgroupError extends TermadaError {
  readonly path: string;
  /** The C errno of the failed call (e.g. 3 ESRCH for a pid that does not exist). */
  readonly errno: number;
  constructor(message: string, path: string, errno: number) {
    super("INTERNAL", message, { cause: new Error(`${strerror(errno)} (errno ${errno})`) });
    this.name = "CgroupError";
    this.path = path;
    this.errno = errno;
  }
}

export interface DetectCgroupOptions {
  /** An existing cgroup2 directory to create `termada-<pid>` in, instead of our own cgroup. */
  base?: string;
  /** Text of /proc/self/mountinfo (tests inject other machines' layouts). */
  mountinfo?: string;
  /** Text of /proc/self/cgroup (tests inject other machines' layouts). */
  selfCgroup?: string;
}

/**
 * Finds or creates this daemon's cgroup2 directory. Never throws: every failure becomes
 * `{ ok: false, reason }`. Writability is checked by really creating the directory; a directory
 * we created but cannot use (no `cgroup.kill`: kernel older than 5.14) is removed again.
 */
export function detectCgroup(opts: DetectCgroupOptions = {}): CgroupSupport {
  if (Deno.build.os !== "linux") {
    return { ok: false, reason: `cgroups are Linux only (this is ${Deno.build.os})` };
  }
  try {
    return detect(opts);
  } catch (err) {
    // libc missing, an unsupported architecture, a NUL in `base`: still only a reason.
    return {
      ok: false,
      reason: `Cannot detect cgroups: ${err instanceof Error ? err.message : err}`,
    };
  }
}

function detect(opts: DetectCgroupOptions): CgroupSupport {
  const mountinfo = opts.mountinfo ?? readProcText("/proc/self/mountinfo");
  if (mountinfo === undefined) return { ok: false, reason: "Cannot read /proc/self/mountinfo" };
  const mounts = parseCgroup2Mounts(mountinfo);
  if (mounts.length === 0) {
    return {
      ok: false,
      reason: "No cgroup2 hierarchy is mounted (cgroup v1 only or none): sessions are ended " +
        "by signalling their process trees",
    };
  }
  let parent: string;
  let source: "base" | "own-cgroup";
  if (opts.base !== undefined) {
    const base = resolve(opts.base);
    if (!mounts.some((m) => isUnder(base, m.mountPoint))) {
      return {
        ok: false,
        reason: `Base "${base}" is not inside a cgroup2 mount (${
          mounts.map((m) => `"${m.mountPoint}"`).join(", ")
        })`,
      };
    }
    parent = base;
    source = "base";
  } else {
    const text = opts.selfCgroup ?? readProcText("/proc/self/cgroup");
    if (text === undefined) return { ok: false, reason: "Cannot read /proc/self/cgroup" };
    const own = parseOwnCgroup2Path(text);
    if (own === undefined) {
      return { ok: false, reason: 'This process has no cgroup2 membership ("0::" line)' };
    }
    if (own.split("/").includes("..")) {
      return { ok: false, reason: `Our cgroup "${own}" lies outside this cgroup namespace` };
    }
    const dir = locateCgroupDir(own, mounts);
    if (dir === undefined) {
      return { ok: false, reason: `Our cgroup "${own}" is not visible under any cgroup2 mount` };
    }
    parent = dir;
    source = "own-cgroup";
  }
  const probe = checkCgroupDir(parent);
  if (probe !== undefined) return { ok: false, reason: probe };
  const root = `${parent}/termada-${Deno.pid}`;
  const rc = mkdir(root);
  if (rc !== 0 && rc !== EEXIST) {
    return { ok: false, reason: `Cannot create "${root}": ${strerror(rc)}${hintFor(rc)}` };
  }
  const created = rc === 0;
  const why = exists(`${root}/cgroup.kill`)
    ? writable(`${root}/cgroup.procs`)
    : `"${root}" has no cgroup.kill (needs Linux 5.14 or later)`;
  if (why !== undefined) {
    if (created) rmdirQuiet(root);
    return { ok: false, reason: why };
  }
  return { ok: true, root, source };
}

/** One cgroup2 mount from /proc/self/mountinfo. */
export interface Cgroup2Mount {
  /** Where it is mounted, e.g. "/sys/fs/cgroup" or "/sys/fs/cgroup/unified". */
  mountPoint: string;
  /** Which cgroup of the hierarchy appears at the mount point (usually "/"). */
  root: string;
}

/** The cgroup2 mounts listed in a mountinfo text (fields after " - " give the fs type). */
export function parseCgroup2Mounts(mountinfo: string): Cgroup2Mount[] {
  const out: Cgroup2Mount[] = [];
  for (const line of mountinfo.split("\n")) {
    const sep = line.indexOf(" - ");
    if (sep < 0) continue;
    if (line.slice(sep + 3).split(" ")[0] !== "cgroup2") continue;
    const f = line.slice(0, sep).split(" ");
    if (f[3] === undefined || f[4] === undefined) continue;
    out.push({ root: unescapeMount(f[3]), mountPoint: unescapeMount(f[4]) });
  }
  return out;
}

/** The `0::<path>` entry of a /proc/<pid>/cgroup text (the cgroup2 membership). */
export function parseOwnCgroup2Path(text: string): string | undefined {
  for (const line of text.split("\n")) {
    if (line.startsWith("0::")) return line.slice(3).trim() || undefined;
  }
  return undefined;
}

/** The directory of cgroup `path` under the first mount whose root contains it. */
function locateCgroupDir(path: string, mounts: Cgroup2Mount[]): string | undefined {
  for (const m of mounts) {
    if (!isUnder(path, m.root)) continue;
    const rel = m.root === "/" ? path : path.slice(m.root.length);
    const dir = (m.mountPoint + rel).replace(/\/+$/, "") || "/";
    if (exists(`${dir}/cgroup.procs`)) return dir;
  }
  return undefined;
}

/** Why `dir` cannot take our directory, or undefined when it looks like a cgroup2 directory. */
function checkCgroupDir(dir: string): string | undefined {
  const list = listDirs(dir);
  if (typeof list === "number") return `Cannot use "${dir}": ${strerror(list)}`;
  // cgroup.controllers exists only in cgroup2 directories (v1 has cgroup.procs too).
  if (!exists(`${dir}/cgroup.controllers`)) return `"${dir}" is not a cgroup2 directory`;
  return undefined;
}

/** One cgroup directory. Obtained from `CgroupTree.create` or `Cgroup.child`. */
export class Cgroup {
  /** Absolute directory path. */
  readonly path: string;
  readonly name: string;

  /** Wraps an existing directory; use `CgroupTree.create`/`child` to make a new one. */
  constructor(path: string) {
    this.path = path;
    this.name = path.slice(path.lastIndexOf("/") + 1);
  }

  /** Creates a nested cgroup `name` ([a-z0-9_-]{1,64}). Throws CgroupError if it exists. */
  child(name: string): Cgroup {
    return makeCgroup(this.path, name);
  }

  /**
   * Pids in this cgroup and all its descendants (at most MAX_PROCS, walking at most MAX_CGROUPS
   * directories). Empty when the cgroup is gone: processes and cgroups vanish at any time.
   */
  procs(): number[] {
    const out: number[] = [];
    for (const dir of walk(this.path)) {
      const text = readQuiet(`${dir}/cgroup.procs`);
      if (text === undefined) continue;
      for (const s of text.split("\n")) {
        if (s === "") continue;
        out.push(Number(s));
        if (out.length >= MAX_PROCS) return out;
      }
    }
    return out;
  }

  /**
   * Pids in this cgroup's own `cgroup.procs`, not its descendants' (at most MAX_PROCS). Empty
   * when the cgroup is gone.
   */
  ownProcs(): number[] {
    const out: number[] = [];
    const text = readQuiet(`${this.path}/cgroup.procs`);
    if (text === undefined) return out;
    for (const s of text.split("\n")) {
      if (s === "") continue;
      out.push(Number(s));
      if (out.length >= MAX_PROCS) break;
    }
    return out;
  }

  /**
   * How many live cgroups are below this one (`cgroup.stat` nr_descendants; dying ones hold no
   * process), or -1 when that cannot be read. One read instead of listing directories.
   */
  descendants(): number {
    const text = readQuiet(`${this.path}/cgroup.stat`);
    const m = text === undefined ? null : /^nr_descendants (\d+)$/m.exec(text);
    return m ? Number(m[1]) : -1;
  }

  /** Moves process `pid` (all its threads) into this cgroup. */
  addPid(pid: number): void {
    if (!Number.isInteger(pid) || pid <= 0) throw new RangeError(`Bad pid ${pid}`);
    writeOrThrow(`${this.path}/cgroup.procs`, `${pid}\n`, `move pid ${pid} into`);
  }

  /**
   * Sends SIGKILL to every process of this cgroup and its descendants, atomically with respect
   * to forks (the kernel's cgroup.kill). Processes take a moment to leave: see `remove()`.
   */
  kill(): void {
    writeOrThrow(`${this.path}/cgroup.kill`, "1\n", "kill");
  }

  /** Freezes or thaws the subtree; false when this kernel has no cgroup.freeze. */
  freeze(on: boolean): boolean {
    if (!exists(`${this.path}/cgroup.freeze`)) return false;
    writeOrThrow(`${this.path}/cgroup.freeze`, on ? "1\n" : "0\n", on ? "freeze" : "thaw");
    return true;
  }

  /** Whether the freeze has completed (cgroup.events `frozen 1`). */
  frozen(): boolean {
    return this.#event("frozen") === "1";
  }

  /** Whether any process lives in this cgroup or below (cgroup.events `populated 1`). */
  populated(): boolean {
    return this.#event("populated") === "1";
  }

  /** Whether the directory still exists. */
  exists(): boolean {
    return exists(`${this.path}/cgroup.procs`);
  }

  /**
   * Removes this cgroup and its child cgroups (deepest first) once they are empty, retrying
   * for up to `timeoutMs` while processes finish leaving (after `kill()` that takes a few ms).
   * Does not kill anything itself. True when the directory is gone (also if it already was).
   */
  async remove(opts: { timeoutMs?: number } = {}): Promise<boolean> {
    const deadline = performance.now() + (opts.timeoutMs ?? REMOVE_TIMEOUT_MS);
    for (;;) {
      // walk() is breadth first, so reversed it lists children before their parents.
      for (const d of [...walk(this.path)].reverse()) rmdirQuiet(d);
      if (!exists(this.path)) return true;
      if (performance.now() >= deadline) return false;
      await sleep(POLL_MS);
    }
  }

  #event(key: string): string | undefined {
    const text = readQuiet(`${this.path}/cgroup.events`);
    if (text === undefined) return undefined;
    for (const line of text.split("\n")) {
      if (line.startsWith(`${key} `)) return line.slice(key.length + 1).trim();
    }
    return undefined;
  }
}

/**
 * Open trees of this process per root. The root is the process's (`termada-<pid>`), and a test or
 * a benchmark runs several engines in one process: one's shutdown must not kill the sessions of
 * another, so the root itself goes with the last tree.
 */
const openTrees = new Map<string, number>();
/** Cgroups one tree remembers having made before it drops those already gone. */
const MINE_PRUNE_AT = 1024;

/** The daemon's cgroup directory (`detectCgroup().root`) and the session cgroups under it. */
export class CgroupTree {
  readonly root: string;
  /** The session cgroups this tree made (what its removeAll ends while others share the root). */
  readonly #mine = new Set<string>();
  #open = true;

  constructor(root: string) {
    this.root = root.replace(/\/+$/, "");
    openTrees.set(this.root, (openTrees.get(this.root) ?? 0) + 1);
  }

  /** Creates session cgroup `name` ([a-z0-9_-]{1,64}) under the root; CgroupError if taken. */
  create(name: string): Cgroup {
    const cg = makeCgroup(this.root, name);
    if (this.#mine.size >= MINE_PRUNE_AT) {
      for (const p of this.#mine) if (!exists(`${p}/cgroup.procs`)) this.#mine.delete(p);
    }
    this.#mine.add(cg.path);
    return cg;
  }

  /** The existing session cgroups under the root. */
  list(): Cgroup[] {
    return childDirs(this.root).map((d) => new Cgroup(d));
  }

  /**
   * Daemon shutdown: kills every session cgroup, removes them and then the root itself. While
   * another tree of this process is open on the same root, only the cgroups this one made go.
   * True when what it had to remove is gone. Never throws.
   */
  async removeAll(opts: { timeoutMs?: number } = {}): Promise<boolean> {
    const timeoutMs = opts.timeoutMs ?? REMOVE_TIMEOUT_MS;
    if (this.#open) {
      this.#open = false;
      const left = (openTrees.get(this.root) ?? 1) - 1;
      if (left > 0) openTrees.set(this.root, left);
      else openTrees.delete(this.root);
    }
    if (openTrees.has(this.root)) {
      let ok = true;
      for (const p of this.#mine) if (!(await killAndRemove(p, timeoutMs))) ok = false;
      this.#mine.clear();
      return ok;
    }
    return await killAndRemove(this.root, timeoutMs);
  }

  /**
   * Removes `termada-<pid>` siblings of the root left by earlier daemons that died without
   * cleaning up (their pid no longer exists): kills their processes, then removes them. A dir
   * whose pid is alive is kept, even if that pid was reused by an unrelated process: we cannot
   * tell a reused pid from a live daemon. Returns the paths removed. Never throws.
   */
  async sweepStale(opts: { timeoutMs?: number } = {}): Promise<string[]> {
    const parent = this.root.slice(0, this.root.lastIndexOf("/")) || "/";
    const removed: string[] = [];
    for (const dir of childDirs(parent)) {
      if (dir === this.root) continue;
      const m = STALE_RE.exec(dir.slice(dir.lastIndexOf("/") + 1));
      if (m === null) continue;
      const pid = Number(m[1]);
      if (pid === Deno.pid || procStat(pid) !== undefined) continue;
      if (await killAndRemove(dir, opts.timeoutMs ?? REMOVE_TIMEOUT_MS)) removed.push(dir);
    }
    return removed;
  }
}

async function killAndRemove(dir: string, timeoutMs: number): Promise<boolean> {
  const cg = new Cgroup(dir);
  if (!cg.exists()) return true;
  // The root of our tree holds no processes itself, but cgroup.kill covers descendants anyway.
  try {
    cg.kill();
  } catch {
    // Best effort: removal below reports whether anything was left behind.
  }
  return await cg.remove({ timeoutMs });
}

function makeCgroup(parent: string, name: string): Cgroup {
  // No dots: every kernel interface file has one, so a valid name cannot shadow them.
  if (!NAME_RE.test(name)) throw new RangeError(`Bad cgroup name "${name}": use [a-z0-9_-]{1,64}`);
  const path = `${parent}/${name}`;
  const rc = mkdir(path);
  if (rc !== 0) throw new CgroupError(`Cannot create cgroup "${path}": ${strerror(rc)}`, path, rc);
  return new Cgroup(path);
}

/** `dir` and its descendant directories, breadth first; bounded by MAX_CGROUPS and MAX_DEPTH. */
function* walk(dir: string): Generator<string> {
  const queue: [string, number][] = [[dir, 0]];
  let seen = 0;
  while (queue.length > 0 && seen < MAX_CGROUPS) {
    const [d, depth] = queue.shift()!;
    seen++;
    yield d;
    if (depth >= MAX_DEPTH) continue;
    for (const c of childDirs(d)) queue.push([c, depth + 1]);
  }
}

function childDirs(dir: string): string[] {
  const list = listDirs(dir);
  // A number is an errno: the cgroup vanished (or was never there), so it has no children.
  return typeof list === "number" ? [] : list.map((n) => `${dir}/${n}`);
}

function writeOrThrow(path: string, data: string, action: string): void {
  const rc = writeText(path, data);
  if (rc === 0) return;
  const dir = path.slice(0, path.lastIndexOf("/"));
  throw new CgroupError(`Cannot ${action} cgroup "${dir}": ${strerror(rc)}`, path, rc);
}

function readQuiet(path: string): string | undefined {
  return readText(path, MAX_FILE_TEXT);
}

function rmdirQuiet(dir: string): void {
  // Busy (processes still leaving) or already gone: remove() checks and retries.
  rmdir(dir);
}

/** Why we cannot write `path` (opened for writing, nothing written), or undefined. */
function writable(path: string): string | undefined {
  const libc = openLibc();
  const fd = libc.open(cstr(path), O_WRONLY | LINUX.O_CLOEXEC, 0);
  if (fd < 0) return `Cannot write "${path}": ${strerror(errno())}`;
  libc.close(fd);
  return undefined;
}

function isUnder(path: string, dir: string): boolean {
  return dir === "/" || path === dir || path.startsWith(`${dir}/`);
}

/** mountinfo escapes space, tab, newline and backslash as \ooo. */
function unescapeMount(s: string): string {
  return s.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));
}

function hintFor(err: number): string {
  if (err !== LINUX.EACCES && err !== LINUX.EPERM) return "";
  return " (run the daemon in a delegated cgroup, e.g. `systemd-run --user --scope " +
    "-p Delegate=yes termada`, or as the owner of that cgroup)";
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

// ---- libc file layer (Deno's file APIs need --allow-all under /proc and /sys) ----

const MAX_PROC_TEXT = 1 << 20;
/** cgroup interface files are small; cgroup.procs of a big cgroup is ~7 bytes per pid. */
const MAX_FILE_TEXT = 1 << 20;
const readBuf = new Uint8Array(65536);
const O_WRONLY = 1;
/** Same value on x86_64 and aarch64. */
const O_PATH = 0o10000000;
const EEXIST = 17;
const AT_FDCWD = -100n;
const AT_REMOVEDIR = 0x200n;
const DT_DIR = 4;
const DIRENT_TYPE_OFFSET = 18;
/** mkdirat/unlinkat: aarch64 has no plain mkdir/rmdir syscalls. */
const DIR_SYSCALLS = {
  x86_64: { mkdirat: 258n, unlinkat: 263n },
  aarch64: { mkdirat: 34n, unlinkat: 35n },
};
const encoder = new TextEncoder();
const decoder = new TextDecoder();

function cstr(s: string): Uint8Array<ArrayBuffer> {
  if (s.includes("\0")) throw new TypeError(`Path contains a NUL byte: "${s}"`);
  return encoder.encode(`${s}\0`) as Uint8Array<ArrayBuffer>;
}

/** errno of the last synchronous libc call on this thread. */
function errno(): number {
  const p = openLibc().__errno_location();
  return p === null ? LINUX.EINVAL : new Deno.UnsafePointerView(p).getInt32();
}

function strerror(code: number): string {
  const p = openLibc().strerror(code);
  return p === null ? `errno ${code}` : Deno.UnsafePointerView.getCString(p);
}

/** A text file's contents (at most `max` bytes), or undefined when unreadable. */
function readText(path: string, max: number): string | undefined {
  const libc = openLibc();
  const fd = libc.open(cstr(path), LINUX.O_RDONLY | LINUX.O_CLOEXEC, 0);
  if (fd < 0) return undefined;
  try {
    const chunks: Uint8Array[] = [];
    let total = 0;
    // One buffer for every read (all synchronous, on one thread): listing a session's
    // processes runs with each job result, and a fresh 64 KiB per read is measurable there.
    // The common case, EOF before the buffer is full, decodes straight from it.
    const buf = readBuf;
    const cap = Math.min(buf.length, max);
    let filled = 0;
    while (filled < cap) {
      const n = Number(libc.read(fd, buf.subarray(filled), BigInt(cap - filled)));
      if (n < 0) return undefined; // e.g. ENODEV: the cgroup was removed meanwhile
      if (n === 0) return decoder.decode(buf.subarray(0, filled));
      filled += n;
    }
    chunks.push(buf.slice(0, filled));
    total = filled;
    while (total < max) {
      const n = Number(libc.read(fd, buf, BigInt(Math.min(buf.length, max - total))));
      if (n < 0) return undefined;
      if (n === 0) break;
      chunks.push(buf.slice(0, n));
      total += n;
    }
    const all = new Uint8Array(total);
    let off = 0;
    for (const c of chunks) {
      all.set(c, off);
      off += c.length;
    }
    return decoder.decode(all);
  } finally {
    libc.close(fd);
  }
}

/** Reads a /proc text file, up to 1 MiB (mountinfo outgrows readProcFile's 16 KiB). */
function readProcText(path: string): string | undefined {
  return readText(path, MAX_PROC_TEXT);
}

/** Writes `data` in one write(2) (cgroup files take one value per write); 0 or the errno. */
function writeText(path: string, data: string): number {
  const libc = openLibc();
  const fd = libc.open(cstr(path), O_WRONLY | LINUX.O_CLOEXEC, 0);
  if (fd < 0) return errno();
  try {
    const bytes = encoder.encode(data);
    const n = Number(libc.write(fd, bytes, BigInt(bytes.length)));
    return n === bytes.length ? 0 : n < 0 ? errno() : LINUX.EIO;
  } finally {
    libc.close(fd);
  }
}

function exists(path: string): boolean {
  const libc = openLibc();
  const fd = libc.open(cstr(path), O_PATH | LINUX.O_CLOEXEC, 0);
  if (fd < 0) return false;
  libc.close(fd);
  return true;
}

/** Names of the subdirectories of `dir` (at most MAX_CGROUPS), or the errno (e.g. ENOTDIR). */
function listDirs(dir: string): string[] | number {
  const libc = openLibc();
  const d = libc.opendir(cstr(dir));
  if (d === null) return errno();
  const out: string[] = [];
  try {
    while (out.length < MAX_CGROUPS) {
      const ent = libc.readdir(d);
      if (ent === null) break;
      const view = new Deno.UnsafePointerView(ent);
      if (view.getUint8(DIRENT_TYPE_OFFSET) !== DT_DIR) continue;
      const name = view.getCString(LINUX.DIRENT_NAME_OFFSET);
      if (name !== "." && name !== "..") out.push(name);
    }
  } finally {
    libc.closedir(d);
  }
  return out;
}

function dirSyscalls(): { mkdirat: bigint; unlinkat: bigint } {
  const arch = Deno.build.arch;
  if (arch !== "x86_64" && arch !== "aarch64") {
    throw new Error(`Cgroups are not supported on ${arch} yet`);
  }
  return DIR_SYSCALLS[arch];
}

function addr(buf: Uint8Array<ArrayBuffer>): bigint {
  return BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(buf)));
}

/** mkdir(path, 0755): 0 or the errno. */
function mkdir(path: string): number {
  const p = cstr(path);
  const rc = openLibc().syscall6(dirSyscalls().mkdirat, AT_FDCWD, addr(p), 0o755n, 0n, 0n, 0n);
  return rc === 0n ? 0 : errno();
}

/** rmdir(path): 0 or the errno (EBUSY while processes are still leaving). */
function rmdir(path: string): number {
  const p = cstr(path);
  const rc = openLibc().syscall6(
    dirSyscalls().unlinkat,
    AT_FDCWD,
    addr(p),
    AT_REMOVEDIR,
    0n,
    0n,
    0n,
  );
  return rc === 0n ? 0 : errno();
}
