/**
 * Thin helpers over the libc symbols: the single place where `-1`/errno becomes a typed error,
 * C string and pointer-array marshalling. Here (not in src/pty) so the session launcher can use
 * them without loading anything else: it starts in the time a `deno run` takes.
 */
import { type Libc, openLibc } from "./open.ts";

const encoder = new TextEncoder();
const decoder = new TextDecoder();

let libc: Libc | undefined;
/** libc, opened on first use. */
export function sys(): Libc {
  return libc ??= openLibc();
}

/**
 * Opens libc now. Tests call it at module level so the library handle (kept for the process
 * lifetime) is not reported as a leak of whichever test happened to open it first.
 */
export function preloadNative(): void {
  sys();
}

/** A failed system call: `syscall` and the C `errno`. */
export class SysError extends Error {
  readonly errno: number;
  readonly syscall: string;
  constructor(syscall: string, errno: number) {
    super(`${syscall} failed: ${strerror(errno)} (errno ${errno})`);
    this.name = "SysError";
    this.syscall = syscall;
    this.errno = errno;
  }
}

/** errno of the last synchronous call on this thread. */
export function errno(): number {
  const p = sys().__errno_location();
  if (p === null) return 0;
  return new Deno.UnsafePointerView(p).getInt32();
}

function strerror(code: number): string {
  const p = sys().strerror(code);
  return p === null ? "unknown error" : Deno.UnsafePointerView.getCString(p);
}

/** Throws SysError when a call returned -1 (errno style). */
export function check(result: number | bigint, syscall: string): number {
  const n = Number(result);
  if (n === -1) throw new SysError(syscall, errno());
  return n;
}

/** Throws SysError when a call returned a non-zero error number (posix_spawn style). */
export function checkRc(rc: number, syscall: string): void {
  if (rc !== 0) throw new SysError(syscall, rc);
}

/** NUL-terminated bytes of a string; rejects embedded NULs (they would silently truncate). */
export function cstr(s: string, what = "string"): Uint8Array<ArrayBuffer> {
  if (s.includes("\0")) throw new TypeError(`${what} contains a NUL byte`);
  const bytes = encoder.encode(s);
  const out = new Uint8Array(bytes.length + 1);
  out.set(bytes);
  return out;
}

/**
 * `cstr` into the caller's scratch buffer, allocating nothing (a string too long for it gets a
 * new buffer). The result is only valid until the caller reuses its buffer.
 */
export function cstrInto(
  s: string,
  buf: Uint8Array<ArrayBuffer>,
  what = "string",
): Uint8Array<ArrayBuffer> {
  if (s.includes("\0")) throw new TypeError(`${what} contains a NUL byte`);
  // A UTF-16 code unit is at most 3 bytes of UTF-8: then it fits, with the NUL.
  if (s.length * 3 >= buf.length) return cstr(s, what);
  const { written } = encoder.encodeInto(s, buf);
  buf[written] = 0;
  return buf;
}

/**
 * A `char *const[]` array for exec: the returned `keep` array must stay referenced until the
 * call returns (it owns the strings the pointers point into).
 */
export function cstrArray(
  items: readonly string[],
  what: string,
): { ptrs: BigUint64Array<ArrayBuffer>; keep: Uint8Array[] } {
  const keep = items.map((s) => cstr(s, what));
  const ptrs = new BigUint64Array(items.length + 1);
  keep.forEach((b, i) => {
    ptrs[i] = BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(b)));
  });
  return { ptrs, keep };
}

export function decodeCString(buf: Uint8Array): string {
  const end = buf.indexOf(0);
  return decoder.decode(end === -1 ? buf : buf.subarray(0, end));
}

/** What `stat` says of a file (the fields Termada reads). */
export interface FileStat {
  dev: bigint;
  ino: bigint;
  /** st_mode: type (`& S_IFMT`) and permission bits. */
  mode: number;
  uid: number;
  gid: number;
  size: number;
  /** st_mtim and st_ctim as "seconds.nanoseconds" (exact, for cache keys). */
  mtime: string;
  ctime: string;
}

export const S_IFMT = 0o170000;
export const S_IFREG = 0o100000;
export const S_IFDIR = 0o040000;
export const S_IFLNK = 0o120000;

/**
 * struct stat offsets (glibc): dev, ino, size and the times sit alike on x86_64 and aarch64;
 * mode, uid and gid do not (x86_64 has a 64-bit st_nlink before st_mode).
 */
const STAT = Deno.build.arch === "aarch64"
  ? { mode: 16, uid: 24, gid: 28 }
  : { mode: 24, uid: 28, gid: 32 };
/**
 * Where the fields Termada reads sit in struct stat (glibc), for callers that `stat` into their
 * own buffer (the exec gate's identity cache compares raw bytes, allocating nothing).
 */
export const STAT_LAYOUT = {
  /** A buffer of this size holds a struct stat on both architectures. */
  size: 256,
  dev: 0,
  ino: 8,
  mode: STAT.mode,
  uid: STAT.uid,
  gid: STAT.gid,
  st_size: 48,
  mtime: 88,
  ctime: 104,
} as const;
const statBuf = new Uint8Array(STAT_LAYOUT.size); // ≥ sizeof(struct stat) on both architectures
const statView = new DataView(statBuf.buffer);

function readStat(): FileStat {
  const v = statView;
  return {
    dev: v.getBigUint64(0, true),
    ino: v.getBigUint64(8, true),
    mode: v.getUint32(STAT.mode, true),
    uid: v.getUint32(STAT.uid, true),
    gid: v.getUint32(STAT.gid, true),
    size: Number(v.getBigInt64(48, true)),
    mtime: `${v.getBigInt64(88, true)}.${v.getBigInt64(96, true)}`,
    ctime: `${v.getBigInt64(104, true)}.${v.getBigInt64(112, true)}`,
  };
}

/** `stat(2)` (following symlinks), or undefined with errno set. */
export function statPath(path: string | Uint8Array): FileStat | undefined {
  return statWith("stat", path);
}

/** `lstat(2)` (a symlink is described itself), or undefined with errno set. */
export function lstatPath(path: string | Uint8Array): FileStat | undefined {
  return statWith("lstat", path);
}

function statWith(call: "stat" | "lstat", path: string | Uint8Array): FileStat | undefined {
  let p: Uint8Array;
  try {
    p = typeof path === "string" ? cstr(path) : path;
  } catch {
    return undefined; // a NUL in the path names no file
  }
  return sys()[call](p, statBuf) === 0 ? readStat() : undefined;
}

/** `fstat(2)` of an open fd, or undefined with errno set. */
export function statFd(fd: number): FileStat | undefined {
  return sys().fstat(fd, statBuf) === 0 ? readStat() : undefined;
}
