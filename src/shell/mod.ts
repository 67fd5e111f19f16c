/**
 * Shell integration: the init scripts that make bash, zsh and POSIX sh print invisible command
 * boundary markers (with a per-session nonce), the parser that takes those markers out of the
 * byte stream, and the quoting that turns an agent's argv into one typed line. Owns no
 * processes: the engine spawns shells and feeds their bytes here.
 */
export {
  argvToScript,
  hasControlChars,
  isEnvName,
  quoteArgv,
  quoteWord,
  scopeScript,
  type ShellKind,
} from "./quote.ts";
export { type Marker, MarkerParser, MAX_MARKER_BYTES, type ParsedPiece } from "./markers.ts";
export {
  type LaunchOptions,
  type ShellLaunch,
  shellLaunch,
  STAGE_THRESHOLD,
  type TypedCommand,
  typedCommand,
} from "./integration.ts";
