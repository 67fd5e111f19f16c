/**
 * `security.run_as` in the launcher: the process becomes another user before it execs the
 * program. Called after the steps that need the daemon's privilege (joining the cgroup, the
 * mount namespace) and before `no_new_privs`, Landlock and the exec filter. Every call is
 * checked and the result verified; any failure throws, and the launcher turns it into a launch
 * failure: it never goes on as the daemon's user.
 *
 * glibc's `setgroups`/`setresgid`/`setresuid` change every thread of the process (the launcher
 * is a multi-threaded Deno process; the raw syscalls would change only the calling one).
 * Imports only ffi/: the launcher must start fast.
 */
import { cstr, errno, LINUX, sys, SysError } from "../../ffi/mod.ts";

export interface DropTarget {
  uid: number;
  gid: number;
  /** Group of the session's terminal (the `tty` group, else the user's own). */
  tty_gid: number;
}

/** What /proc/self/status says of the capability sets (hex words), or undefined. */
export function capabilitySets(
  status: string,
): { inh: bigint; prm: bigint; eff: bigint; amb: bigint } | undefined {
  const get = (name: string) => {
    const m = new RegExp(`^${name}:\\s*([0-9a-fA-F]+)\\s*$`, "m").exec(status);
    return m ? BigInt(`0x${m[1]}`) : undefined;
  };
  const inh = get("CapInh");
  const prm = get("CapPrm");
  const eff = get("CapEff");
  const amb = get("CapAmb") ?? 0n; // before Linux 4.3 there is no ambient set
  if (inh === undefined || prm === undefined || eff === undefined) return undefined;
  return { inh, prm, eff, amb };
}

/** /proc/self/status through libc (Deno's file APIs refuse /proc without full permissions). */
function ownStatus(): string {
  const libc = sys();
  const fd = libc.open(cstr("/proc/self/status"), LINUX.O_RDONLY | LINUX.O_CLOEXEC, 0);
  if (fd < 0) throw new SysError("open /proc/self/status", errno());
  try {
    const buf = new Uint8Array(16384);
    let total = 0;
    while (total < buf.length) {
      const n = Number(libc.read(fd, buf.subarray(total), BigInt(buf.length - total)));
      if (n <= 0) break;
      total += n;
    }
    return new TextDecoder().decode(buf.subarray(0, total));
  } finally {
    libc.close(fd);
  }
}

function ids(get: "getresuid" | "getresgid"): [number, number, number] {
  const r = new Uint32Array(1);
  const e = new Uint32Array(1);
  const s = new Uint32Array(1);
  const rc = sys()[get](
    new Uint8Array(r.buffer),
    new Uint8Array(e.buffer),
    new Uint8Array(s.buffer),
  );
  if (rc !== 0) throw new SysError(get, errno());
  return [r[0]!, e[0]!, s[0]!];
}

/**
 * Hands the terminal on fd 0 (when it is one) to the user, clears the supplementary groups,
 * sets every gid then every uid, empties the capability sets (a daemon that is not root keeps
 * its capabilities across a uid change otherwise), and verifies all of it. Throws SysError or
 * Error; the process must not go on after a throw.
 */
export function dropPrivileges(to: DropTarget): void {
  const libc = sys();
  const was = libc.geteuid();
  if (to.uid === 0 || to.gid === 0) throw new Error("refusing to run as uid or gid 0");
  // Its own terminal, as login and sshd do it (owner rw, group w): the user's programs reopen it
  // (/dev/pts/N, `tty`, ssh's prompts), and nothing else of the daemon becomes theirs.
  if (libc.isatty(0) === 1) {
    if (libc.fchown(0, to.uid, to.tty_gid) !== 0) throw new SysError("fchown(tty)", errno());
    if (libc.fchmod(0, 0o620) !== 0) throw new SysError("fchmod(tty)", errno());
  }
  if (libc.setgroups(0n, new Uint8Array(4)) !== 0) throw new SysError("setgroups(0)", errno());
  if (libc.setresgid(to.gid, to.gid, to.gid) !== 0) throw new SysError("setresgid", errno());
  if (libc.setresuid(to.uid, to.uid, to.uid) !== 0) throw new SysError("setresuid", errno());
  // From root, the uid change already cleared every set; from a daemon holding capabilities
  // (ambient ones, to reach this launcher at all) it did not.
  if (libc.prctl(LINUX.PR_CAP_AMBIENT, BigInt(LINUX.PR_CAP_AMBIENT_CLEAR_ALL), 0n, 0n, 0n) !== 0) {
    if (errno() !== LINUX.EINVAL) throw new SysError("prctl(PR_CAP_AMBIENT_CLEAR_ALL)", errno());
  }
  const header = new Uint32Array([LINUX.LINUX_CAPABILITY_VERSION_3, 0]);
  const data = new Uint32Array(6); // {effective, permitted, inheritable} × 2, all zero
  if (libc.capset(new Uint8Array(header.buffer), new Uint8Array(data.buffer)) !== 0) {
    throw new SysError("capset(0)", errno());
  }

  // Verify: every id, no groups, no capability, and no way back.
  const uids = ids("getresuid");
  const gids = ids("getresgid");
  if (uids.some((u) => u !== to.uid)) throw new Error(`uids are ${uids.join("/")}, not ${to.uid}`);
  if (gids.some((g) => g !== to.gid)) throw new Error(`gids are ${gids.join("/")}, not ${to.gid}`);
  if (libc.getuid() !== to.uid || libc.geteuid() !== to.uid || libc.getgid() !== to.gid) {
    throw new Error("the uid or gid did not change");
  }
  const groups = libc.getgroups(0, new Uint8Array(4));
  if (groups !== 0) throw new Error(`${groups} supplementary groups remain`);
  const caps = capabilitySets(ownStatus());
  if (!caps) throw new Error("cannot read the capability sets from /proc/self/status");
  if (caps.eff !== 0n || caps.prm !== 0n || caps.amb !== 0n || caps.inh !== 0n) {
    throw new Error(
      `capabilities remain (CapEff ${caps.eff.toString(16)}, CapPrm ${caps.prm.toString(16)}, ` +
        `CapAmb ${caps.amb.toString(16)})`,
    );
  }
  if (was !== to.uid && libc.setresuid(was, was, was) === 0) {
    throw new Error(`uid ${was} could be taken back`);
  }
}
