/**
 * The config file's `plugins:` entries (docs/PLUGINS.md): trusted executables speaking MCP over
 * stdio, supervised by src/plugins. One schema, one type.
 */
import { z } from "zod";

/** Most plugins one daemon runs (each is a process with its own MCP connection). */
export const MAX_PLUGINS = 16;
/** Time a plugin gets for each request (initialize included) unless its entry says otherwise. */
export const DEFAULT_TIMEOUT_MS = 30_000;
/** Tool calls a plugin gets per sliding minute unless its entry says otherwise. */
export const DEFAULT_CALLS_PER_MINUTE = 600;

/** A plugin as the operator declares it: a trusted executable speaking MCP over stdio. */
export const PluginConfig = z.strictObject({
  /** Prefix of its tools as agents see them: `<name>.<tool>`. */
  name: z.string().regex(/^[a-z][a-z0-9_-]{0,31}$/),
  /** The executable (looked up on the PATH it is given). */
  command: z.string().min(1).max(4096),
  args: z.array(z.string().max(4096)).max(64).default([]),
  /**
   * The plugin's whole environment, besides `PATH` and `HOME` (taken from the daemon's unless
   * set here). Nothing else of the daemon's environment is passed on.
   */
  env: z.record(
    z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/),
    z.string().max(8192),
  ).refine((env) => Object.keys(env).length <= 64, { message: "at most 64 variables" })
    .default({}),
  /** Deadline of each request to the plugin, initialize and tools/list included. */
  timeout_ms: z.int().min(100).max(600_000).default(DEFAULT_TIMEOUT_MS),
  /** Tool calls admitted per sliding minute; more are refused with `QUOTA_EXCEEDED` (retriable). */
  calls_per_minute: z.int().min(1).max(6000).default(DEFAULT_CALLS_PER_MINUTE),
});
export type PluginConfig = z.infer<typeof PluginConfig>;
