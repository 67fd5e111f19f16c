/**
 * Out-of-process MCP plugins (src/plugins): operator-declared executables speaking MCP over
 * stdio, whose tools agents see as `<plugin>.<tool>`. Owns the plugin's process, its transport,
 * its tool list, the bounds on what it sends and its supervision (restart with back-off). Does
 * not own policy, audit or exposing the tools to agents: the MCP edge and control decide who
 * may call a plugin tool, and call `PluginHost.call` once they have. Plugins are not a
 * sandbox: they run as the daemon's user.
 */
export {
  BACKOFF_INITIAL_MS,
  BACKOFF_MAX_MS,
  BACKOFF_RESET_MS,
  type PluginCallOptions,
  type PluginCallResult,
  PluginHost,
  type PluginHostOptions,
  type PluginState,
  type PluginStatus,
  type PluginTool,
} from "./host.ts";
export {
  KILL_GRACE_MS,
  StdioPluginTransport,
  type StdioPluginTransportOptions,
} from "./transport.ts";
export {
  DEFAULT_CALLS_PER_MINUTE,
  DEFAULT_TIMEOUT_MS,
  MAX_DESCRIPTION,
  MAX_LIST_PAGES,
  MAX_MESSAGE_BYTES,
  MAX_PENDING_WRITE_BYTES,
  MAX_PLUGIN_TEXT,
  MAX_PLUGINS,
  MAX_RESULT_BYTES,
  MAX_SCHEMA_BYTES,
  MAX_STDERR_KEPT,
  MAX_TOOL_NAME,
  MAX_TOOLS_PER_PLUGIN,
  PluginConfig,
  TOOL_NAME_PATTERN,
} from "./schema.ts";
