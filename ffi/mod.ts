/**
 * Native symbol tables, the lazy opener, and the marshalling helpers (C strings, pointer
 * arrays, errno → SysError). No other logic lives here: src/pty owns the PTYs, src/sandbox the
 * kernel boundary. Imports nothing outside ffi/, so the session launcher loads only this.
 */
export { LIBC_LINUX, LINUX, SIGNALS, SYSCALLS, syscalls } from "./libc_linux.ts";
export { type Libc, openLibc } from "./open.ts";
export {
  check,
  checkRc,
  cstr,
  cstrArray,
  cstrInto,
  decodeCString,
  errno,
  type FileStat,
  lstatPath,
  preloadNative,
  S_IFDIR,
  S_IFLNK,
  S_IFMT,
  S_IFREG,
  STAT_LAYOUT,
  statFd,
  statPath,
  sys,
  SysError,
} from "./marshal.ts";
