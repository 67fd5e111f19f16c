/**
 * Plugin tools as the edges call them (docs/PLUGINS.md): the plugins the config declares, each
 * supervised by its own PluginHost (src/plugins), and every call an agent makes to one of their
 * tools passed through the one gateway — typed action `plugin`, resource `<plugin>.<tool>`
 * (policy `plugins:` rules, structured rules on `action: plugin`, budgets, approvals) — with its
 * intent durable in the audit log before the plugin sees it and its outcome recorded after.
 * The arguments are in the audit only as a bounded summary, passed through the daemon-wide
 * redaction (vault values and configured secrets are masked by the audit log).
 */
import {
  type PluginCallResult,
  type PluginConfig,
  PluginHost,
  type PluginTool,
} from "../plugins/mod.ts";
import { logger, TermadaError, toTermadaError } from "../shared/mod.ts";
import type { PluginInfo } from "../wire/mod.ts";
import type { ApprovalBook } from "./approvals.ts";
import type { Gateway } from "./gateway.ts";

const log = logger("plugins");

/** Largest arguments object sent to a plugin (JSON bytes). */
export const MAX_PLUGIN_ARGS_BYTES = 256 * 1024;
/** The arguments' share of the audit record and the approval queue's summary (characters). */
export const PLUGIN_ARGS_SUMMARY_CHARS = 2048;

export interface PluginOpsOptions {
  gateway: Gateway;
  approvals: ApprovalBook;
  /**
   * Masks secrets (vault values, built-in and configured patterns) in what a plugin answers, as
   * in every output agents read; absent: results pass as they came.
   */
  redact?: (text: string) => string;
  /** Version the daemon reports to plugins (clientInfo). */
  version?: string;
}

/** A config entry's identity: a change in any field restarts the plugin. */
const fingerprint = (c: PluginConfig) => JSON.stringify(c);

export class PluginOps implements AsyncDisposable {
  readonly #o: PluginOpsOptions;
  readonly #hosts = new Map<
    string,
    { host: PluginHost; config: PluginConfig; print: string; off: () => void }
  >();
  readonly #listeners = new Set<() => void>();
  #closed = false;

  constructor(o: PluginOpsOptions) {
    this.#o = o;
  }

  /**
   * Makes the running plugins those of `configs` (start, config reload): removed or changed
   * ones are closed, new ones started. Starting never waits for a plugin to be ready (a slow or
   * broken plugin only shows in its status) and never throws.
   */
  async configure(configs: readonly PluginConfig[]): Promise<void> {
    if (this.#closed) return;
    const wanted = new Map(configs.map((c) => [c.name, c]));
    const closing: Promise<void>[] = [];
    for (const [name, h] of this.#hosts) {
      const next = wanted.get(name);
      if (next && fingerprint(next) === h.print) continue;
      h.off();
      this.#hosts.delete(name);
      closing.push(h.host.close());
    }
    await Promise.all(closing);
    for (const c of configs) {
      if (this.#hosts.has(c.name)) continue;
      const host = new PluginHost(c, this.#o.version ? { clientVersion: this.#o.version } : {});
      const off = host.onChange(() => this.#changed());
      this.#hosts.set(c.name, { host, config: c, print: fingerprint(c), off });
      void host.start().catch((err) =>
        log.warn("plugin did not start", { plugin: c.name, error: err })
      );
    }
    if (closing.length > 0 || configs.length > 0) this.#changed();
  }

  /** Every plugin tool agents can see now (plugins restarting keep their last list). */
  tools(): PluginTool[] {
    return [...this.#hosts.values()].flatMap((h) => h.host.tools());
  }

  /** The plugins and their state (operator API, CLI, doctor). */
  list(): PluginInfo[] {
    return [...this.#hosts.values()].map(({ host, config }) => {
      const s = host.status();
      return {
        name: host.name,
        command: config.command,
        state: s.state,
        restarts: s.restarts,
        tools: host.tools().map((t) => t.name),
        ...(s.last_error ? { last_error: s.last_error } : {}),
        ...(s.pid !== undefined ? { pid: s.pid } : {}),
      };
    });
  }

  /** Called when the set of plugin tools may have changed (tools/list_changed). */
  onChange(cb: () => void): () => void {
    this.#listeners.add(cb);
    return () => this.#listeners.delete(cb);
  }

  /** How many MCP servers listen for tool changes (one per open MCP connection; tests). */
  get listeners(): number {
    return this.#listeners.size;
  }

  /** Whether `name` is a plugin tool's name (`<plugin>.<tool>` of a configured plugin). */
  owns(name: string): boolean {
    const dot = name.indexOf(".");
    return dot > 0 && this.#hosts.has(name.slice(0, dot));
  }

  /**
   * An agent calls `<plugin>.<tool>`: decided by the gateway (deny, confirm → a person decides
   * and the call waits, budgets), its intent durable before the plugin gets it, its outcome
   * recorded. Throws TermadaError (NOT_FOUND, DENIED_BY_POLICY, PLUGIN_*, …).
   */
  async call(
    owner: string,
    name: string,
    args: Record<string, unknown>,
    options: { signal?: AbortSignal } = {},
  ): Promise<PluginCallResult> {
    const dot = name.indexOf(".");
    const entry = dot > 0 ? this.#hosts.get(name.slice(0, dot)) : undefined;
    const tool = name.slice(dot + 1);
    if (!entry || !entry.host.tools().some((t) => t.tool === tool)) {
      throw new TermadaError("NOT_FOUND", `No plugin tool "${name}"`, {
        hint: entry
          ? `Plugin "${entry.host.name}" has: ${
            entry.host.tools().map((t) => t.name).join(", ") || "no tools right now"
          }`
          : "List the tools again (tools/list): plugins come from the daemon's config",
      });
    }
    const json = JSON.stringify(args);
    if (new TextEncoder().encode(json).length > MAX_PLUGIN_ARGS_BYTES) {
      throw new TermadaError(
        "INVALID_ARGUMENT",
        `Cannot call "${name}": its arguments are over ${MAX_PLUGIN_ARGS_BYTES} bytes`,
      );
    }
    const summary = json.length > PLUGIN_ARGS_SUMMARY_CHARS
      ? `${json.slice(0, PLUGIN_ARGS_SUMMARY_CHARS)}… (${json.length} characters)`
      : json;
    const action = await this.#o.gateway.admitAction(
      {
        owner,
        kind: "plugin",
        subjects: [{ kind: "plugin", tool: name }],
        summary: [name, summary],
      },
      (a, c) => this.#o.approvals.askAction(a, c),
    );
    try {
      const result = this.#masked(await entry.host.call(tool, args, options));
      this.#o.gateway.actionDone(action, {
        ok: result.isError !== true,
        facts: {
          tool: name,
          is_error: result.isError === true,
          content_blocks: result.content.length,
          structured: result.structuredContent !== undefined,
        },
      });
      return result;
    } catch (err) {
      const e = toTermadaError(err);
      this.#o.gateway.actionDone(action, { ok: false, error: e.message, facts: { code: e.code } });
      throw e;
    }
  }

  /**
   * The result with secrets masked: text blocks and every string of `structuredContent` (a
   * masked string still has its type, so an output schema of types holds; an `enum` or
   * `pattern` a secret matched would not, and then the masked value wins).
   */
  #masked(r: PluginCallResult): PluginCallResult {
    const redact = this.#o.redact;
    if (!redact) return r;
    const deep = (v: unknown): unknown =>
      typeof v === "string"
        ? redact(v)
        : Array.isArray(v)
        ? v.map(deep)
        : v !== null && typeof v === "object"
        ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, deep(x)]))
        : v;
    return {
      ...r,
      content: r.content.map((b) => b.type === "text" ? { ...b, text: redact(b.text) } : b),
      ...(r.structuredContent !== undefined
        ? { structuredContent: deep(r.structuredContent) as Record<string, unknown> }
        : {}),
    };
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const all = [...this.#hosts.values()];
    this.#hosts.clear();
    for (const h of all) h.off();
    await Promise.all(all.map((h) => h.host.close()));
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  #changed(): void {
    for (const cb of this.#listeners) {
      try {
        cb();
      } catch (err) {
        log.warn("a plugin tool listener failed", { error: err });
      }
    }
  }
}
