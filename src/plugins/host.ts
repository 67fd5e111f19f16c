/**
 * One plugin, supervised: its process, its MCP client, its tool list and its calls. The host
 * keeps the plugin's failures inside it — a crash, a hang or bad output becomes a typed error
 * on the calls concerned and a restart with back-off, never a stall of the daemon.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv-provider.js";
import type { JsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/types.js";
import {
  CallToolResultSchema,
  type ContentBlock,
  ErrorCode as McpErrorCode,
  McpError,
  ToolListChangedNotificationSchema,
  ToolSchema,
} from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { delay, logger, TermadaError } from "../shared/mod.ts";
import {
  MAX_DESCRIPTION,
  MAX_LIST_PAGES,
  MAX_PLUGIN_TEXT,
  MAX_RESULT_BYTES,
  MAX_SCHEMA_BYTES,
  MAX_TOOLS_PER_PLUGIN,
  type PluginConfig,
  TOOL_NAME_PATTERN,
} from "./schema.ts";
import { StdioPluginTransport } from "./transport.ts";

/** First wait before a restart; doubles after each failure up to `BACKOFF_MAX_MS`. */
export const BACKOFF_INITIAL_MS = 500;
/** Longest wait between restarts. */
export const BACKOFF_MAX_MS = 30_000;
/** A plugin that stayed up this long restarts after `BACKOFF_INITIAL_MS` again. */
export const BACKOFF_RESET_MS = 60_000;
/** Window of `calls_per_minute`. */
const RATE_WINDOW_MS = 60_000;
/** Most warnings logged per plugin per minute (a chatty plugin cannot flood the log). */
const MAX_WARNINGS_PER_MINUTE = 20;

const log = logger("plugins");
const encoder = new TextEncoder();

export type PluginState = "starting" | "ready" | "restarting" | "stopped" | "failed";

export interface PluginStatus {
  state: PluginState;
  /** Processes started after the first one. */
  restarts: number;
  /** Why the last process ended or failed to start (with its last stderr line). */
  last_error?: string;
  /** The running process, if any. */
  pid?: number;
}

/** A tool of a plugin as agents see it. */
export interface PluginTool {
  /** `<plugin>.<tool>`: what agents call. */
  name: string;
  plugin: string;
  /** The plugin's own name for it. */
  tool: string;
  /** At most `MAX_DESCRIPTION` characters. */
  description: string;
  inputSchema: Record<string, unknown>;
  outputSchema?: Record<string, unknown>;
}

/** A tool result as the plugin gave it, checked against its bounds and output schema. */
export interface PluginCallResult {
  content: ContentBlock[];
  structuredContent?: Record<string, unknown>;
  isError?: boolean;
}

export interface PluginCallOptions {
  /** Aborting cancels the request (the plugin gets notifications/cancelled). */
  signal?: AbortSignal;
  /** Deadline of this call; at most the plugin's `timeout_ms` (the default). */
  timeoutMs?: number;
}

export interface PluginHostOptions {
  /** Version sent in `clientInfo` (default "0.1.0"). */
  clientVersion?: string;
}

interface Entry {
  tool: PluginTool;
  validate?: JsonSchemaValidator<unknown>;
}

/** One live process and its MCP connection. */
interface Connection {
  transport: StdioPluginTransport;
  client: Client;
  /** Resolves when the transport closed (the process ended or broke the protocol). */
  closed: Promise<void>;
  /** The first transport error (a protocol break), if any. */
  error?: Error;
  readyAt?: number;
  refreshing: boolean;
  refreshAgain: boolean;
}

const ListPage = z.looseObject({
  tools: z.array(z.unknown()),
  nextCursor: z.string().max(4096).optional(),
});

function cut(text: string, max = MAX_PLUGIN_TEXT): string {
  return text.length <= max ? text : `${text.slice(0, max)}…`;
}

function messageOf(err: unknown): string {
  return cut(err instanceof Error ? err.message : String(err));
}

function lastLine(text: string): string | undefined {
  const lines = text.split("\n").map((l) => l.trim()).filter((l) => l !== "");
  const last = lines[lines.length - 1];
  return last === undefined ? undefined : cut(last, 200);
}

/** Call times in the last minute, in a ring of `limit` slots (bounded by the limit itself). */
class SlidingWindow {
  readonly #times: Float64Array;
  #head = 0;
  #count = 0;

  constructor(limit: number) {
    this.#times = new Float64Array(limit);
  }

  /** Records a call at `now`, or returns ms until one is allowed. */
  admit(now: number): number | undefined {
    const size = this.#times.length;
    while (this.#count > 0 && this.#times[this.#head]! <= now - RATE_WINDOW_MS) {
      this.#head = (this.#head + 1) % size;
      this.#count--;
    }
    if (this.#count >= size) return Math.ceil(this.#times[this.#head]! + RATE_WINDOW_MS - now);
    this.#times[(this.#head + this.#count) % size] = now;
    this.#count++;
    return undefined;
  }
}

/**
 * Runs and supervises one plugin. `start()` once, then `tools()` and `call()`; `close()` (or
 * `await using`) ends the process and the supervision. Caller must close.
 */
export class PluginHost {
  readonly #config: PluginConfig;
  readonly #clientVersion: string;
  readonly #stop = new AbortController();
  readonly #listeners = new Set<() => void>();
  readonly #rate: SlidingWindow;
  #state: PluginState = "starting";
  #restarts = 0;
  #lastError: string | undefined;
  #conn: Connection | undefined;
  #tools = new Map<string, Entry>();
  #loop: Promise<void> | undefined;
  #started: Promise<void> | undefined;
  #warnings = { windowStart: 0, count: 0 };

  constructor(config: PluginConfig, options: PluginHostOptions = {}) {
    this.#config = config;
    this.#clientVersion = options.clientVersion ?? "0.1.0";
    this.#rate = new SlidingWindow(config.calls_per_minute);
  }

  /** The plugin's name (the prefix of its tools). */
  get name(): string {
    return this.#config.name;
  }

  /**
   * Starts the process and its supervision. Resolves once the first attempt is over — ready,
   * or failed and (unless the command cannot run at all) retrying; `status()` tells which.
   * Never rejects: a plugin failing to start must not stop the daemon.
   */
  start(): Promise<void> {
    if (this.#stop.signal.aborted) {
      throw new TermadaError("STOPPED", `Cannot start plugin "${this.name}": its host is closed`);
    }
    if (this.#started === undefined) {
      let first!: () => void;
      this.#started = new Promise<void>((r) => first = r);
      this.#loop = this.#supervise(first);
    }
    return this.#started;
  }

  /** The plugin's tools (the last list it gave; kept across restarts, empty once closed). */
  tools(): PluginTool[] {
    return [...this.#tools.values()].map((e) => e.tool);
  }

  status(): PluginStatus {
    const pid = this.#conn?.transport.pid;
    return {
      state: this.#state,
      restarts: this.#restarts,
      ...(this.#lastError === undefined ? {} : { last_error: this.#lastError }),
      ...(pid === undefined ? {} : { pid }),
    };
  }

  /** The last `MAX_STDERR_KEPT` bytes of the current (or last) process's stderr. */
  stderr(): string {
    return this.#conn?.transport.stderr ?? "";
  }

  /** Calls `cb` whenever the tool list may have changed; returns the unsubscribe function. */
  onChange(cb: () => void): () => void {
    this.#listeners.add(cb);
    return () => this.#listeners.delete(cb);
  }

  /** Calls the plugin's tool `tool` (its unqualified name). */
  async call(
    tool: string,
    args: Record<string, unknown> = {},
    options: PluginCallOptions = {},
  ): Promise<PluginCallResult> {
    const qualified = `${this.name}.${tool}`;
    const action = `Cannot call "${qualified}"`;
    if (
      options.timeoutMs !== undefined &&
      !(Number.isInteger(options.timeoutMs) && options.timeoutMs > 0)
    ) {
      throw new RangeError(`${action}: timeoutMs must be a positive integer`);
    }
    if (this.#stop.signal.aborted) {
      throw new TermadaError("PLUGIN_UNAVAILABLE", `${action}: the plugin host is closed`, {
        retriable: false,
      });
    }
    const conn = this.#conn;
    if (this.#state !== "ready" || conn === undefined) {
      throw this.#unavailable(action, `the plugin is ${this.#state}`);
    }
    const entry = this.#tools.get(tool);
    if (entry === undefined) {
      throw new TermadaError("NOT_FOUND", `${action}: plugin "${this.name}" has no such tool`, {
        hint: "List the tools again: the plugin's list may have changed",
        retriable: false,
      });
    }
    const wait = this.#rate.admit(performance.now());
    if (wait !== undefined) {
      throw new TermadaError(
        "QUOTA_EXCEEDED",
        `${action}: over ${this.#config.calls_per_minute} calls in a minute`,
        {
          hint: `Retry in ${Math.ceil(wait / 1000)} s`,
          retriable: true,
          details: { limit: this.#config.calls_per_minute, metric: "calls_per_minute" },
        },
      );
    }
    const timeout = Math.min(options.timeoutMs ?? this.#config.timeout_ms, this.#config.timeout_ms);
    let raw: unknown;
    try {
      raw = await conn.client.request(
        { method: "tools/call", params: { name: tool, arguments: args } },
        z.unknown(),
        { timeout, ...(options.signal === undefined ? {} : { signal: options.signal }) },
      );
    } catch (err) {
      throw this.#callError(action, conn, err, timeout, options.signal);
    }
    return this.#checkResult(action, entry, raw);
  }

  /** Ends the process and the supervision; idempotent. */
  async close(): Promise<void> {
    if (!this.#stop.signal.aborted) this.#stop.abort();
    const conn = this.#conn;
    if (conn !== undefined) {
      await conn.client.close().catch(() => {
        // Closing only ends the transport, which is closed below anyway.
      });
      await conn.transport.close();
    }
    await this.#loop;
    this.#state = "stopped";
    this.#conn = undefined;
    this.#tools = new Map();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  #unavailable(action: string, why: string, cause?: unknown): TermadaError {
    return new TermadaError("PLUGIN_UNAVAILABLE", `${action}: ${why}`, {
      cause,
      retriable: true,
      hint: this.#lastError === undefined
        ? "Retry shortly: the plugin host restarts it"
        : `Retry shortly: the plugin host restarts it (last error: ${this.#lastError})`,
    });
  }

  #callError(
    action: string,
    conn: Connection,
    err: unknown,
    timeout: number,
    signal: AbortSignal | undefined,
  ): TermadaError {
    if (signal?.aborted) {
      return new TermadaError("STOPPED", `${action}: the caller cancelled it`, { cause: err });
    }
    if (err instanceof McpError) {
      // The SDK's declarations reach this checker as `any`-ish; narrow by hand.
      const mcp = err as McpError;
      if (mcp.code === McpErrorCode.RequestTimeout) {
        return new TermadaError(
          "PLUGIN_TIMEOUT",
          `${action}: no answer within ${timeout} ms`,
          {
            cause: err,
            retriable: false,
            hint: "The request was cancelled; the plugin may be stuck",
          },
        );
      }
      if (mcp.code === McpErrorCode.ConnectionClosed || conn.transport.closed) {
        return this.#unavailable(action, "the plugin's connection closed during the call", err);
      }
      if (mcp.code === McpErrorCode.InvalidParams) {
        return new TermadaError("INVALID_ARGUMENT", `${action}: ${messageOf(err)}`, { cause: err });
      }
      return new TermadaError(
        "PLUGIN_BAD_RESULT",
        `${action}: the plugin answered with an error: ${messageOf(err)}`,
        {
          cause: err,
          retriable: false,
        },
      );
    }
    // Anything else is the send failing: the pipe is broken or full, the process is ending.
    return this.#unavailable(action, `the plugin cannot be reached: ${messageOf(err)}`, err);
  }

  #checkResult(action: string, entry: Entry, raw: unknown): PluginCallResult {
    const bad = (why: string) =>
      new TermadaError("PLUGIN_BAD_RESULT", `${action}: ${why}`, { retriable: false });
    const json = JSON.stringify(raw) ?? "";
    // Characters are at most bytes; encode only when the count could be over.
    if (
      json.length > MAX_RESULT_BYTES || (json.length * 3 > MAX_RESULT_BYTES &&
        encoder.encode(json).length > MAX_RESULT_BYTES)
    ) {
      throw bad(`the result is over ${MAX_RESULT_BYTES} bytes`);
    }
    const parsed = CallToolResultSchema.safeParse(raw);
    if (!parsed.success) throw bad(`the result is not a tool result: ${cut(parsed.error.message)}`);
    const result = parsed.data;
    if (entry.validate !== undefined && result.isError !== true) {
      if (result.structuredContent === undefined) {
        throw bad("the tool declares an output schema but returned no structuredContent");
      }
      const checked = entry.validate(result.structuredContent);
      if (!checked.valid) {
        throw bad(
          `structuredContent does not match the output schema: ${cut(checked.errorMessage)}`,
        );
      }
    }
    return {
      content: result.content,
      ...(result.structuredContent === undefined
        ? {}
        : { structuredContent: result.structuredContent }),
      ...(result.isError === undefined ? {} : { isError: result.isError }),
    };
  }

  async #supervise(first: () => void): Promise<void> {
    let backoff = BACKOFF_INITIAL_MS;
    const stop = this.#stop.signal;
    while (!stop.aborted) {
      const conn = await this.#attempt();
      first();
      if (conn === "fatal") {
        this.#state = "failed";
        return;
      }
      if (conn !== undefined) {
        // The stop listener goes once the connection ends: one per restart would stay on the
        // host's signal for its whole life.
        let onStop: (() => void) | undefined;
        await Promise.race([
          conn.closed,
          new Promise<void>((r) => {
            onStop = () => r();
            stop.addEventListener("abort", onStop, { once: true });
          }),
        ]);
        if (onStop) stop.removeEventListener("abort", onStop);
        if (stop.aborted) return;
        this.#state = "restarting";
        await conn.client.close().catch(() => {
          // The transport is already closed; this only clears the client.
        });
        await conn.transport.finished;
        this.#lastError = this.#describeEnd(conn);
        this.#warn("plugin stopped; restarting", { error: this.#lastError });
        if (conn.readyAt !== undefined && performance.now() - conn.readyAt >= BACKOFF_RESET_MS) {
          backoff = BACKOFF_INITIAL_MS;
        }
      }
      if (stop.aborted) return;
      this.#state = "restarting";
      await delay(backoff, stop);
      backoff = Math.min(backoff * 2, BACKOFF_MAX_MS);
      if (stop.aborted) return;
      this.#restarts++;
    }
  }

  #describeEnd(conn: Connection): string {
    const status = conn.transport.exitStatus;
    const why = conn.error !== undefined
      ? messageOf(conn.error)
      : status === undefined
      ? "the plugin closed its stdout"
      : status.signal !== null
      ? `the plugin was ended by ${status.signal}`
      : `the plugin exited with status ${status.code}`;
    const line = lastLine(conn.transport.stderr);
    return line === undefined ? why : `${why} (stderr: ${line})`;
  }

  /** One process start: spawn, initialize, list. The connection if ready, else undefined. */
  async #attempt(): Promise<Connection | "fatal" | undefined> {
    const cfg = this.#config;
    const env: Record<string, string> = {};
    for (const key of ["PATH", "HOME"]) {
      const value = Deno.env.get(key);
      if (value !== undefined) env[key] = value;
    }
    Object.assign(env, cfg.env);
    const transport = new StdioPluginTransport(cfg.command, {
      args: cfg.args,
      env,
      label: cfg.name,
    });
    let onClosed!: () => void;
    const conn: Connection = {
      transport,
      client: new Client({ name: "termada", version: this.#clientVersion }, { capabilities: {} }),
      closed: new Promise<void>((r) => onClosed = r),
      refreshing: false,
      refreshAgain: false,
    };
    // Set before connect: the SDK chains its own handlers after these.
    transport.onclose = onClosed;
    transport.onerror = (err) => conn.error ??= err;
    conn.client.onerror = (err: Error) =>
      this.#warn("plugin connection error", { error: messageOf(err) });
    conn.client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
      void this.#refresh(conn);
    });
    this.#conn = conn;
    try {
      await conn.client.connect(transport, { timeout: cfg.timeout_ms });
      const tools = await this.#list(conn);
      if (transport.closed) throw conn.error ?? new Error("the plugin exited while listing tools");
      this.#tools = tools;
      conn.readyAt = performance.now();
      this.#state = "ready";
      log.info("plugin ready", { plugin: cfg.name, tools: tools.size, pid: transport.pid });
      this.#emit();
      return conn;
    } catch (err) {
      await conn.client.close().catch(() => {
        // Closing only ends the transport, which is closed below anyway.
      });
      await transport.close();
      if (this.#stop.signal.aborted) return undefined;
      const fatal = err instanceof Deno.errors.NotFound ||
        err instanceof Deno.errors.PermissionDenied;
      const why = err instanceof McpError && (err as McpError).code === McpErrorCode.RequestTimeout
        ? `no answer within ${cfg.timeout_ms} ms`
        : messageOf(conn.error ?? err);
      const line = lastLine(transport.stderr);
      this.#lastError = `Cannot start plugin "${cfg.name}": ${why}${
        line === undefined ? "" : ` (stderr: ${line})`
      }`;
      if (fatal) log.error("plugin cannot run", { plugin: cfg.name, error: this.#lastError });
      else this.#warn("plugin failed to start; retrying", { error: this.#lastError });
      return fatal ? "fatal" : undefined;
    }
  }

  /** Reads the whole tool list (all pages, within the bounds), keeping the valid tools. */
  async #list(conn: Connection): Promise<Map<string, Entry>> {
    const validators = new AjvJsonSchemaValidator();
    const out = new Map<string, Entry>();
    let dropped = 0;
    let cursor: string | undefined;
    let pages = 0;
    do {
      if (pages++ >= MAX_LIST_PAGES) {
        this.#warn(`plugin lists over ${MAX_LIST_PAGES} pages of tools; the rest are not read`);
        break;
      }
      const page = await conn.client.request(
        { method: "tools/list", params: cursor === undefined ? {} : { cursor } },
        ListPage,
        { timeout: this.#config.timeout_ms },
      );
      for (const raw of page.tools) {
        if (out.size >= MAX_TOOLS_PER_PLUGIN) {
          dropped++;
          continue;
        }
        const entry = this.#admit(raw, validators);
        if (entry === undefined) continue;
        if (out.has(entry.tool.tool)) {
          this.#warn("plugin lists a tool twice; the first is kept", { tool: entry.tool.tool });
          continue;
        }
        out.set(entry.tool.tool, entry);
      }
      cursor = page.nextCursor;
    } while (cursor !== undefined && out.size < MAX_TOOLS_PER_PLUGIN);
    if (dropped > 0 || cursor !== undefined) {
      this.#warn(`plugin lists over ${MAX_TOOLS_PER_PLUGIN} tools; the rest are dropped`, {
        dropped,
        more_pages: cursor !== undefined,
      });
    }
    return out;
  }

  /** One listed tool, if it is within the bounds. */
  #admit(raw: unknown, validators: AjvJsonSchemaValidator): Entry | undefined {
    const name = (raw as { name?: unknown } | null)?.name;
    if (typeof name !== "string" || !TOOL_NAME_PATTERN.test(name)) {
      this.#warn("plugin tool dropped: bad name", { tool: cut(String(name), 80) });
      return undefined;
    }
    const { inputSchema, outputSchema } = raw as { inputSchema?: unknown; outputSchema?: unknown };
    const size = encoder.encode(JSON.stringify(inputSchema ?? null)).length +
      (outputSchema === undefined ? 0 : encoder.encode(JSON.stringify(outputSchema)).length);
    if (size > MAX_SCHEMA_BYTES) {
      this.#warn(`plugin tool dropped: schemas over ${MAX_SCHEMA_BYTES} bytes`, {
        tool: name,
        bytes: size,
      });
      return undefined;
    }
    const parsed = ToolSchema.safeParse(raw);
    if (!parsed.success) {
      this.#warn("plugin tool dropped: not a valid tool", {
        tool: name,
        error: cut(parsed.error.message, 200),
      });
      return undefined;
    }
    const tool = parsed.data;
    let validate: JsonSchemaValidator<unknown> | undefined;
    if (tool.outputSchema !== undefined) {
      try {
        validate = validators.getValidator(tool.outputSchema);
      } catch (err) {
        this.#warn("plugin tool dropped: its output schema does not compile", {
          tool: name,
          error: messageOf(err),
        });
        return undefined;
      }
    }
    return {
      tool: {
        name: `${this.name}.${name}`,
        plugin: this.name,
        tool: name,
        description: (tool.description ?? "").slice(0, MAX_DESCRIPTION),
        inputSchema: tool.inputSchema,
        ...(tool.outputSchema === undefined ? {} : { outputSchema: tool.outputSchema }),
      },
      ...(validate === undefined ? {} : { validate }),
    };
  }

  /** Re-reads the list after notifications/tools/list_changed; one at a time per connection. */
  async #refresh(conn: Connection): Promise<void> {
    if (conn.refreshing) {
      conn.refreshAgain = true;
      return;
    }
    conn.refreshing = true;
    try {
      do {
        conn.refreshAgain = false;
        const tools = await this.#list(conn);
        if (conn !== this.#conn || this.#state !== "ready" || conn.transport.closed) return;
        this.#tools = tools;
        this.#emit();
      } while (conn.refreshAgain);
    } catch (err) {
      if (!conn.transport.closed) {
        this.#warn("plugin tool list refresh failed", { error: messageOf(err) });
      }
    } finally {
      conn.refreshing = false;
    }
  }

  #emit(): void {
    for (const cb of this.#listeners) {
      try {
        cb();
      } catch (err) {
        log.error("plugin onChange listener threw", { plugin: this.name, error: messageOf(err) });
      }
    }
  }

  #warn(message: string, fields: Record<string, unknown> = {}): void {
    const now = performance.now();
    const w = this.#warnings;
    if (now - w.windowStart >= 60_000) {
      if (w.count > MAX_WARNINGS_PER_MINUTE) {
        log.warn("plugin warnings suppressed", {
          plugin: this.name,
          count: w.count - MAX_WARNINGS_PER_MINUTE,
        });
      }
      w.windowStart = now;
      w.count = 0;
    }
    if (++w.count <= MAX_WARNINGS_PER_MINUTE) log.warn(message, { plugin: this.name, ...fields });
  }
}
