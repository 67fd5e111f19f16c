/**
 * The exec filter and its listener (seccomp user notification).
 *
 * Launcher side: `installExecFilter()` sets a classic-BPF filter on the calling thread that turns
 * every `execve`/`execveat` of this process and all its descendants into a notification on a
 * listener fd (SECCOMP_FILTER_FLAG_NEW_LISTENER), refuses every syscall of a foreign ABI (x32,
 * i386 via `int 0x80`) with EACCES, and allows everything else. Filters are inherited across
 * fork and exec and can never be removed, so nothing a session starts escapes it.
 *
 * Daemon side: `Listener` wraps the listener fd (taken from the launcher with `pidfd_getfd`):
 * `recv()` one notification, `valid(id)` re-checks that the target is still blocked in that very
 * syscall (after reading its memory: a pid can die and be reused), `allow(id)` lets the kernel
 * run it (SECCOMP_USER_NOTIF_FLAG_CONTINUE), `deny(id, errno)` fails it.
 */
import { errno, LINUX, sys, syscalls, SysError } from "../../ffi/mod.ts";

// seccomp(2) operations and flags.
const SECCOMP_SET_MODE_FILTER = 1;
const SECCOMP_GET_NOTIF_SIZES = 3;
const FLAG_NEW_LISTENER = 1 << 3;
/** 5.19+: once the daemon received a notification, only a fatal signal interrupts the wait. */
const FLAG_WAIT_KILLABLE_RECV = 1 << 5;

// Filter return values.
const RET_ALLOW = 0x7fff0000;
const RET_USER_NOTIF = 0x7fc00000;
const RET_ERRNO = 0x00050000;

// Classic BPF opcodes.
const LD_W_ABS = 0x20;
const JEQ_K = 0x15;
const JGE_K = 0x35;
const RET_K = 0x06;

/** seccomp_data offsets: nr (int) at 0, arch (u32) at 4. */
const OFF_NR = 0;
const OFF_ARCH = 4;
/** x86_64: syscall numbers with this bit set are the x32 ABI (a second syscall table). */
const X32_BIT = 0x40000000;

const NOTIF_RECV = 0xc0502100n; // _IOWR('!', 0, struct seccomp_notif)   (80 bytes)
const NOTIF_SEND = 0xc0182101n; // _IOWR('!', 1, struct seccomp_notif_resp) (24 bytes)
const NOTIF_ID_VALID = 0x40082102n; // _IOW('!', 2, __u64)
const NOTIF_SET_FLAGS = 0x40082104n; // _IOW('!', 4, __u64): the flags are the argument itself
/** 6.6+: wake the daemon and the target on the CPU of the one that wakes it (no cross-CPU hop). */
const FD_SYNC_WAKE_UP = 1n;
const FLAG_CONTINUE = 1;

function addr(buf: Uint8Array | BigUint64Array): bigint {
  return BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(buf)));
}

/** The filter program: struct sock_filter[] (u16 code, u8 jt, u8 jf, u32 k). */
export function execFilterProgram(): Uint8Array {
  const sc = syscalls();
  if (!sc) throw new Error(`no seccomp filter for ${Deno.build.arch}`);
  const ins: [number, number, number, number][] = [];
  const deny = RET_ERRNO | LINUX.EACCES;
  ins.push([LD_W_ABS, 0, 0, OFF_ARCH]);
  // Foreign architecture (i386 through int 0x80, …): refuse every call.
  ins.push([JEQ_K, 1, 0, sc.auditArch]);
  ins.push([RET_K, 0, 0, deny]);
  ins.push([LD_W_ABS, 0, 0, OFF_NR]);
  if (Deno.build.arch === "x86_64") {
    ins.push([JGE_K, 0, 1, X32_BIT]);
    ins.push([RET_K, 0, 0, deny]);
  }
  ins.push([JEQ_K, 2, 0, sc.execve]);
  ins.push([JEQ_K, 1, 0, sc.execveat]);
  ins.push([RET_K, 0, 0, RET_ALLOW]);
  ins.push([RET_K, 0, 0, RET_USER_NOTIF]);
  const out = new Uint8Array(ins.length * 8);
  const v = new DataView(out.buffer);
  ins.forEach(([code, jt, jf, k], i) => {
    v.setUint16(i * 8, code, true);
    v.setUint8(i * 8 + 2, jt);
    v.setUint8(i * 8 + 3, jf);
    v.setUint32(i * 8 + 4, k >>> 0, true);
  });
  return out;
}

function seccomp(op: number, flags: number, arg: bigint): number {
  const sc = syscalls();
  if (!sc) return -LINUX.ENOSYS;
  const rc = Number(sys().syscall6(BigInt(sc.seccomp), BigInt(op), BigInt(flags), arg, 0n, 0n, 0n));
  return rc < 0 ? -errno() : rc;
}

/**
 * Installs the exec filter on the calling thread (no_new_privs must be set, or the caller has
 * CAP_SYS_ADMIN) and returns the listener fd (close-on-exec).
 */
export function installExecFilter(): { fd: number; killable: boolean } {
  const prog = execFilterProgram();
  const fprog = new Uint8Array(16); // struct sock_fprog { u16 len; (pad); sock_filter *filter; }
  const v = new DataView(fprog.buffer);
  v.setUint16(0, prog.length / 8, true);
  v.setBigUint64(8, addr(prog), true);
  let fd = seccomp(
    SECCOMP_SET_MODE_FILTER,
    FLAG_NEW_LISTENER | FLAG_WAIT_KILLABLE_RECV,
    addr(fprog),
  );
  let killable = true;
  if (fd === -LINUX.EINVAL) {
    killable = false;
    fd = seccomp(SECCOMP_SET_MODE_FILTER, FLAG_NEW_LISTENER, addr(fprog));
  }
  void prog;
  if (fd < 0) throw new SysError("seccomp(SET_MODE_FILTER)", -fd);
  return { fd, killable };
}

/** Whether this kernel supports user notification (the sizes query exists since 5.0). */
export function notifySupported(): boolean {
  const sizes = new Uint16Array(3);
  return seccomp(SECCOMP_GET_NOTIF_SIZES, 0, addr(new Uint8Array(sizes.buffer))) === 0 &&
    sizes[0]! >= 80;
}

/** One notification: who (pid in the daemon's namespace), which call and its raw arguments. */
export interface Notification {
  id: bigint;
  pid: number;
  nr: number;
  args: bigint[];
}

/** The daemon's end of one filter's listener fd. */
export class Listener {
  readonly fd: number;
  #buf = new Uint8Array(80);
  #view = new DataView(this.#buf.buffer);
  #resp = new Uint8Array(24);
  #respView = new DataView(this.#resp.buffer);
  #id = new BigUint64Array(1);

  constructor(fd: number) {
    this.fd = fd;
  }

  /** The next notification, or undefined when none is pending (or the target died). */
  recv(): Notification | undefined {
    this.#buf.fill(0); // the kernel refuses a non-zeroed buffer
    if (sys().ioctl(this.fd, NOTIF_RECV, this.#buf) !== 0) return undefined;
    const v = this.#view;
    const args: bigint[] = [];
    for (let i = 0; i < 6; i++) args.push(v.getBigUint64(32 + i * 8, true));
    return {
      id: v.getBigUint64(0, true),
      pid: v.getUint32(8, true),
      nr: v.getInt32(16, true),
      args,
    };
  }

  /**
   * Asks the kernel to hand each notification and its answer over on the waker's CPU
   * (`SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP`): the daemon's thread that waits in poll() runs where
   * the target just blocked, and the target where the answer was sent. False on kernels before
   * 6.6 (nothing changes then).
   */
  syncWakeUp(): boolean {
    return sys().ioctl_value(this.fd, NOTIF_SET_FLAGS, FD_SYNC_WAKE_UP) === 0;
  }

  /** True while the target is still blocked in the notified call. */
  valid(id: bigint): boolean {
    this.#id[0] = id;
    return sys().ioctl(this.fd, NOTIF_ID_VALID, new Uint8Array(this.#id.buffer)) === 0;
  }

  allow(id: bigint): boolean {
    return this.#send(id, 0, FLAG_CONTINUE);
  }

  deny(id: bigint, err: number = LINUX.EACCES): boolean {
    return this.#send(id, -err, 0);
  }

  #send(id: bigint, error: number, flags: number): boolean {
    const v = this.#respView;
    v.setBigUint64(0, id, true);
    v.setBigInt64(8, 0n, true);
    v.setInt32(16, error, true);
    v.setUint32(20, flags, true);
    // ENOENT: the target died or the call was interrupted meanwhile; nothing to answer.
    return sys().ioctl(this.fd, NOTIF_SEND, this.#resp) === 0;
  }
}
