/**
 * Landlock "everything except these paths" for the launcher: {@link applyLandlock} restricts the
 * CALLING THREAD (and whatever it execs or forks afterwards) so the `hide` paths become
 * unreadable, unwritable and unexecutable while the rest of the filesystem keeps every right the
 * kernel's Landlock ABI handles. Call it on the thread that will `execve` (the launcher's main
 * thread): other threads of a Deno process are NOT restricted (there is no TSYNC before ABI 8), so
 * it is no sandbox for the Deno process itself. Each call stacks one more domain (the kernel
 * allows 16) and none can be undone.
 *
 * Design. Landlock only allows (a rule grants rights on a file or on a whole directory tree), so
 * "allow all but X" is built from the ancestor chain of every hidden path: for each directory on
 * a chain (`/`, `/home`, `/home/me`, …) every entry that is neither hidden nor itself on a chain
 * gets a rule with all handled rights (directories) or the file rights (other files). The chain
 * directories get no rule of their own except `READ_DIR` on `/`, so `ls /` and `ls ~` work.
 * Paths are resolved once, when the rules are built: symlinks along a hidden path are followed
 * (what is hidden is the real location), and the walk stops at the first component that is
 * missing or not a directory — that entry is what gets hidden (so `/a/file/x` hides `/a/file`;
 * a hidden symlink hides its target). `result.hidden` lists these real entries.
 *
 * - Symlinks among the siblings get no rule (none is needed): the kernel checks the resolved
 *   location, so a link into a hidden directory leads to no rights and a link to an allowed place
 *   keeps that place's rights. The same holds for symlinks created later.
 * - A hidden path that does not exist yet cannot be created: its deepest existing ancestor is a
 *   chain directory, where nothing can be created, renamed or linked. If something outside the
 *   domain creates it later, it lies under the chain and is just as unreachable.
 *
 * Limits (callers must accept them or not use this):
 * - Chain directories are frozen: nothing can be created, removed or renamed directly in `/`,
 *   `$HOME`, `~/.config`… (so atomic "write a temp file, rename over" saves of dotfiles fail). Their
 *   entries are the ones present at launch; an entry added or replaced (new inode) there later by
 *   someone else is not reachable. Subdirectories of the siblings are unaffected.
 * - `READ_DIR` is inherited by whole trees, so with `listAncestors` (the default) the NAMES inside
 *   hidden directories can be listed (never read, written, created or removed). Pass
 *   `listAncestors: false` to hide names too, at the cost of `ls /`, `ls ~`… failing.
 * - Landlock does not mediate `stat`, `chdir`, `readlink`, `chmod`/`chown`, `utime` or, up to ABI
 *   7, `connect()` to a Unix socket by path: a socket inside a hidden directory stays reachable.
 *   Hard links and bind mounts of hidden files that already exist under an allowed path stay
 *   readable through that path (new links into hidden paths are refused).
 * - By ABI: 1 refuses every rename or link across directories (EXDEV), even between siblings;
 *   below 3 `truncate(2)` is not mediated; below 5 device `ioctl`s are not; below 6 signals and
 *   abstract Unix sockets are not scoped (from 6 the domain cannot signal or connect to abstract
 *   sockets of processes outside it). Network rights (ABI 4) are left alone.
 * - At most {@link MAX_LANDLOCK_RULES} rules (one per sibling); beyond that, on a chain directory
 *   the caller cannot list, and on any other failure it throws before restricting anything.
 */
import {
  type Libc,
  LINUX,
  openLibc,
  S_IFDIR,
  S_IFLNK,
  S_IFMT,
  statFd,
  syscalls,
} from "../../ffi/mod.ts";

/** Landlock filesystem rights, bit i = entry i: [name, first ABI, applies to non-directories]. */
const FS_RIGHTS = [
  ["execute", 1, true],
  ["write_file", 1, true],
  ["read_file", 1, true],
  ["read_dir", 1, false],
  ["remove_dir", 1, false],
  ["remove_file", 1, false],
  ["make_char", 1, false],
  ["make_dir", 1, false],
  ["make_reg", 1, false],
  ["make_sock", 1, false],
  ["make_fifo", 1, false],
  ["make_block", 1, false],
  ["make_sym", 1, false],
  ["refer", 2, false],
  ["truncate", 3, true],
  ["ioctl_dev", 5, true],
] as const;

const READ_DIR = 1n << 3n;
const LANDLOCK_CREATE_RULESET_VERSION = 1;
const LANDLOCK_RULE_PATH_BENEATH = 1;
const LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET = 1n;
const LANDLOCK_SCOPE_SIGNAL = 2n;

/** The most rules one call adds; more means a huge chain directory (e.g. a crowded `/tmp`). */
export const MAX_LANDLOCK_RULES = 4096;

const O_PATH = 0o10000000;
const ENOENT = 2;
const ELOOP = 40;
const EBADFD = 77;
/** Symlinks followed while resolving one hidden path (the kernel's own limit). */
const MAX_SYMLINKS = 40;
/** The open flag that differs between the architectures we run on (stat offsets: ffi/marshal.ts). */
const ARCH = {
  x86_64: { O_NOFOLLOW: 0o400000 },
  aarch64: { O_NOFOLLOW: 0o100000 },
} as const;

export interface LandlockOptions {
  /** Absolute paths (files or directories, existing or not) to make unreachable. */
  hide: readonly string[];
  /** Use at most this ABI's features (default: what the kernel offers). 0 applies nothing. */
  abi?: number;
  /** Grant `READ_DIR` on `/` so chain directories can be listed (default true); see the limits. */
  listAncestors?: boolean;
  /**
   * Existing paths inside hidden ones that stay reachable with every right (a session's own
   * scratch directory under the state dir). A missing one is skipped.
   */
  allow?: readonly string[];
}

export interface LandlockResult {
  /** The ABI whose features were used; 0 means Landlock is unavailable and nothing was applied. */
  abi: number;
  /** The entries actually hidden: resolved, deduplicated, sorted (see the module doc). */
  hidden: string[];
  scopes: ("signal" | "abstract_unix")[];
  /** The handled filesystem rights, e.g. "read_file", "refer". */
  fsRights: string[];
}

export type LandlockStep =
  | "resolve"
  | "list"
  | "open"
  | "rules"
  | "create_ruleset"
  | "add_rule"
  | "no_new_privs"
  | "restrict_self";

/** Applying Landlock failed at `step`; nothing was restricted. `errno` is 0 for the rule limit. */
export class LandlockError extends Error {
  readonly step: LandlockStep;
  readonly errno: number;
  readonly path: string | undefined;
  constructor(step: LandlockStep, errno: number, path: string | undefined, message: string) {
    super(`Cannot apply Landlock: ${message}`);
    this.name = "LandlockError";
    this.step = step;
    this.errno = errno;
    this.path = path;
  }
}

/** The kernel's Landlock ABI version, 0 when unavailable (not built, disabled at boot, filtered). */
export function landlockAbi(): number {
  const nr = syscalls();
  if (Deno.build.os !== "linux" || nr === undefined) return 0;
  const v = syscall3(openLibc(), nr.landlock_create_ruleset, 0, 0, LANDLOCK_CREATE_RULESET_VERSION);
  // -1: ENOSYS, EOPNOTSUPP or a seccomp filter's EPERM — all mean "not available here".
  return v > 0 ? v : 0;
}

/**
 * Restricts the calling thread so `hide` paths are unreachable (see the module doc for what that
 * means exactly). Throws TypeError for a relative path, RangeError for a bad `abi` and
 * {@link LandlockError} when a step fails, all before restricting anything. With no Landlock
 * (ABI 0) it restricts nothing and says so in `abi`: the caller decides whether to go on.
 */
export function applyLandlock(opts: LandlockOptions): LandlockResult {
  for (const p of [...opts.hide, ...(opts.allow ?? [])]) {
    if (!p.startsWith("/") || p.includes("\0")) {
      throw new TypeError(`Hidden path "${p}" must be absolute and free of NUL bytes`);
    }
  }
  if (opts.abi !== undefined && !(Number.isInteger(opts.abi) && opts.abi >= 0)) {
    throw new RangeError(`Landlock ABI "${opts.abi}" must be a non-negative integer`);
  }
  const kernelAbi = landlockAbi();
  const abi = Math.max(0, Math.min(opts.abi ?? kernelAbi, kernelAbi));
  if (abi === 0) return { abi: 0, hidden: [], scopes: [], fsRights: [] };

  const sys = new Sys();
  const hidden = outermost(opts.hide.map((p) => sys.resolve(p)));
  const rights = FS_RIGHTS.filter(([, since]) => since <= abi);
  const handled = mask(rights.map(([name]) => name));
  const fileRights = mask(rights.filter(([, , file]) => file).map(([name]) => name));
  const scoped = abi >= 6 ? LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL : 0n;

  const ruleset = sys.createRuleset(abi, handled, scoped);
  try {
    const tree = chainTree(hidden);
    if (!tree.hidden) {
      if (tree.next.size === 0) sys.allow(ruleset, "/", handled, fileRights);
      else {
        if (opts.listAncestors ?? true) sys.allow(ruleset, "/", READ_DIR, READ_DIR);
        grantSiblings(sys, ruleset, "/", tree, handled, fileRights);
      }
    }
    for (const p of opts.allow ?? []) sys.allow(ruleset, p, handled, fileRights);
    sys.restrict(ruleset);
  } finally {
    sys.libc.close(ruleset);
  }
  return {
    abi,
    hidden,
    scopes: abi >= 6 ? ["abstract_unix", "signal"] : [],
    fsRights: rights.map(([name]) => name),
  };
}

type Right = typeof FS_RIGHTS[number][0];

function mask(names: readonly Right[]): bigint {
  return FS_RIGHTS.reduce(
    (m, [name], bit) => names.includes(name) ? m | (1n << BigInt(bit)) : m,
    0n,
  );
}

/** A directory on the way to hidden paths, or (`hidden`) a hidden entry. */
interface Chain {
  hidden: boolean;
  next: Map<string, Chain>;
}

function chainTree(hidden: readonly string[]): Chain {
  const root: Chain = { hidden: false, next: new Map() };
  for (const path of hidden) {
    let node = root;
    for (const name of path.split("/").filter((c) => c !== "")) {
      let child = node.next.get(name);
      if (child === undefined) node.next.set(name, child = { hidden: false, next: new Map() });
      node = child;
    }
    node.hidden = true;
  }
  return root;
}

/** Grants every entry of chain directory `dir` that is neither hidden nor on a chain. */
function grantSiblings(
  sys: Sys,
  ruleset: number,
  dir: string,
  node: Chain,
  dirRights: bigint,
  fileRights: bigint,
): void {
  for (const raw of sys.list(dir)) {
    const name = utf8(raw);
    const child = name === undefined ? undefined : node.next.get(name);
    if (child === undefined) sys.allow(ruleset, entryPath(dir, raw), dirRights, fileRights);
    else if (!child.hidden) {
      grantSiblings(sys, ruleset, join(dir, name!), child, dirRights, fileRights);
    }
  }
}

/** Drops duplicates and paths inside another hidden path. */
function outermost(paths: readonly string[]): string[] {
  const unique = [...new Set(paths)].sort();
  return unique.filter((p) => !unique.some((o) => o !== p && (o === "/" || p.startsWith(o + "/"))));
}

function join(dir: string, name: string): string {
  return dir === "/" ? `/${name}` : `${dir}/${name}`;
}

const encoder = new TextEncoder();
const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

/** A name as a string, or undefined when it is not UTF-8 (then it names no hidden path). */
function utf8(bytes: Uint8Array): string | undefined {
  try {
    return strictUtf8.decode(bytes);
  } catch {
    return undefined; // not UTF-8: cannot equal any path we were given
  }
}

/** `dir/name` as a NUL-terminated C string, keeping the name's bytes as they are. */
function entryPath(dir: string, name: Uint8Array): Uint8Array<ArrayBuffer> {
  const prefix = encoder.encode(dir === "/" ? "/" : `${dir}/`);
  const out = new Uint8Array(prefix.length + name.length + 1);
  out.set(prefix);
  out.set(name, prefix.length);
  return out;
}

function cstr(s: string): Uint8Array<ArrayBuffer> {
  const bytes = encoder.encode(s);
  const out = new Uint8Array(bytes.length + 1);
  out.set(bytes);
  return out;
}

/** A Landlock system call (three arguments at most); -1 with errno on failure. */
type Arg = number | bigint;
function syscall3(libc: Libc, nr: number, a: Arg, b: Arg, c: Arg): number {
  return Number(libc.syscall6(BigInt(nr), BigInt(a), BigInt(b), BigInt(c), 0n, 0n, 0n));
}

function address(buf: Uint8Array<ArrayBuffer>): bigint {
  return BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(buf)));
}

/** The system calls, each failure turned into a LandlockError in one place. */
class Sys {
  readonly libc: Libc = openLibc();
  readonly #nr = syscalls()!;
  readonly #arch = ARCH[Deno.build.arch as keyof typeof ARCH];
  #rules = 0;

  #fail(
    step: LandlockStep,
    path: Uint8Array | string | undefined,
    what: string,
    errno = this.#errno(),
  ): never {
    const p = path === undefined || typeof path === "string"
      ? path
      : new TextDecoder().decode(path.subarray(0, path.indexOf(0)));
    const strerror = this.libc.strerror(errno);
    const reason = strerror === null
      ? "unknown error"
      : Deno.UnsafePointerView.getCString(strerror);
    const where = p === undefined ? "" : ` for "${p}"`;
    throw new LandlockError(step, errno, p, `${what} failed${where}: ${reason} (errno ${errno})`);
  }

  #errno(): number {
    const p = this.libc.__errno_location();
    return p === null ? 0 : new Deno.UnsafePointerView(p).getInt32();
  }

  /** An O_PATH descriptor of the entry itself (symlinks not followed), or -1 if it is gone. */
  #openEntry(path: Uint8Array<ArrayBuffer>, step: LandlockStep): { fd: number; mode: number } {
    const fd = this.libc.open(path, O_PATH | this.#arch.O_NOFOLLOW | LINUX.O_CLOEXEC, 0);
    if (fd === -1) {
      if (this.#errno() === ENOENT) return { fd: -1, mode: 0 };
      this.#fail(step, path, "open");
    }
    const st = statFd(fd);
    if (!st) {
      const errno = this.#errno(); // before close() can overwrite it
      this.libc.close(fd);
      this.#fail(step, path, "fstat", errno);
    }
    return { fd, mode: st.mode & S_IFMT };
  }

  /**
   * The real location of `path`: symlinks on the way are followed; the walk ends at the first
   * component that is missing or not a directory, and that is what gets hidden.
   */
  resolve(path: string): string {
    const pending = path.split("/").reverse();
    let dir = "/";
    let links = 0;
    while (pending.length > 0) {
      const name = pending.pop()!;
      if (name === "" || name === ".") continue;
      if (name === "..") {
        dir = dir.slice(0, dir.lastIndexOf("/")) || "/";
        continue;
      }
      const next = join(dir, name);
      const { fd, mode } = this.#openEntry(cstr(next), "resolve");
      if (fd === -1) return next;
      this.libc.close(fd);
      if (mode === S_IFDIR) dir = next;
      else if (mode !== S_IFLNK) return next;
      else {
        if (++links > MAX_SYMLINKS) {
          throw new LandlockError("resolve", ELOOP, path, `too many symlinks in "${path}"`);
        }
        const target = this.#readlink(next);
        pending.push(...target.split("/").reverse());
        if (target.startsWith("/")) dir = "/";
      }
    }
    return dir;
  }

  #readlink(path: string): string {
    const buf = new Uint8Array(4096);
    const n = Number(this.libc.readlink(cstr(path), buf, BigInt(buf.length)));
    if (n === -1) this.#fail("resolve", path, "readlink");
    const target = utf8(buf.subarray(0, n));
    if (target === undefined) {
      throw new LandlockError("resolve", 0, path, `symlink "${path}" points to a non-UTF-8 name`);
    }
    return target;
  }

  /** The entry names of `dir` (raw bytes, without `.` and `..`). */
  list(dir: string): Uint8Array[] {
    const handle = this.libc.opendir(cstr(dir));
    if (handle === null) this.#fail("list", dir, "opendir");
    const names: Uint8Array[] = [];
    try {
      // readdir's end and its (rare, EBADF-only) errors both return NULL.
      for (let ent = this.libc.readdir(handle); ent !== null; ent = this.libc.readdir(handle)) {
        const view = new Deno.UnsafePointerView(ent);
        const off = LINUX.DIRENT_NAME_OFFSET;
        const raw = new Uint8Array(view.getArrayBuffer(view.getUint16(16) - off, off));
        const end = raw.indexOf(0);
        const name = raw.slice(0, end === -1 ? raw.length : end);
        const dots = name.length <= 2 && name.every((b) => b === 0x2e);
        if (!dots) names.push(name);
      }
    } finally {
      this.libc.closedir(handle);
    }
    return names;
  }

  createRuleset(abi: number, handledFs: bigint, scoped: bigint): number {
    const attr = new Uint8Array(24);
    const view = new DataView(attr.buffer);
    view.setBigUint64(0, handledFs, true);
    view.setBigUint64(16, scoped, true); // handled_access_net (8) stays 0: networking is left alone
    const size = abi >= 6 ? 24 : abi >= 4 ? 16 : 8;
    const fd = syscall3(this.libc, this.#nr.landlock_create_ruleset, address(attr), size, 0);
    if (fd === -1) this.#fail("create_ruleset", undefined, "landlock_create_ruleset");
    return fd;
  }

  /** Adds a rule for `path` (directories get `dirRights`, other files `fileRights`; links none). */
  allow(
    ruleset: number,
    path: string | Uint8Array<ArrayBuffer>,
    dirRights: bigint,
    fileRights: bigint,
  ): void {
    const c = typeof path === "string" ? cstr(path) : path;
    const { fd, mode } = this.#openEntry(c, "open");
    if (fd === -1 || mode === S_IFLNK) {
      if (fd !== -1) this.libc.close(fd);
      return; // gone since listed, or a symlink: the kernel checks the resolved location anyway
    }
    try {
      if (++this.#rules > MAX_LANDLOCK_RULES) {
        throw new LandlockError(
          "rules",
          0,
          undefined,
          `hiding these paths needs more than ${MAX_LANDLOCK_RULES} rules`,
        );
      }
      const attr = new Uint8Array(12); // struct landlock_path_beneath_attr, packed
      const view = new DataView(attr.buffer);
      view.setBigUint64(0, mode === S_IFDIR ? dirRights : fileRights, true);
      view.setInt32(8, fd, true);
      const ruleType = LANDLOCK_RULE_PATH_BENEATH;
      const rc = syscall3(this.libc, this.#nr.landlock_add_rule, ruleset, ruleType, address(attr));
      // EBADFD: a pseudo-filesystem object (e.g. an nsfs bind mount) cannot carry a rule; it
      // stays without rights, which only ever denies more.
      if (rc === -1 && this.#errno() !== EBADFD) {
        this.#fail("add_rule", c, "landlock_add_rule");
      }
    } finally {
      this.libc.close(fd);
    }
  }

  restrict(ruleset: number): void {
    if (this.libc.prctl(LINUX.PR_SET_NO_NEW_PRIVS, 1n, 0n, 0n, 0n) === -1) {
      this.#fail("no_new_privs", undefined, "prctl(PR_SET_NO_NEW_PRIVS)");
    }
    const rc = syscall3(this.libc, this.#nr.landlock_restrict_self, ruleset, 0, 0);
    if (rc === -1) this.#fail("restrict_self", undefined, "landlock_restrict_self");
  }
}
