/**
 * Hiding the control plane with a private mount namespace (when the launcher may mount: root or
 * CAP_SYS_ADMIN). Each hidden directory is covered by an empty read-only tmpfs, each hidden file
 * by a read-only bind of /dev/null; a path a program must still use inside a hidden one (its
 * session's own scratch directory) is bound back into place first. Mounts are private to the
 * new namespace (the host never sees them), and the Landlock domain applied afterwards forbids
 * every change of mount topology, so a program cannot unmount them.
 *
 * Compared with Landlock alone (src/sandbox/landlock.ts) nothing around the hidden paths is
 * frozen: `$HOME`, `/tmp`… stay fully writable. Unprivileged launchers cannot use it (a user
 * namespace needs a single-threaded caller, and the launcher is a Deno process): they fall back
 * to Landlock's rules. Synchronous calls only: the namespace belongs to the calling thread.
 */
import {
  cstr,
  decodeCString,
  errno,
  LINUX,
  S_IFDIR,
  S_IFMT,
  SIGNALS,
  statPath,
  sys,
  SysError,
} from "../../ffi/mod.ts";

const NULL = null as unknown as Uint8Array;
const O_DIRECTORY = Deno.build.arch === "aarch64" ? 0o40000 : 0o200000;
function kind(path: string): "dir" | "file" | undefined {
  const st = statPath(path);
  if (!st) return undefined;
  return (st.mode & S_IFMT) === S_IFDIR ? "dir" : "file";
}

function mount(
  src: string | null,
  target: string,
  fstype: string | null,
  flags: number,
  data = "",
) {
  const rc = sys().mount(
    src === null ? NULL : cstr(src),
    cstr(target),
    fstype === null ? NULL : cstr(fstype),
    BigInt(flags),
    cstr(data),
  );
  if (rc !== 0) throw new SysError(`mount ${target}`, errno());
}

function mkdirs(path: string): void {
  let cur = "";
  for (const part of path.split("/").filter(Boolean)) {
    cur += `/${part}`;
    // 0711: a run_as user must pass through to its own bound-back directory (listing needs r).
    if (sys().mkdir(cstr(cur), 0o711) !== 0) {
      // EEXIST is the common case (every ancestor exists). errno is read after the call
      // returned to JS, where it may already be another call's: a directory there is fine
      // whatever it says (seen once: "mkdir /tmp failed: ENOENT").
      const e = errno();
      if (e !== 17 /* EEXIST */ && kind(cur) !== "dir") throw new SysError(`mkdir ${cur}`, e);
    }
  }
}

/** A group id no user is given (/proc's "may see every process" group must be nobody's). */
const NOBODYS_GROUP = 2147483646;

/**
 * Replaces /proc in this (private) mount namespace with a procfs instance mounted
 * `hidepid=invisible`: a process sees only the processes it may ptrace-read — under run_as,
 * those of its own user. Other users' command lines (an agent's shim started with `--token`, a
 * browser opened with a URL) and their /proc files are gone from view. Call after
 * hideWithMounts (the namespace is private) and before the privileges drop; throws SysError.
 */
export function privateProc(): void {
  mount(
    "proc",
    "/proc",
    "proc",
    LINUX.MS_NOSUID | LINUX.MS_NODEV | LINUX.MS_NOEXEC,
    // gid= names the group whose members see everything: by default 0, so root sessions would
    // see all. A group id nobody has.
    `hidepid=invisible,gid=${NOBODYS_GROUP}`,
  );
}

/** Whether this launcher may build a mount namespace (effective uid 0). */
export function canMount(): boolean {
  return sys().geteuid() === 0;
}

/**
 * Covers `hide` (keeping `allow` reachable) in a new private mount namespace; throws SysError.
 * The caller re-enters its working directory afterwards (a cwd inside a hidden directory would
 * still be the directory below the cover).
 */
export function hideWithMounts(hide: readonly string[], allow: readonly string[]): string[] {
  const libc = sys();
  if (libc.unshare(LINUX.CLONE_NEWNS) !== 0) throw new SysError("unshare(CLONE_NEWNS)", errno());
  mount(null, "/", null, LINUX.MS_REC | LINUX.MS_PRIVATE);
  try {
    return cover(hide, allow);
  } catch (err) {
    // Some covers may be in place and not the paths bound back below them: Landlock hiding on
    // top of that half-built view would leave the session without its own files. Not degraded.
    throw new HalfCovered(err instanceof Error ? err.message : String(err));
  }
}

/** The mount namespace was made and partly covered when a step failed: the launch must end. */
export class HalfCovered extends Error {
  override name = "HalfCovered";
}

function cover(hide: readonly string[], allow: readonly string[]): string[] {
  const libc = sys();
  // Hold the paths to keep before anything is covered (in the new namespace: a bind source
  // must be one of its own mounts).
  const keep: { path: string; fd: number }[] = [];
  for (const a of allow) {
    const fd = libc.open(cstr(a), LINUX.O_PATH | O_DIRECTORY | LINUX.O_CLOEXEC, 0);
    if (fd >= 0) keep.push({ path: a, fd });
    // Gone is nothing to keep; there but not openable would be covered with the rest.
    else if (errno() !== LINUX.ENOENT) throw new SysError(`open ${a}`, errno());
  }
  try {
    const hidden: string[] = [];
    const sorted = [...new Set(hide)].sort();
    const outer = sorted.filter((p) => !sorted.some((o) => o !== p && p.startsWith(o + "/")));
    const ro = LINUX.MS_RDONLY | LINUX.MS_NOSUID | LINUX.MS_NODEV | LINUX.MS_NOEXEC;
    // Every directory above a hidden path becomes a mount point of itself (recursively, so
    // what is mounted below stays): a mount point cannot be renamed (EBUSY), so no session can
    // move an ancestor aside and put its own files where the daemon will read the hidden path
    // (a config, a pinned JWKS file) the next time it loads them. Outermost first.
    const ancestors = new Set<string>();
    for (const h of outer) {
      for (
        let a = h.slice(0, h.lastIndexOf("/"));
        a.length > 1;
        a = a.slice(0, a.lastIndexOf("/"))
      ) {
        ancestors.add(a);
      }
    }
    for (const a of [...ancestors].sort((x, y) => x.length - y.length)) {
      if (kind(a) !== "dir") continue;
      try {
        mount(a, a, null, LINUX.MS_BIND | LINUX.MS_REC);
      } catch {
        // A path that cannot be bound (an automount, a vanished directory): its children stay
        // covered below; only its rename is not prevented.
      }
    }
    for (const h of outer) {
      const k = kind(h);
      if (k === undefined) continue; // nothing there yet: see below (Landlock keeps it uncreatable)
      if (k === "file") {
        mount("/dev/null", h, null, LINUX.MS_BIND);
        mount(null, h, null, LINUX.MS_REMOUNT | LINUX.MS_BIND | ro);
        hidden.push(h);
        continue;
      }
      // A cover that holds a path bound back is traversable (x for everyone, never r): under
      // `security.run_as` the session's user must walk through it to its own scratch directory,
      // and finds nothing else there. A cover without one stays closed to all but root.
      const inner = keep.filter((k2) => k2.path.startsWith(h + "/"));
      const open = inner.length > 0;
      mount(
        "termada-hidden",
        h,
        "tmpfs",
        LINUX.MS_NOSUID | LINUX.MS_NODEV | LINUX.MS_NOEXEC,
        `size=64k,mode=${open ? "0711" : "0700"}`,
      );
      for (const k2 of inner) {
        mkdirs(k2.path);
        mount(`/proc/self/fd/${k2.fd}`, k2.path, null, LINUX.MS_BIND);
      }
      mount(null, h, "tmpfs", LINUX.MS_REMOUNT | ro, `size=64k,mode=${open ? "0511" : "0500"}`);
      hidden.push(h);
    }
    return hidden;
  } finally {
    for (const k of keep) libc.close(k.fd);
  }
}

/** What {@link privateTerminal} made: the new master (the launcher's fd) and the slave's name. */
export interface PrivateTerminal {
  master: number;
  tty: string;
}

/** Fails the terminal step with the call that failed. */
function need(rc: number, what: string): number {
  if (rc < 0) throw new SysError(what, errno());
  return rc;
}

/**
 * Gives the session a `devpts` instance of its own (in the private mount namespace
 * hideWithMounts made): mounts a new instance on /dev/pts, binds its `ptmx` over /dev/ptmx (so
 * programs of the session allocate their terminals from it too), opens a new terminal there and
 * makes it this process's controlling terminal and fds 0–2, with the termios and size of the
 * terminal the daemon spawned us on. Afterwards no path leads to another terminal of the host:
 * /dev/pts lists only the session's own.
 *
 * The daemon's terminal stays open as a close-on-exec copy until the exec, so the daemon's master sees
 * no hangup before it has taken the new master (pidfd_getfd) and switched over. Returns the new
 * master (close-on-exec). `gid` owns the slaves (the host's tty group; drop.ts re-owns fd 0 for
 * run_as). Throws SysError with nothing half-done that matters: a failed mount leaves the host's
 * /dev/pts in place (the caller degrades); a failure after it ends the launch (the caller fails).
 */
export function privateTerminal(gid: number): PrivateTerminal {
  const libc = sys();
  mount(
    "devpts",
    "/dev/pts",
    "devpts",
    LINUX.MS_NOSUID | LINUX.MS_NOEXEC,
    `newinstance,ptmxmode=0666,mode=0620,gid=${gid}`,
  );
  mount("/dev/pts/ptmx", "/dev/ptmx", null, LINUX.MS_BIND);
  const master = need(
    libc.open(cstr("/dev/pts/ptmx"), LINUX.O_RDWR | LINUX.O_NOCTTY | LINUX.O_CLOEXEC, 0),
    "open(/dev/pts/ptmx)",
  );
  need(libc.unlockpt(master), "unlockpt");
  const name = new Uint8Array(64);
  if (libc.ptsname_r(master, name, BigInt(name.length)) !== 0) {
    throw new SysError("ptsname_r", errno());
  }
  const tty = decodeCString(name);
  const slave = need(libc.open(cstr(tty), LINUX.O_RDWR | LINUX.O_NOCTTY, 0), `open(${tty})`);
  const termios = new Uint8Array(64);
  if (libc.ioctl(0, BigInt(LINUX.TCGETS), termios) === 0) {
    need(libc.ioctl(slave, BigInt(LINUX.TCSETS), termios), "ioctl(TCSETS)");
  }
  const size = new Uint8Array(8);
  if (libc.ioctl(0, BigInt(LINUX.TIOCGWINSZ), size) === 0) {
    need(libc.ioctl(master, BigInt(LINUX.TIOCSWINSZ), size), "ioctl(TIOCSWINSZ)");
  }
  need(libc.fcntl(0, LINUX.F_DUPFD_CLOEXEC, 10), "fcntl(F_DUPFD_CLOEXEC)");
  // Giving up the old controlling terminal sends SIGHUP to our own group: ignored until the
  // launcher resets every disposition before the exec.
  libc.signal(SIGNALS.HUP, Deno.UnsafePointer.create(1n));
  need(libc.ioctl(0, BigInt(LINUX.TIOCNOTTY), NULL), "ioctl(TIOCNOTTY)");
  need(libc.ioctl(slave, BigInt(LINUX.TIOCSCTTY), NULL), "ioctl(TIOCSCTTY)");
  for (const fd of [0, 1, 2]) need(libc.dup2(slave, fd), "dup2");
  if (slave > 2) libc.close(slave);
  return { master, tty };
}
