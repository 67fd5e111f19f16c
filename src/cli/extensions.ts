/**
 * `termada plugins` and `termada adapters`: read-only views of the daemon's extensions — the
 * config's MCP plugins (`/api/plugins`; docs/PLUGINS.md) and every agent's adapter runs
 * (`/api/adapters`) — through the operator API over the Unix socket, like the other operator
 * commands (src/cli/operator.ts owns the request path and the "No Termada daemon is running"
 * error). This file only parses the command line and prints; the formatters are pure.
 */
import type { OperatorAdapterList, OperatorPluginList } from "../wire/mod.ts";
import { TermadaError } from "../shared/mod.ts";
import { type Options, strictArgs, table } from "./_args.ts";
import { fit } from "./_tui.ts";
import { call, type OperatorContext, paths } from "./operator.ts";

/** `--limit` of `termada adapters`: the bounds the daemon's run store lists within. */
export const ADAPTERS_LIMIT = { min: 1, max: 500, default: 50 } as const;

/** Lines are cut to this width when stdout is not a terminal. */
const PLAIN_WIDTH = 100;

const COMMON = {
  config: { type: "string" },
  json: { type: "boolean" },
  help: { type: "boolean", short: "h" },
} as const satisfies Options;

const USAGE = {
  plugins: `Usage: termada plugins [--json] [--config FILE]
  The config's MCP plugins: state, restarts, the tools each offers agents, and the last
  error of one that is not ready (docs/PLUGINS.md).
`,
  adapters: `Usage: termada adapters [--limit N] [--json] [--config FILE]
  The adapters this daemon offers, then every agent's adapter runs, oldest first (at most N,
  ${ADAPTERS_LIMIT.min} to ${ADAPTERS_LIMIT.max}, default ${ADAPTERS_LIMIT.default}): phase, what each changed, its error code.
`,
} as const;

const json = (v: unknown) => JSON.stringify(v, null, 2) + "\n";

/** Each line at most `width` cells (control characters shown as spaces, a cut one ends in "…"). */
function cut(text: string, width: number): string {
  return text.split("\n").map((l) => (l === "" ? l : fit(l, width).trimEnd())).join("\n");
}

/**
 * The plugins as a table, each line at most `width` cells. The last column, the one cut, is the
 * tool names — or first the last error of a plugin that is not ready, which matters more then.
 */
export function formatPlugins(list: OperatorPluginList, width: number = PLAIN_WIDTH): string {
  if (list.plugins.length === 0) return "No plugins configured.\n";
  return cut(
    table(
      ["NAME", "STATE", "RESTARTS", "TOOLS", "DETAIL"],
      list.plugins.map((p) => {
        const names = p.tools.join(", ");
        const error = p.state !== "ready" && p.last_error
          ? `last error: ${p.last_error.replace(/\s+/g, " ")}`
          : "";
        return [
          p.name,
          p.state,
          String(p.restarts),
          String(p.tools.length),
          (error && names ? `${error}; tools: ${names}` : error || names) || "-",
        ];
      }),
    ),
    width,
  );
}

/**
 * The adapters offered, then the runs as a table, each line at most `width` cells (the summary,
 * last, is what is cut; the error code stays in view).
 */
export function formatAdapters(list: OperatorAdapterList, width: number = PLAIN_WIDTH): string {
  const offered = `Adapters offered: ${list.adapters.join(", ") || "none"}\n`;
  if (list.runs.length === 0) return cut(offered, width) + "No adapter runs.\n";
  return cut(
    offered + table(
      ["RUN", "AGENT", "ADAPTER", "PHASE", "ERROR", "SUMMARY"],
      list.runs.map((r, i) => [
        r.run_id,
        list.agents?.[i] ?? "-",
        r.adapter,
        r.verified && r.phase !== "verified" ? `${r.phase} (verified)` : r.phase,
        r.error?.code ?? "-",
        r.summary.replace(/\s+/g, " "),
      ]),
    ),
    width,
  );
}

/** The width output is cut to: the terminal's, else PLAIN_WIDTH. */
function outputWidth(): number {
  if (!Deno.stdout.isTerminal()) return PLAIN_WIDTH;
  try {
    return Deno.consoleSize().columns;
  } catch {
    return PLAIN_WIDTH; // stdout stopped being a terminal: the plain width
  }
}

/** `--limit N`, N within ADAPTERS_LIMIT; anything else is INVALID_ARGUMENT (exit 2). */
function limitOf(raw: string | undefined): number {
  if (raw === undefined) return ADAPTERS_LIMIT.default;
  const n = Number(raw);
  if (!/^\d+$/.test(raw) || n < ADAPTERS_LIMIT.min || n > ADAPTERS_LIMIT.max) {
    throw new TermadaError(
      "INVALID_ARGUMENT",
      `"--limit" must be ${ADAPTERS_LIMIT.min} to ${ADAPTERS_LIMIT.max}, not "${raw}"`,
    );
  }
  return n;
}

/**
 * `termada plugins [--json]`: resolves with the exit code; bad usage throws INVALID_ARGUMENT
 * (exit 2), a daemon that is not running SERVER_UNREACHABLE.
 */
export async function pluginsCommand(args: string[], ctx: OperatorContext): Promise<number> {
  const { values } = strictArgs("plugins", args, COMMON, 0);
  if (values.help) return await out(ctx, USAGE.plugins);
  const r = await call(
    await paths(values.config),
    "GET",
    "/plugins",
  ) as unknown as OperatorPluginList;
  return await out(ctx, values.json ? json(r.plugins) : formatPlugins(r, outputWidth()));
}

/**
 * `termada adapters [--limit N] [--json]`: resolves with the exit code; bad usage throws
 * INVALID_ARGUMENT (exit 2), a daemon that is not running SERVER_UNREACHABLE.
 */
export async function adaptersCommand(args: string[], ctx: OperatorContext): Promise<number> {
  const { values } = strictArgs("adapters", args, { ...COMMON, limit: { type: "string" } }, 0);
  if (values.help) return await out(ctx, USAGE.adapters);
  const limit = limitOf(values.limit);
  const r = await call(
    await paths(values.config),
    "GET",
    `/adapters?limit=${limit}`,
  ) as unknown as OperatorAdapterList;
  return await out(ctx, values.json ? json(r) : formatAdapters(r, outputWidth()));
}

async function out(ctx: OperatorContext, text: string): Promise<number> {
  await ctx.out(text);
  return 0;
}
