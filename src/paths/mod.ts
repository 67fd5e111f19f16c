/**
 * Where Termada keeps its files: pure path arithmetic from the environment (XDG base
 * directories, `TERMADA_HOME` — empty means unset —, `--config`, the socket fallbacks for long
 * paths) and the making of private (0700) directories. Reads no config and loads no schema, so a
 * client (the stdio shim) finds the daemon's sockets without paying for either.
 */
export {
  ensurePrivateDir,
  ensureSharedDir,
  ensureStateDirs,
  MAX_SOCKET_PATH_BYTES,
  mcpSocketBeside,
  resolvePaths,
  type ResolvePathsOptions,
  runAsSessionsDir,
  type TermadaPaths,
} from "./paths.ts";
