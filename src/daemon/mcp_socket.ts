/**
 * MCP over the daemon's second Unix socket (`termada-mcp.sock`, 0600): newline-delimited JSON-RPC,
 * exactly MCP's stdio framing, one MCP session per connection. This is what `termada serve
 * --stdio` relays to byte for byte (no HTTP request, no SSE stream per call) and what `termada
 * run` speaks. The first line is the connection's hello (`{"termada":"hello","v":1,"agent"?,
 * "token"?}`): a token names a configured agent; in development mode an agent may name itself
 * (or be named by its client's `initialize`), as on the HTTP socket.
 *
 * Bad input is answered, never dropped: a line that is not JSON gets -32700, one that is not a
 * JSON-RPC message -32600, a line over MAX_LINE_BYTES a -32600 "too large" (the rest of it is
 * skipped), and the connection goes on. Each connection counts as a presence of its agent.
 */
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import type { AgentDirectory, CallerIdentity } from "../api/mod.ts";
import { agentIdFromName } from "../api/mod.ts";
import {
  createMcpServer,
  INVALID_REQUEST,
  jsonRpcShapeError,
  type McpServerOptions,
  PARSE_ERROR,
  requestId,
} from "../mcp/mod.ts";
import { MAX_LINE_BYTES, readLines } from "../ipc/mod.ts";
import { logger } from "../shared/mod.ts";

const log = logger("daemon");

/** Connections served at once (each is an agent's MCP session). */
export const MAX_CONNECTIONS = 512;

export interface McpSocketOptions {
  path: string;
  agents: AgentDirectory;
  server: Omit<McpServerOptions, "agent">;
  attach?: (agent: string, via: string) => () => void;
  onAgent?: (id: string, via: string) => void;
}

export interface McpSocket {
  close(): Promise<void>;
  readonly connections: number;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export function listenMcpSocket(options: McpSocketOptions): McpSocket {
  try {
    Deno.removeSync(options.path);
  } catch {
    // no stale socket (we hold the daemon lock)
  }
  const listener = Deno.listen({ transport: "unix", path: options.path });
  Deno.chmodSync(options.path, 0o600);
  const open = new Set<Connection>();
  let closed = false;
  const accepting = (async () => {
    for (;;) {
      let conn: Deno.UnixConn;
      try {
        conn = await listener.accept();
      } catch {
        return; // the listener was closed
      }
      if (closed || open.size >= MAX_CONNECTIONS) {
        await writeAll(conn, line({ termada: "refused", error: busyError() })).catch(() => {});
        conn.close();
        continue;
      }
      const c = new Connection(conn, options);
      open.add(c);
      c.done.finally(() => open.delete(c));
    }
  })();
  return {
    async close() {
      closed = true;
      listener.close();
      await accepting;
      await Promise.all([...open].map((c) => c.close()));
      try {
        Deno.removeSync(options.path);
      } catch {
        // already gone
      }
    },
    get connections() {
      return open.size;
    },
  };
}

function busyError() {
  return { code: "QUOTA_EXCEEDED", message: "Too many MCP connections", retriable: true };
}

function line(v: unknown): Uint8Array {
  return encoder.encode(JSON.stringify(v) + "\n");
}

async function writeAll(conn: Deno.Conn, bytes: Uint8Array): Promise<void> {
  let off = 0;
  while (off < bytes.length) off += await conn.write(bytes.subarray(off));
}

interface Hello {
  agent?: string;
  token?: string;
  key?: string;
}

/** One client: hello, then MCP messages both ways until either side closes. */
class Connection {
  readonly done: Promise<void>;
  readonly #conn: Deno.UnixConn;
  readonly #o: McpSocketOptions;
  #transport: LineTransport | undefined;
  #detach: () => void = () => {};
  /** Ends the connection when its agent JWT expires. */
  #expiry: ReturnType<typeof setTimeout> | undefined;
  /** Writes in order, one at a time. */
  #writes: Promise<void> = Promise.resolve();
  #closed = false;

  constructor(conn: Deno.UnixConn, options: McpSocketOptions) {
    this.#conn = conn;
    this.#o = options;
    this.done = this.#run().catch((err) => {
      if (!this.#closed) log.debug("MCP connection ended", { error: err });
    }).finally(() => this.#finish());
  }

  send(v: unknown): Promise<void> {
    const bytes = line(v);
    this.#writes = this.#writes.then(() => writeAll(this.#conn, bytes)).catch(() => {
      // the peer went away: reading ends the connection
    });
    return this.#writes;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#transport?.close().catch(() => {});
    try {
      this.#conn.close();
    } catch {
      // already closed
    }
    await this.done;
  }

  async #run(): Promise<void> {
    let hello: Hello | undefined;
    let pending: unknown[] = [];
    for await (const item of readLines(this.#conn)) {
      if (item.kind === "too_large") {
        // Answered with the request's own id when its end names one (the SDK puts it last), so
        // the client's call fails at once instead of waiting for its timeout.
        this.send(rpcError(
          idAtEnd(decoder.decode(item.tail)),
          INVALID_REQUEST,
          `Request too large: over ${MAX_LINE_BYTES} bytes`,
        ));
        continue;
      }
      const text = decoder.decode(item.bytes).trim();
      if (text === "") continue;
      let value: unknown;
      try {
        value = JSON.parse(text);
      } catch {
        this.send(rpcError(null, PARSE_ERROR, "Parse error: the line is not JSON"));
        continue;
      }
      if (hello === undefined) {
        const h = value as { termada?: unknown; agent?: unknown; token?: unknown };
        if (h && typeof h === "object" && h.termada === "hello") {
          hello = {
            ...(typeof h.agent === "string" ? { agent: h.agent } : {}),
            ...(typeof h.token === "string" ? { token: h.token } : {}),
            ...(typeof (h as { key?: unknown }).key === "string"
              ? { key: (h as { key: string }).key }
              : {}),
          };
          continue;
        }
        hello = {}; // a plain MCP client without a hello: dev-mode rules apply
      }
      const shape = jsonRpcShapeError(value);
      if (shape !== undefined || Array.isArray(value)) {
        this.send(rpcError(
          requestId(value),
          INVALID_REQUEST,
          `Invalid Request: ${shape ?? "batches are not supported on this transport"}`,
        ));
        continue;
      }
      if (!this.#transport) {
        pending.push(value);
        const who = await this.#identify(hello, value);
        if ("error" in who) {
          const id = requestId(value);
          if (id !== null) this.send(rpcError(id, -32001, who.error));
          pending = [];
          continue;
        }
        this.#connect(who.agent, who.via);
        if (who.expiresAt !== undefined) {
          this.#expiry = setTimeout(() => {
            log.info("an agent JWT expired: its connection ends", { agent: who.agent });
            this.close().catch(() => {/* closing anyway */});
          }, Math.max(0, Math.min(who.expiresAt - Date.now(), 2 ** 31 - 1)));
        }
        const queued = pending;
        pending = [];
        for (const m of queued) this.#transport!.deliver(m as JSONRPCMessage);
        continue;
      }
      this.#transport.deliver(value as JSONRPCMessage);
    }
  }

  async #identify(
    hello: Hello,
    first: unknown,
  ): Promise<
    { agent: string; via: CallerIdentity["via"]; expiresAt?: number } | { error: string }
  > {
    const agents = this.#o.agents;
    if (hello.token !== undefined) {
      const who = await agents.authenticate(hello.token, "mcp-socket");
      if ("error" in who) return who;
      return {
        agent: who.agent,
        via: who.via,
        ...(who.expiresAt ? { expiresAt: who.expiresAt } : {}),
      };
    }
    if (!agents.devMode) {
      agents.noCredential("mcp-socket");
      return { error: "An agent token is required (--token or TERMADA_AGENT_TOKEN)" };
    }
    if (!agents.devKey(hello.key)) {
      agents.noCredential("mcp-socket");
      return {
        error: "Development mode needs the socket key (the shim sends it) or an agent token; " +
          "processes inside a Termada session cannot read it",
      };
    }
    const claimed = hello.agent ?? clientName(first) ?? "agent";
    const agent = agentIdFromName(claimed);
    if (!agent) return { error: `Bad agent id "${claimed}"` };
    if (agents.isConfigured(agent)) return { error: `Agent "${agent}" has a token: present it` };
    agents.devIdentity(agent);
    return { agent, via: "dev" };
  }

  #connect(agent: string, via: CallerIdentity["via"]): void {
    const transport = new LineTransport((m) => this.send(m));
    this.#transport = transport;
    this.#detach = this.#o.attach?.(agent, via) ?? (() => {});
    this.#o.onAgent?.(agent, via);
    const server = createMcpServer({ ...this.#o.server, agent });
    server.connect(transport).then(
      () => transport.useRequestDispatch(server),
      (err: unknown) => log.error("could not start an MCP session", { agent, error: err }),
    );
  }

  #finish(): void {
    clearTimeout(this.#expiry);
    this.#detach();
    this.#detach = () => {};
    this.#transport?.ended();
    try {
      this.#conn.close();
    } catch {
      // already closed
    }
  }
}

function rpcError(id: string | number | null, code: number, message: string) {
  return { jsonrpc: "2.0", id, error: { code, message } };
}

function clientName(m: unknown): string | undefined {
  const v = m as { method?: string; params?: { clientInfo?: { name?: unknown } } };
  const name = v?.method === "initialize" ? v.params?.clientInfo?.name : undefined;
  return typeof name === "string" ? name : undefined;
}

/** The SDK protocol layer's own entry for one request (what its `onmessage` calls for one). */
type RequestDispatch = (request: JSONRPCMessage) => void;

/**
 * The SDK side of a connection: messages in from the reader, out through `write`.
 *
 * A plain `tools/call` request goes straight to the protocol layer's request entry: its
 * `onmessage` would first try the message against the response, error and request schemas
 * (three zod parses, ≈ 50 µs a call, measured) to learn what the shape check at the edge
 * already established. Everything else — and every request the schemas could read otherwise
 * (a `_meta` or task field they would check) — takes the SDK's own path.
 */
class LineTransport implements Transport {
  onmessage?: (m: JSONRPCMessage) => void;
  onclose?: () => void;
  onerror?: (e: Error) => void;
  readonly #write: (m: JSONRPCMessage) => Promise<void>;
  #closed = false;
  #dispatch: RequestDispatch | undefined;

  constructor(write: (m: JSONRPCMessage) => Promise<void>) {
    this.#write = write;
  }

  start(): Promise<void> {
    return Promise.resolve();
  }

  /** Uses `server`'s request entry for plain tool calls, when this SDK version has one. */
  useRequestDispatch(server: object): void {
    const entry = (server as { _onrequest?: unknown })._onrequest;
    if (typeof entry !== "function") return;
    this.#dispatch = (request) => entry.call(server, request, undefined);
  }

  deliver(m: JSONRPCMessage): void {
    if (this.#closed) return;
    if (this.#dispatch !== undefined && plainToolCall(m)) this.#dispatch(m);
    else this.onmessage?.(m);
  }

  send(m: JSONRPCMessage): Promise<void> {
    if (this.#closed) return Promise.resolve();
    return this.#write(m);
  }

  close(): Promise<void> {
    this.ended();
    return Promise.resolve();
  }

  ended(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.onclose?.();
  }
}

/**
 * A shape-checked message (jsonRpcShapeError) that the SDK's schemas would take for a request
 * (strict: only `jsonrpc`, `id`, `method`, `params`; a string or integer id) and read no
 * further: `tools/call`, object params with no `task`, and a `_meta` that is absent or an object
 * with at most a string or integer `progressToken`.
 */
function plainToolCall(m: JSONRPCMessage): boolean {
  const o = m as Record<string, unknown>;
  if (o.method !== "tools/call" || !sdkId(o.id)) return false;
  for (const key in o) {
    if (key !== "jsonrpc" && key !== "id" && key !== "method" && key !== "params") return false;
  }
  const params = o.params as Record<string, unknown> | undefined;
  if (params === null || typeof params !== "object" || Array.isArray(params)) return false;
  if ("task" in params) return false;
  const meta = params._meta;
  if (meta === undefined) return true;
  if (meta === null || typeof meta !== "object" || Array.isArray(meta)) return false;
  for (const key in meta) {
    if (key !== "progressToken") return false;
  }
  const token = (meta as { progressToken?: unknown }).progressToken;
  return token === undefined || sdkId(token);
}

/** The SDK's request id (and progress token): a string or an integer. */
function sdkId(v: unknown): boolean {
  return typeof v === "string" || Number.isInteger(v);
}

/**
 * The id of a request from the end of its line, when the line ends with its top-level `"id"`
 * (`…,"id":7}`: one closing brace, so not a nested object's), else null.
 */
export function idAtEnd(tail: string): string | number | null {
  const m = /[,{]\s*"id"\s*:\s*(-?\d{1,15}|"(?:[^"\\]|\\.){0,200}")\s*\}\s*$/.exec(tail);
  if (!m) return null;
  try {
    const id = JSON.parse(m[1]!);
    return typeof id === "number" || typeof id === "string" ? id : null;
  } catch {
    return null;
  }
}
