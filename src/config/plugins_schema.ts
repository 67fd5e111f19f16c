/**
 * The config file's `plugins:` entries (trusted executables speaking MCP over stdio, supervised
 * by src/plugins) and its `adapters:` section (src/adapters), per docs/PLUGINS.md. One schema, one
 * type each.
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

const OptionPath = z.string().min(1).max(2048).regex(/^\/(?!\/)/, 'must start with one "/"');
const TargetName = z.string().regex(/^[a-z][a-z0-9_-]{0,31}$/);

/** One endpoint of the `http.request` adapter (`adapters.http[]`). */
export const HttpTargetConfig = z.strictObject({
  /** What agents name as `target`. */
  name: TargetName,
  /** `http(s)://host[:port]`: the one origin its requests may go to. */
  base_url: z.string().min(1).max(2048).regex(/^https?:\/\/[^/?#@\s]+\/?$/, {
    message: "must be http(s)://host[:port]",
  }),
  /** Sent with every request (e.g. Authorization from `${ENV}`); never stored or audited. */
  headers: z.record(
    z.string().regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}$/),
    z.string().max(8192),
  ).refine((h) => Object.keys(h).length <= 32, { message: "at most 32 headers" }).default({}),
  /** GET `path` (`{id}`, `{key}` substituted) expecting `status` proves a run's effect. */
  verify: z.strictObject({
    path: OptionPath.optional(),
    status: z.int().min(100).max(599).optional(),
  }).optional(),
  /** How a run interrupted by a crash is found again (e.g. `/tickets/by-key/{key}`). */
  reconcile: z.strictObject({ path: OptionPath }).optional(),
  /** How a run is undone; without it the target's runs are not reversible. */
  compensate: z.strictObject({ method: z.enum(["DELETE", "POST"]), path: OptionPath }).optional(),
  timeout_ms: z.int().min(100).max(600_000).default(30_000),
  /** What one request costs (any unit the operator's `cost` budgets count: cents, credits). */
  cost: z.number().finite().min(0).max(1e9).optional(),
});
export type HttpTargetConfig = z.infer<typeof HttpTargetConfig>;

/** `adapters:` — the typed adapters this daemon offers (docs/PLUGINS.md "Adapters"). */
export const AdaptersConfig = z.strictObject({
  /** `file.patch`: unified diffs applied under these directories only; absent: not offered. */
  file_patch: z.strictObject({
    roots: z.array(z.string().min(2).max(4096).regex(/^\//, "must be absolute")).min(1).max(32),
  }).optional(),
  /** `http.request`: its named endpoints; empty: not offered. */
  http: z.array(HttpTargetConfig).max(32).default([]),
}).superRefine((a, ctx) => {
  const seen = new Set<string>();
  a.http.forEach((t, i) => {
    if (seen.has(t.name)) {
      ctx.addIssue({
        code: "custom",
        path: ["http", i, "name"],
        message: `http target "${t.name}" is declared twice`,
      });
    }
    seen.add(t.name);
  });
});
export type AdaptersConfig = z.infer<typeof AdaptersConfig>;
