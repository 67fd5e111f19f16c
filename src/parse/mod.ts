/**
 * Typed results: pure parsers that turn the text output of common commands (ls -l, ps, df,
 * du, free, curl -I, git status/log, ip -j, ss, systemctl status, docker ps) into JSON with a
 * JSON Schema per result, so `exec_run`/`exec_poll` can return `parsed` beside the output.
 * This folder owns the parsers, their bounds, the `auto` choice by argv and the result
 * schemas. It does not run commands, set their environment (it only says which one is needed:
 * `parserEnv`), read files or know about jobs and sessions: callers pass the argv and the
 * output text. Nothing here throws on any input.
 */
export {
  C_LOCALE,
  chooseParser,
  commandArgv,
  type ParseOptions,
  parseOutput,
  PARSER_NAMES,
  type ParserChoice,
  parserEnv,
  type ParserInfo,
  PARSERS,
  splitShellLine,
} from "./registry.ts";
export { PARSE_LIMITS } from "./_text.ts";
export {
  ContainerEntry,
  ContainerList,
  DirectoryEntry,
  DirectoryListing,
  DirectorySection,
  DiskUsage,
  DiskUsageEntry,
  FilesystemEntry,
  FilesystemList,
  GitBranch,
  GitCommit,
  GitLog,
  GitStatus,
  GitStatusEntry,
  HttpResponseHeader,
  HttpResponses,
  IpAddrInfo,
  IpAddrList,
  IpInterface,
  IpLinkList,
  IpRoute,
  IpRouteList,
  JournalLine,
  jsonSchemaOf,
  MemoryRow,
  MemoryUsage,
  ParsedOutput,
  ParseError,
  ParseFailed,
  ParseResult,
  ParseSuccess,
  ParseWarning,
  ProcessEntry,
  ProcessList,
  SocketAddress,
  SocketEntry,
  SocketList,
  SocketProcess,
  UnitStatus,
  UnitStatusList,
} from "./schema.ts";
