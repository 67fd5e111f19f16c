/**
 * Helpers shared by the contract tests (conformance, portability, first run): an MCP client over
 * a child's stdio with a fully controlled environment and working directory, a raw
 * newline-delimited JSON-RPC line driver for the stdio shim, assertions on tool results (success
 * and `structuredContent.error` shapes), and waiting with a deadline instead of sleeping.
 * Builds on tests/_daemon.ts (daemons in a temp TERMADA_HOME); every helper here owns what it
 * spawns and closes it in `close()` / `Symbol.asyncDispose`.
 */
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import {
  ChildStdioTransport,
  DENO_ARGS,
  lockPid,
  pumpLines,
  pumpText,
  spawnPiped,
  type SpawnSpec,
  waitGone,
} from "./_daemon.ts";

export { DENO_ARGS, type SpawnSpec };

/** The deno binary running the tests (the real one, not a wrapper script). */
export const DENO = Deno.execPath();
/** Arguments of `termada serve --stdio` from source. */
/** Deno's cache directory (a test with its own HOME passes it on, so nothing re-downloads). */
export async function denoDir(): Promise<string> {
  const out = await new Deno.Command(DENO, { args: ["info", "--json"], stdout: "piped" }).output();
  return JSON.parse(new TextDecoder().decode(out.stdout)).denoDir;
}

export const SHIM_ARGS: readonly string[] = [...DENO_ARGS, "serve", "--stdio"];

export type Structured = Record<string, unknown>;

export interface ToolError {
  code: string;
  message: string;
  retriable: boolean;
  hint?: string;
  details?: Record<string, unknown>;
}

const ERROR_KEYS = new Set(["code", "message", "retriable", "hint", "details"]);

// ── waiting ─────────────────────────────────────────────────────────────────

/** Resolves with `p`, or rejects with `what` once `ms` pass. Leaves no timer behind. */
export async function withDeadline<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what}: nothing within ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** Calls `probe` until it returns something other than undefined, or fails after `timeoutMs`. */
export async function pollUntil<T>(
  probe: () => T | undefined | Promise<T | undefined>,
  what: string,
  timeoutMs = 10_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** Runs a command to completion (stdin closed); SIGKILLs it after `ms` and says so. */
export async function runWithDeadline(
  program: string,
  args: string[],
  opts: { ms: number; env?: Record<string, string>; cwd?: string },
): Promise<{ code: number; stdout: string; stderr: string; timedOut: boolean }> {
  const abort = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    abort.abort();
  }, opts.ms);
  try {
    const out = await new Deno.Command(program, {
      args,
      // With an environment given, it is the whole of it: nothing is inherited.
      ...(opts.env ? { env: opts.env, clearEnv: true } : {}),
      cwd: opts.cwd,
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
      signal: abort.signal,
    }).output();
    const dec = new TextDecoder();
    return {
      code: out.code,
      stdout: dec.decode(out.stdout),
      stderr: dec.decode(out.stderr),
      timedOut,
    };
  } finally {
    clearTimeout(timer);
  }
}

/** An MCP `initialize` request (id 1) from a client called `name`. */
export function initializeRequest(name: string): Record<string, unknown> {
  return {
    jsonrpc: "2.0",
    id: 1,
    method: "initialize",
    params: {
      protocolVersion: "2025-06-18",
      capabilities: {},
      clientInfo: { name, version: "1" },
    },
  };
}

/** SIGTERM the daemon whose pid is in `<stateDir>/termada.lock` (if any) and wait for it. */
export async function stopLockedDaemon(stateDir: string): Promise<number | undefined> {
  const pid = lockPid(stateDir);
  if (pid === undefined) return undefined; // no lock: no daemon was started there
  try {
    Deno.kill(pid, "SIGTERM");
  } catch {
    return pid; // already gone
  }
  try {
    await waitGone(pid, 10_000);
  } catch {
    Deno.kill(pid, "SIGKILL");
    await waitGone(pid, 5_000);
  }
  return pid;
}

// ── tool results ────────────────────────────────────────────────────────────

const show = (v: unknown) => {
  const s = JSON.stringify(v);
  return s === undefined ? String(v) : s.length > 600 ? `${s.slice(0, 600)}…` : s;
};

/**
 * `client.callTool` that must return a result: the SDK throws (McpError -32602) when
 * `structuredContent` does not match the tool's declared `outputSchema`, which is a contract
 * failure, so it is reported as one. Call `client.listTools()` first so the SDK knows the schemas.
 */
export async function callTool(c: Client, name: string, args: unknown): Promise<CallToolResult> {
  try {
    return await c.callTool({ name, arguments: args as Record<string, unknown> }) as CallToolResult;
  } catch (err) {
    throw new assert.AssertionError({
      message: `callTool ${name} ${show(args)} threw instead of returning a result ` +
        `(the result does not validate against the tool's outputSchema?): ${
          (err as Error).message
        }`,
    });
  }
}

function assertText(r: CallToolResult, what: string): void {
  const text = (r.content as { type: string; text?: unknown }[] | undefined)?.find((c) =>
    c.type === "text"
  );
  assert.ok(text && typeof text.text === "string" && text.text.length > 0, `${what}: a text item`);
}

/** Asserts `error` has exactly the contract's shape: {code, message, retriable, hint?, details?}. */
export function assertErrorShape(error: unknown, what: string): asserts error is ToolError {
  assert.ok(error && typeof error === "object" && !Array.isArray(error), `${what}: error object`);
  const e = error as Record<string, unknown>;
  assert.equal(typeof e.code, "string", `${what}: error.code is a string: ${show(e)}`);
  assert.equal(typeof e.message, "string", `${what}: error.message is a string: ${show(e)}`);
  assert.ok((e.message as string).length > 0, `${what}: error.message is not empty`);
  assert.equal(typeof e.retriable, "boolean", `${what}: error.retriable is a boolean: ${show(e)}`);
  if (e.hint !== undefined) assert.equal(typeof e.hint, "string", `${what}: error.hint`);
  if (e.details !== undefined) {
    assert.ok(
      e.details !== null && typeof e.details === "object" && !Array.isArray(e.details),
      `${what}: error.details is an object: ${show(e.details)}`,
    );
  }
  const extra = Object.keys(e).filter((k) => !ERROR_KEYS.has(k));
  assert.deepEqual(
    extra,
    [],
    `${what}: error has only code, message, retriable, hint, details (facts go in details): ${
      show(e)
    }`,
  );
}

/** A successful call: returns `structuredContent`. */
export async function ok(c: Client, name: string, args: unknown): Promise<Structured> {
  const r = await callTool(c, name, args);
  assert.notEqual(
    r.isError,
    true,
    `${name} ${show(args)} should succeed: ${show(r.structuredContent ?? r.content)}`,
  );
  assert.ok(
    r.structuredContent && typeof r.structuredContent === "object",
    `${name}: structuredContent`,
  );
  assertText(r, name);
  return r.structuredContent as Structured;
}

/** A failed call with error `code`: returns `structuredContent.error`. */
export async function fails(
  c: Client,
  name: string,
  args: unknown,
  code: string,
): Promise<ToolError> {
  const r = await callTool(c, name, args);
  const what = `${name} ${show(args)}`;
  assert.equal(r.isError, true, `${what} should fail with ${code}: ${show(r.structuredContent)}`);
  const sc = r.structuredContent as Structured | undefined;
  assert.ok(sc && typeof sc === "object", `${what}: an error result has structuredContent`);
  assert.deepEqual(Object.keys(sc), ["error"], `${what}: structuredContent is {error}`);
  assertErrorShape(sc.error, what);
  assert.equal(sc.error.code, code, `${what}: error code ${code}, got ${show(sc.error)}`);
  assertText(r, what);
  return sc.error;
}

// ── MCP over a child's stdio ────────────────────────────────────────────────

export type SpawnedClient = Client & AsyncDisposable & { stderr(): string };

/** An SDK Client connected to a spawned stdio server; `listTools()` already called. */
export async function spawnClient(
  spec: SpawnSpec,
  name = "termada-contract-test",
  connectTimeoutMs = 20_000,
): Promise<SpawnedClient> {
  const transport = new ChildStdioTransport({ clearEnv: true, ...spec });
  const client = new Client({ name, version: "1" });
  const dispose = async () => {
    await client.close();
    await transport.close();
  };
  try {
    await withDeadline(client.connect(transport), connectTimeoutMs, "MCP initialize");
    await withDeadline(client.listTools(), connectTimeoutMs, "tools/list");
  } catch (err) {
    await dispose();
    throw new Error(`${(err as Error).message}\nstderr of the server:\n${transport.stderrText}`, {
      cause: err,
    });
  }
  return Object.assign(client, {
    stderr: () => transport.stderrText,
    [Symbol.asyncDispose]: dispose,
  });
}

// ── raw JSON-RPC lines to the shim ──────────────────────────────────────────

/**
 * Writes raw lines to a spawned process's stdin and reads its stdout line by line, with
 * deadlines on both. For protocol-level tests of `serve --stdio` (malformed input).
 */
export class RawLines implements AsyncDisposable {
  readonly child: Deno.ChildProcess;
  stderrText = "";
  #writer: WritableStreamDefaultWriter<Uint8Array>;
  #lines: string[] = [];
  #wake: (() => void) | undefined;
  #ended = false;
  #pump: Promise<void>;
  #errPump: Promise<void>;
  #closed: Promise<void> | undefined;

  constructor(spec: SpawnSpec) {
    const child = spawnPiped({ clearEnv: true, ...spec });
    this.child = child;
    this.#writer = child.stdin.getWriter();
    this.#pump = pumpLines(child.stdout, (line) => this.#lines.push(line), () => this.#wake?.())
      .then(() => {
        this.#ended = true;
        this.#wake?.();
      });
    this.#errPump = pumpText(child.stderr, (t) => this.stderrText += t);
  }

  /** Writes `text` and a newline; fails if the child does not take it within `timeoutMs`. */
  async writeLine(text: string, timeoutMs = 10_000): Promise<void> {
    await withDeadline(
      this.#writer.write(new TextEncoder().encode(text + "\n")),
      timeoutMs,
      `writing ${text.length} bytes to the shim's stdin`,
    );
  }

  async send(message: Record<string, unknown>): Promise<void> {
    await this.writeLine(JSON.stringify(message));
  }

  /** The next stdout line, parsed (a line that is not JSON fails the test). */
  async next(what: string, timeoutMs = 10_000): Promise<Record<string, unknown>> {
    const deadline = Date.now() + timeoutMs;
    while (this.#lines.length === 0) {
      if (this.#ended) {
        throw new Error(`${what}: the shim closed its stdout; stderr:\n${this.stderrText}`);
      }
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new Error(
          `${what}: no line on stdout within ${timeoutMs} ms; stderr:\n${
            this.stderrText.slice(0, 1500)
          }`,
        );
      }
      let timer: ReturnType<typeof setTimeout> | undefined;
      await new Promise<void>((r) => {
        this.#wake = r;
        timer = setTimeout(r, left);
      });
      clearTimeout(timer);
      this.#wake = undefined;
    }
    const line = this.#lines.shift()!;
    try {
      return JSON.parse(line);
    } catch {
      throw new assert.AssertionError({
        message: `${what}: stdout line is not JSON: ${line.slice(0, 300)}`,
      });
    }
  }

  /** The next message with this `id` (notifications and other ids are skipped). */
  async response(id: unknown, what: string, timeoutMs = 10_000): Promise<Record<string, unknown>> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const m = await this.next(what, Math.max(1, deadline - Date.now()));
      if (m.id === id) return m;
    }
  }

  close(): Promise<void> {
    return this.#closed ??= (async () => {
      // Not awaited: a write the child never took (a test that failed) must not block the close.
      this.#writer.close().catch(() => {/* the child closed stdin already */});
      let timer: ReturnType<typeof setTimeout> | undefined;
      const st = await Promise.race([
        this.child.status,
        new Promise<undefined>((r) => timer = setTimeout(() => r(undefined), 5000)),
      ]);
      clearTimeout(timer);
      if (!st) {
        this.child.kill("SIGKILL");
        await this.child.status;
      }
      await this.#pump;
      await this.#errPump;
    })();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}
