/**
 * An MCP `Transport` over a plugin's stdio: newline-delimited JSON-RPC to and from a child
 * process. Owns the child: `close()` (or any protocol error) ends it, SIGTERM then SIGKILL.
 * Every buffer is bounded: one incoming line, the stderr ring, the bytes queued to stdin.
 */
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { type JSONRPCMessage, JSONRPCMessageSchema } from "@modelcontextprotocol/sdk/types.js";
import { concatBytes } from "../shared/mod.ts";
import {
  MAX_MESSAGE_BYTES,
  MAX_PENDING_WRITE_BYTES,
  MAX_PLUGIN_TEXT,
  MAX_STDERR_KEPT,
} from "./schema.ts";

/** Time a plugin gets to exit after SIGTERM before it is sent SIGKILL. */
export const KILL_GRACE_MS = 2000;

/** Time the pipes get to reach end-of-file after the child exited, before they are cut. */
const PIPE_DRAIN_MS = 1000;

const encoder = new TextEncoder();

export interface StdioPluginTransportOptions {
  args?: string[];
  /** The child's whole environment (nothing of the daemon's is inherited). */
  env?: Record<string, string>;
  /** Who the child is, for error messages (the plugin name). */
  label?: string;
  /** Longest line accepted from the child (default `MAX_MESSAGE_BYTES`). */
  maxMessageBytes?: number;
}

/** Keeps the last `size` bytes written to it. */
class ByteRing {
  readonly #buf: Uint8Array;
  #end = 0;
  #full = false;

  constructor(size: number) {
    this.#buf = new Uint8Array(size);
  }

  write(bytes: Uint8Array): void {
    const size = this.#buf.length;
    if (bytes.length >= size) {
      this.#buf.set(bytes.subarray(bytes.length - size));
      this.#end = 0;
      this.#full = true;
      return;
    }
    const first = Math.min(bytes.length, size - this.#end);
    this.#buf.set(bytes.subarray(0, first), this.#end);
    this.#buf.set(bytes.subarray(first), 0);
    if (this.#end + bytes.length >= size) this.#full = true;
    this.#end = (this.#end + bytes.length) % size;
  }

  bytes(): Uint8Array {
    if (!this.#full) return this.#buf.slice(0, this.#end);
    return concatBytes(
      [this.#buf.subarray(this.#end), this.#buf.subarray(0, this.#end)],
      this.#buf.length,
    );
  }
}

/** Cuts plugin-supplied text for quoting in messages. */
function cut(text: string, max = MAX_PLUGIN_TEXT): string {
  return text.length <= max ? text : `${text.slice(0, max)}…`;
}

/**
 * Spawns `command` on `start()` and speaks MCP's stdio framing with it. One use: once closed
 * (by `close()`, by the child exiting, or by a protocol error) it stays closed. Caller must
 * `close()` (or `await using`) so the child is reaped.
 */
export class StdioPluginTransport implements Transport {
  onmessage?: (message: JSONRPCMessage) => void;
  onerror?: (error: Error) => void;
  onclose?: () => void;

  readonly #command: string;
  readonly #args: string[];
  readonly #env: Record<string, string>;
  readonly #label: string;
  readonly #max: number;
  readonly #stderr = new ByteRing(MAX_STDERR_KEPT);
  #child: Deno.ChildProcess | undefined;
  #writer: WritableStreamDefaultWriter<Uint8Array> | undefined;
  #pending = 0;
  #closing = false;
  #status: Deno.CommandStatus | undefined;
  #done: Promise<void> | undefined;

  constructor(command: string, options: StdioPluginTransportOptions = {}) {
    this.#command = command;
    this.#args = options.args ?? [];
    this.#env = options.env ?? {};
    this.#label = options.label ?? command;
    this.#max = options.maxMessageBytes ?? MAX_MESSAGE_BYTES;
  }

  /** The child's pid while it runs. */
  get pid(): number | undefined {
    return this.#child !== undefined && this.#status === undefined ? this.#child.pid : undefined;
  }

  /** How the child ended, once it has. */
  get exitStatus(): Deno.CommandStatus | undefined {
    return this.#status;
  }

  /** True once the transport closed (it never reopens). */
  get closed(): boolean {
    return this.#closing;
  }

  /** The last `MAX_STDERR_KEPT` bytes the child wrote to stderr, as text. */
  get stderr(): string {
    return new TextDecoder().decode(this.#stderr.bytes());
  }

  /** Resolves once the child has been reaped and its pipes are closed (never rejects). */
  get finished(): Promise<void> {
    return this.#done ?? Promise.resolve();
  }

  /** Spawns the child; throws (Deno.errors.NotFound, PermissionDenied, …) if it cannot run. */
  start(): Promise<void> {
    if (this.#child !== undefined || this.#closing) {
      throw new TypeError(`Cannot start plugin "${this.#label}": its transport was started`);
    }
    this.#child = new Deno.Command(this.#command, {
      args: this.#args,
      env: this.#env,
      clearEnv: true,
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    this.#writer = this.#child.stdin.getWriter();
    const readers = [this.#child.stdout.getReader(), this.#child.stderr.getReader()] as const;
    const tasks = Promise.all([this.#readStdout(readers[0]), this.#readStderr(readers[1])]);
    const status = this.#child.status.then((s) => {
      this.#status = s;
    });
    this.#done = (async () => {
      await status;
      // The pipes end when the child's ends close, unless a grandchild inherited them: give
      // them a moment to drain, then cut them (what a grandchild writes is no longer ours).
      let timer: ReturnType<typeof setTimeout> | undefined;
      const late = new Promise<"late">((r) => timer = setTimeout(() => r("late"), PIPE_DRAIN_MS));
      const first = await Promise.race([tasks, late]);
      clearTimeout(timer);
      if (first === "late") {
        await Promise.all(readers.map((r) => r.cancel().catch(() => {/* already closed */})));
        await tasks;
      }
      await this.#writer?.close().catch(() => {
        // The child is gone, so its stdin is a broken pipe: nothing left to flush.
      });
    })();
    // The child exiting by itself closes the transport too.
    status.then(() => this.#shutdown());
    return Promise.resolve();
  }

  async send(message: JSONRPCMessage): Promise<void> {
    const writer = this.#writer;
    if (writer === undefined || this.#closing) {
      throw new Error(`Cannot send to plugin "${this.#label}": its connection is closed`);
    }
    const bytes = encoder.encode(JSON.stringify(message) + "\n");
    if (this.#pending + bytes.length > MAX_PENDING_WRITE_BYTES) {
      throw new Error(
        `Cannot send to plugin "${this.#label}": over ${MAX_PENDING_WRITE_BYTES} bytes are ` +
          "waiting for it to read its stdin",
      );
    }
    this.#pending += bytes.length;
    try {
      await writer.write(bytes);
    } finally {
      this.#pending -= bytes.length;
    }
  }

  /** Ends the child (SIGTERM, then SIGKILL after `KILL_GRACE_MS`) and waits for it. */
  async close(): Promise<void> {
    this.#shutdown();
    await this.finished;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  /** Closes once: tells the protocol at once (in-flight requests fail), then ends the child. */
  #shutdown(): void {
    if (this.#closing) return;
    this.#closing = true;
    const child = this.#child;
    if (child !== undefined && this.#status === undefined) void this.#kill(child);
    try {
      this.onclose?.();
    } catch (err) {
      this.onerror?.(err instanceof Error ? err : new Error(String(err)));
    }
  }

  async #kill(child: Deno.ChildProcess): Promise<void> {
    const signal = (sig: Deno.Signal) => {
      try {
        child.kill(sig);
      } catch {
        // Already exited between the check and the signal: nothing to end.
      }
    };
    signal("SIGTERM");
    let timer: ReturnType<typeof setTimeout> | undefined;
    const grace = new Promise<"late">((r) => timer = setTimeout(() => r("late"), KILL_GRACE_MS));
    const first = await Promise.race([child.status.then(() => "exited" as const), grace]);
    clearTimeout(timer);
    if (first === "late") signal("SIGKILL");
  }

  #fail(message: string): void {
    if (this.#closing) return;
    this.onerror?.(new Error(`Plugin "${this.#label}" broke the protocol: ${message}`));
    this.#shutdown();
  }

  #deliver(line: Uint8Array): void {
    let text: string;
    try {
      text = new TextDecoder("utf-8", { fatal: true }).decode(line).trim();
    } catch {
      return this.#fail("a line on stdout is not UTF-8");
    }
    if (text === "") return;
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      return this.#fail(`a line on stdout is not JSON: ${JSON.stringify(cut(text, 80))}`);
    }
    const message = JSONRPCMessageSchema.safeParse(parsed);
    if (!message.success) {
      return this.#fail(
        `a line on stdout is not a JSON-RPC message: ${JSON.stringify(cut(text, 80))}`,
      );
    }
    try {
      this.onmessage?.(message.data);
    } catch (err) {
      this.onerror?.(err instanceof Error ? err : new Error(String(err)));
    }
  }

  async #readStdout(reader: ReadableStreamDefaultReader<Uint8Array>): Promise<void> {
    let parts: Uint8Array[] = [];
    let length = 0;
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done || this.#closing) break;
        let start = 0;
        for (;;) {
          const nl = value.indexOf(10, start);
          const piece = value.subarray(start, nl < 0 ? value.length : nl);
          if (length + piece.length > this.#max) {
            this.#fail(`a line on stdout is longer than ${this.#max} bytes`);
            break;
          }
          if (nl < 0) {
            if (piece.length > 0) {
              parts.push(piece.slice());
              length += piece.length;
            }
            break;
          }
          parts.push(piece);
          const line = concatBytes(parts, length + piece.length);
          parts = [];
          length = 0;
          start = nl + 1;
          this.#deliver(line);
          if (this.#closing) break;
        }
        if (this.#closing) break;
      }
    } catch (err) {
      if (!this.#closing) this.onerror?.(err instanceof Error ? err : new Error(String(err)));
    } finally {
      parts = [];
      await reader.cancel().catch(() => {
        // The stream already errored; cancelling it only releases the pipe.
      });
    }
    this.#shutdown();
  }

  async #readStderr(reader: ReadableStreamDefaultReader<Uint8Array>): Promise<void> {
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        this.#stderr.write(value);
      }
    } catch {
      // A failing stderr pipe only costs diagnostics; stdout decides the connection.
    } finally {
      await reader.cancel().catch(() => {
        // Already errored: cancelling only releases the pipe.
      });
    }
  }
}
