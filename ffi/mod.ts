/**
 * Native symbol tables and the lazy opener. Data and loading only: no logic lives here; the
 * PTY layer (src/pty) owns every handle it gets from these calls.
 */
import { LIBC_LINUX, LINUX, SIGNALS, SYSCALLS, syscalls } from "./libc_linux.ts";

export { LIBC_LINUX, LINUX, SIGNALS, SYSCALLS, syscalls };

export type Libc = Deno.DynamicLibrary<typeof LIBC_LINUX>["symbols"];

let lib: Deno.DynamicLibrary<typeof LIBC_LINUX> | undefined;

/** Opens libc once, on first use (never at import time). Linux/glibc only for now. */
export function openLibc(): Libc {
  if (lib) return lib.symbols;
  if (Deno.build.os !== "linux") {
    throw new Error(`PTY support is not implemented on ${Deno.build.os} yet`);
  }
  lib = Deno.dlopen("libc.so.6", LIBC_LINUX);
  return lib.symbols;
}
