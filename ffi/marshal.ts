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
