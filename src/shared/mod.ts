/**
 * Shared building blocks used by every layer: typed errors with wire codes, the stderr logger,
 * random ids, the clock and byte helpers. Depends on nothing else in the project.
 */
export {
  ERROR_CODES,
  type ErrorBody,
  type ErrorCode,
  type ErrorDetails,
  invalidArgument,
  notFound,
  TermadaError,
  type TermadaErrorOptions,
  toTermadaError,
} from "./errors.ts";
export { type Logger, logger, type LogLevel, setLogFile, setLogLevel } from "./log.ts";
export { type IdKind, idPattern, isId, newId, randomHex } from "./ids.ts";
export { bearerToken, MAX_TOKEN_LENGTH, sameSecret } from "./secrets.ts";
export { type Clock, systemClock } from "./clock.ts";
export { ACTION_KINDS, type ActionKind } from "./actions.ts";
export { checkJson } from "./json.ts";
export { delay, soon, within } from "./async.ts";
export { runtimeGc } from "./gc.ts";
export { concatBytes, decodeBase64, encodeBase64 } from "./bytes.ts";
export { type AtomicWriteOptions, syncDir, writeAll, writeFileAtomic } from "./files.ts";
export { type BusEvent, type BusReplay, EventBus } from "./bus.ts";
export { seededRandom } from "./prng.ts";
export { execNames, wordsStartWith } from "./exec_names.ts";
export {
  compileRegex,
  type CompileRegexOptions,
  type LinearRegex,
  REGEX_LIMITS,
  type RegexMatch,
} from "./regex.ts";
