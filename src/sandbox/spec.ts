/**
 * What the daemon asks the launcher to set up (one JSON line on fd 3) and what the launcher
 * answers. Shared by both ends; no logic.
 */

/** The control fd the launcher finds its spec on (a socketpair end the daemon dup2'd there). */
export const LAUNCH_FD = 3;
/** Largest spec line accepted (bytes): argv and env of one program. */
export const MAX_SPEC_BYTES = 1 << 20;

export interface LaunchSpec {
  v: 1;
  argv: string[];
  env: Record<string, string>;
  /** Join this cgroup (its directory) before anything else, or null. */
  cgroup: string | null;
  /** Install the exec filter and hand its listener to the daemon. */
  seccomp: boolean;
  /** Paths made unreachable by Landlock (and exceptions inside them), or null for none. */
  landlock: { hide: string[]; allow: string[] } | null;
  /** Hide with a private mount namespace (the daemon runs as root); else with Landlock rules. */
  mounts: boolean;
  /**
   * Give the session a devpts instance of its own (needs the mount namespace): its terminal is
   * the only one any of its processes can open. The new master is reported for pidfd_getfd.
   */
  terminal?: boolean;
  /** Features that must work: when one fails the launcher exits instead of degrading. */
  required: ("seccomp" | "landlock" | "cgroup")[];
  /**
   * `security.run_as`: become this user after the cgroup, the mount namespace and Landlock
   * (which need the daemon's privilege) and before the exec filter. Never optional once given:
   * a drop that fails ends the launch. `tty_gid` is the group the terminal is given (0620).
   */
  user?: { uid: number; gid: number; tty_gid: number } | null;
}

/** The launcher's report, sent before it waits for "go". */
export interface LaunchReady {
  ready: true;
  /** The listener fd number in the launcher (for pidfd_getfd), or -1. */
  listener: number;
  landlock:
    | { abi: number; scopes: string[]; hiding: "mounts" | "landlock" }
    | { error: string }
    | null;
  /**
   * The filter's waits are killable-only once received (Linux ≥ 5.19): a frozen or signalled
   * target cannot restart its execve behind the gate's back, so allowed execs can be verified.
   */
  killable: boolean;
  /** The mount namespace could not be built (Landlock's rules hid the paths instead). */
  mounts: { error: string } | null;
  seccomp: { error: string } | null;
  cgroup: { error: string } | null;
  /**
   * The session's own terminal: `fd` is its master in the launcher (the daemon takes it with
   * pidfd_getfd before "go" and reads it instead of the one it spawned on), `tty` the slave's
   * name as the session sees it. `error`: no private devpts, the host's terminals stay reachable.
   * Absent: not asked for.
   */
  terminal?: { fd: number; tty: string } | { error: string };
  /** Under run_as: the private `hidepid` /proc could not be mounted (absent: it was, or n/a). */
  proc?: { error: string };
}

/** The boundary steps a launcher reported as failed, as `step: error` lines (empty: none). */
export function launchProblems(r: LaunchReady | undefined): string[] {
  if (!r) return [];
  const out: string[] = [];
  const add = (step: string, v: unknown) => {
    if (v && typeof v === "object" && "error" in v) {
      out.push(`${step}: ${(v as { error: string }).error}`);
    }
  };
  add("landlock", r.landlock);
  add("mounts", r.mounts);
  add("seccomp", r.seccomp);
  add("cgroup", r.cgroup);
  add("terminal", r.terminal);
  add("proc", r.proc);
  return out;
}

/** Sent instead when setup or exec failed: the launcher exits right after. */
export interface LaunchFailed {
  ready: false;
  step:
    | "spec"
    | "cgroup"
    | "cwd"
    | "mounts"
    | "terminal"
    | "user"
    | "landlock"
    | "seccomp"
    | "exec";
  error: string;
  errno?: number;
}
