/**
 * Every bound the plugin host enforces. The operator's entry (`PluginConfig`, the config file's
 * `plugins:` list) is src/config's, re-exported here for the host's callers.
 */
export {
  DEFAULT_CALLS_PER_MINUTE,
  DEFAULT_TIMEOUT_MS,
  MAX_PLUGINS,
  PluginConfig,
} from "../config/mod.ts";

/** Most tools kept from one plugin; the rest are dropped with a warning naming the count. */
export const MAX_TOOLS_PER_PLUGIN = 64;
/** Longest tool name a plugin may declare (the qualified name adds `<plugin>.`). */
export const MAX_TOOL_NAME = 64;
/** What a plugin's tool name must look like; others are dropped with a warning. */
export const TOOL_NAME_PATTERN: RegExp = /^[A-Za-z0-9_-]{1,64}$/;
/** Longest tool description shown to agents, in characters; longer ones are cut. */
export const MAX_DESCRIPTION = 2048;
/** Most bytes of one tool's `inputSchema` + `outputSchema` as JSON; bigger tools are dropped. */
export const MAX_SCHEMA_BYTES = 65536;
/** Longest JSON-RPC line accepted from a plugin; a longer one is a protocol error (restart). */
export const MAX_MESSAGE_BYTES: number = 4 * 1024 * 1024;
/** Largest tool result (as JSON) passed on to agents; a bigger one is `PLUGIN_BAD_RESULT`. */
export const MAX_RESULT_BYTES: number = 1024 * 1024;
/** Bytes of the plugin's stderr kept (the last ones, a ring) for diagnostics. */
export const MAX_STDERR_KEPT: number = 16 * 1024;
/**
 * Most bytes written to a plugin's stdin and not yet taken by it; past this, sends fail (a
 * plugin that stops reading its stdin cannot make the daemon buffer without end).
 */
export const MAX_PENDING_WRITE_BYTES: number = 8 * 1024 * 1024;
/** Most `tools/list` pages followed (a plugin that always answers `nextCursor` ends here). */
export const MAX_LIST_PAGES = 64;
/** Longest plugin-supplied error text (JSON-RPC error, stderr line) quoted in our errors. */
export const MAX_PLUGIN_TEXT = 512;
