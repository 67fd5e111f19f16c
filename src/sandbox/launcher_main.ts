/**
 * `termada __launch`: the launcher. The daemon spawns it (on the session's PTY, with the
 * control socket on fd 3) instead of the program itself; it sets the boundary up in this very
 * process and then `execve`s the program, so the boundary holds from its first instruction:
 *
 *   1. read the spec (one JSON line on fd 3),
 *   2. join the session's cgroup,
 *   3. hide the control plane's files in a private mount namespace (root), and give the
 *      session a devpts instance of its own (its terminal is the only one it can open),
 *   4. `no_new_privs`, then Landlock (scoping; it hides the files itself where 3 was not possible),
 *   5. `security.run_as`: become that user (drop.ts), when configured,
 *   6. the exec filter (seccomp user notification), whose listener fd it reports,
 *   7. wait for "go" (the daemon has taken the listener with `pidfd_getfd`), close it,
 *   8. reset signal dispositions and mask, `execvpe` the program. fd 3 is close-on-exec: the
 *      daemon sees EOF on success, or a failure line.
 *
 * It imports only the sandbox's own mechanics, so it starts in tens of milliseconds.
 */
import {
  cstr,
  cstrArray,
  decodeCString,
  errno,
  LINUX,
  S_IFMT,
  S_IFREG,
  statFd,
  statPath,
  sys,
  SysError,
} from "../../ffi/mod.ts";
import { dropPrivileges } from "./drop.ts";
import { applyLandlock } from "./landlock.ts";
import { canMount, HalfCovered, hideWithMounts, privateProc, privateTerminal } from "./mounts.ts";
import { installExecFilter } from "./seccomp.ts";
import {
  LAUNCH_FD,
  type LaunchFailed,
  type LaunchReady,
  type LaunchSpec,
  MAX_SPEC_BYTES,
} from "./spec.ts";

const F_SETFD = 2;
/**
 * CAP_LINUX_IMMUTABLE 9, SYS_MODULE 16, SYS_RAWIO 17, SYS_PTRACE 19, SYS_ADMIN 21, SYS_BOOT 22,
 * SYS_TIME 25, MAC_OVERRIDE 32, MAC_ADMIN 33, SYSLOG 34, WAKE_ALARM 35, BLOCK_SUSPEND 36,
 * PERFMON 38, BPF 39.
 */
const ROOT_CAPS_DROPPED = [9, 16, 17, 19, 21, 22, 25, 32, 33, 34, 35, 36, 38, 39];
const FD_CLOEXEC = 1;

function send(msg: LaunchReady | LaunchFailed): void {
  const bytes = new TextEncoder().encode(JSON.stringify(msg) + "\n");
  let off = 0;
  while (off < bytes.length) {
    const n = Number(sys().write(LAUNCH_FD, bytes.subarray(off), BigInt(bytes.length - off)));
    if (n <= 0) return;
    off += n;
  }
}

function fail(step: LaunchFailed["step"], error: string, code?: number): never {
  send({ ready: false, step, error, ...(code !== undefined ? { errno: code } : {}) });
  sys()._exit(126);
  throw new Error("unreachable");
}

/** Reads until the first newline (blocking socket reads). */
function readLine(limit: number): string | undefined {
  const buf = new Uint8Array(65536);
  const parts: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const n = Number(sys().read(LAUNCH_FD, buf, BigInt(buf.length)));
    if (n < 0 && errno() === LINUX.EINTR) continue;
    if (n <= 0) return undefined;
    const chunk = buf.slice(0, n);
    const nl = chunk.indexOf(10);
    parts.push(nl >= 0 ? chunk.subarray(0, nl) : chunk);
    total += n;
    if (nl >= 0) break;
    if (total > limit) return undefined;
  }
  const all = new Uint8Array(parts.reduce((a, p) => a + p.length, 0));
  let o = 0;
  for (const p of parts) {
    all.set(p, o);
    o += p.length;
  }
  return new TextDecoder().decode(all);
}

/** PATH lookup as execvp does it: the first regular, executable file (or the name with a /). */
function resolveProgram(name: string, pathVar: string): string | undefined {
  if (name.includes("/")) return name;
  for (const dir of pathVar.split(":")) {
    const file = `${dir === "" ? "." : dir}/${name}`;
    const st = statPath(file);
    if (st && (st.mode & S_IFMT) === S_IFREG && (st.mode & 0o111) !== 0) return file;
  }
  return undefined;
}

/** Writes a small file through libc (Deno's file APIs refuse /sys without full permissions). */
function writeFile(path: string, text: string): void {
  const fd = sys().open(cstr(path), 1 /* O_WRONLY */ | LINUX.O_CLOEXEC, 0);
  if (fd < 0) throw new Error(`cannot open ${path} (errno ${errno()})`);
  try {
    const bytes = new TextEncoder().encode(text);
    if (Number(sys().write(fd, bytes, BigInt(bytes.length))) !== bytes.length) {
      throw new Error(`cannot write ${path} (errno ${errno()})`);
    }
  } finally {
    sys().close(fd);
  }
}

/**
 * Enters the working directory again by its path, now that the hidden paths are covered: the
 * cwd posix_spawn set is the directory itself, which stays reachable below a cover. A cwd that
 * is hidden (the path leads nowhere now) ends the launch.
 */
function reenterCwd(): void {
  const buf = new Uint8Array(4096);
  if (sys().getcwd(buf, BigInt(buf.length)) === null) {
    fail("cwd", "cannot read the working directory", errno());
  }
  const cwd = decodeCString(buf);
  if (sys().chdir(cstr(cwd)) !== 0) {
    fail("cwd", `the working directory "${cwd}" is hidden from sessions`, errno());
  }
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

export function runLauncher(): never {
  const libc = sys();
  const line = readLine(MAX_SPEC_BYTES);
  if (line === undefined) fail("spec", "no launch spec on fd 3");
  let spec: LaunchSpec;
  try {
    spec = JSON.parse(line) as LaunchSpec;
    if (spec.v !== 1 || !Array.isArray(spec.argv) || spec.argv.length === 0) {
      throw new Error("bad spec");
    }
  } catch (err) {
    fail("spec", message(err));
  }
  const required = new Set(spec.required);
  const ready: LaunchReady = {
    ready: true,
    listener: -1,
    landlock: null,
    seccomp: null,
    cgroup: null,
    mounts: null,
    killable: false,
  };

  if (spec.cgroup) {
    try {
      writeFile(`${spec.cgroup}/cgroup.procs`, "0");
    } catch (err) {
      if (required.has("cgroup")) fail("cgroup", message(err));
      ready.cgroup = { error: message(err) };
    }
  }

  // Root sessions lose the capabilities that reach past the boundary: ptrace (other processes'
  // /proc files), sys_admin (TIOCSTI into terminals outside the session, mounts, namespaces),
  // module loading, raw I/O, the clock, MAC policy, BPF, perf, the kernel log, immutable
  // files. Dropped from the bounding set, so the program exec'd below never has them.
  if (libc.geteuid() === 0 && (spec.seccomp || spec.landlock)) {
    for (const cap of ROOT_CAPS_DROPPED) libc.prctl(LINUX.PR_CAPBSET_DROP, BigInt(cap), 0n, 0n, 0n);
  }

  // Where the launcher may mount, a private mount namespace covers the hidden paths and
  // Landlock only scopes (signals, sockets, ptrace, no mount changes); elsewhere Landlock's own
  // rules hide them (and freeze the directories around them: docs/SECURITY.md). The namespace
  // needs root, so it comes before run_as drops it.
  let hide = spec.landlock?.hide ?? [];
  let allow = spec.landlock?.allow ?? [];
  let how: "mounts" | "landlock" = "landlock";
  if (spec.landlock && spec.mounts && canMount()) {
    try {
      hideWithMounts(hide, allow);
      hide = [];
      allow = [];
      how = "mounts";
    } catch (err) {
      if (err instanceof HalfCovered) fail("mounts", message(err));
      ready.mounts = { error: message(err) };
    }
    if (how === "mounts") reenterCwd();
    if (how === "mounts" && spec.terminal) {
      try {
        const t = privateTerminal(statFd(0)?.gid ?? 0);
        ready.terminal = { fd: t.master, tty: t.tty };
      } catch (err) {
        // The instance could not be mounted: the host's /dev/pts is still there (degrade, say
        // so). Past that point the session's terminal would be half switched: end the launch.
        const e = err instanceof SysError ? err : undefined;
        if (e && e.syscall !== "mount /dev/pts") fail("terminal", message(err), e.errno);
        ready.terminal = { error: message(err) };
      }
    }
    if (how === "mounts") {
      // Processes the session may not ptrace leave its view: their argv and /proc files. That is
      // other users' (run_as) and, through Landlock's ptrace scoping, every process outside
      // this session's domain: the daemon, agents' shims, other sessions, the user's own.
      try {
        privateProc();
      } catch (err) {
        ready.proc = { error: message(err) };
      }
    }
  }

  if (
    libc.prctl(LINUX.PR_SET_NO_NEW_PRIVS, 1n, 0n, 0n, 0n) !== 0 && (spec.seccomp || spec.landlock)
  ) {
    fail("seccomp", "prctl(PR_SET_NO_NEW_PRIVS) failed", errno());
  }

  if (spec.landlock) {
    try {
      const r = applyLandlock({ hide, allow });
      ready.landlock = { abi: r.abi, scopes: r.scopes, hiding: how };
    } catch (err) {
      if (required.has("landlock")) fail("landlock", message(err));
      ready.landlock = { error: message(err) };
    }
  }

  // security.run_as: from here on this process is that user; there is no way on as the
  // daemon's user (the drop verifies itself, and a failure ends the launch). After Landlock:
  // building its rules opens the hidden paths and lists the directories around them, which a
  // daemon that is not root can do only with its own capabilities (Landlock does not mediate
  // credentials, so the drop works inside the domain). Before the exec filter, whose listener
  // the daemon then takes from a process that already is that user.
  if (spec.user) {
    try {
      dropPrivileges(spec.user);
    } catch (err) {
      fail("user", message(err), err instanceof SysError ? err.errno : undefined);
    }
  }

  if (spec.seccomp) {
    try {
      const f = installExecFilter();
      ready.listener = f.fd;
      ready.killable = f.killable;
    } catch (err) {
      if (required.has("seccomp")) fail("seccomp", message(err));
      ready.seccomp = { error: message(err) };
    }
  }

  send(ready);
  const go = readLine(64);
  if (go !== "go") fail("spec", `the daemon did not confirm (${JSON.stringify(go ?? "EOF")})`);
  if (ready.listener >= 0) libc.close(ready.listener);
  libc.fcntl(LAUNCH_FD, F_SETFD, FD_CLOEXEC);

  // Deno ignores SIGPIPE and an ignored disposition survives exec: give the program defaults.
  for (let sig = 1; sig < 32; sig++) if (sig !== 9 && sig !== 19) libc.signal(sig, null);
  const empty = new Uint8Array(LINUX.SIZEOF_SIGSET);
  libc.sigemptyset(empty);
  libc.sigprocmask(LINUX.SIG_SETMASK, empty, null);

  // One execve of the resolved file (not execvpe's try-every-PATH-entry): the exec gate sees
  // exactly the program that runs, once.
  const file = resolveProgram(spec.argv[0]!, spec.env.PATH ?? "/usr/local/bin:/usr/bin:/bin");
  if (file === undefined) fail("exec", `cannot run "${spec.argv[0]}"`, LINUX.ENOENT);
  const argv = cstrArray(spec.argv, "argv");
  const envp = cstrArray(Object.entries(spec.env).map(([k, v]) => `${k}=${v}`), "env");
  libc.execve(cstr(file), argv.ptrs, envp.ptrs);
  const e = errno();
  void argv.keep;
  void envp.keep;
  fail("exec", `cannot run "${spec.argv[0]}"`, e);
}

if (import.meta.main) runLauncher();
