/** The lazy opener of libc (never at import time). Linux/glibc only for now. */
import { LIBC_LINUX } from "./libc_linux.ts";

export type Libc = Deno.DynamicLibrary<typeof LIBC_LINUX>["symbols"];

let lib: Deno.DynamicLibrary<typeof LIBC_LINUX> | undefined;

/** Opens libc once, on first use. */
export function openLibc(): Libc {
  if (lib) return lib.symbols;
  if (Deno.build.os !== "linux") {
    throw new Error(`PTY support is not implemented on ${Deno.build.os} yet`);
  }
  lib = Deno.dlopen("libc.so.6", LIBC_LINUX);
  return lib.symbols;
}
