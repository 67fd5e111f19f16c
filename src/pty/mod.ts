/**
 * Pseudo-terminals: spawn a program on a fresh PTY (posix_spawn over FFI), stream its bytes,
 * write input, resize, signal its groups, and tear it down without leaking fds or processes.
 * One shared Poller does all PTY I/O. Also owns the libc-based /proc readers used to tell
 * whether a terminal's foreground process is waiting for input. Knows nothing about shells.
 */
export {
  type ExitStatus,
  killTree,
  MAX_QUEUED_INPUT,
  Pty,
  type PtySpawnOptions,
  SIGNAL_NUMBERS,
  signalGroup,
  type SignalName,
  snapshotTree,
  type TreeProcess,
} from "./pty.ts";
export { Poller, type PollHandler, sharedPoller } from "./poller.ts";
export {
  allPids,
  childrenOf,
  countOpenFds,
  currentSyscall,
  descendantsOf,
  numericEntries,
  pidsInSession,
  type ProcStat,
  procStat,
  readLink,
  readProcFile,
} from "./procfs.ts";
export { preloadNative, SysError } from "../../ffi/mod.ts";
