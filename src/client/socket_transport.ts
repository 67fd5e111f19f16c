/**
 * An MCP client transport over the daemon's MCP socket (newline-delimited JSON-RPC after a hello
 * line): what `termada run` uses in-process, and what tests and benchmarks use to reach the
 * daemon without a shim in between.
 */
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { readLines } from "../ipc/mod.ts";
import { helloLine } from "./shim.ts";

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export class SocketClientTransport implements Transport {
  onmessage?: (m: JSONRPCMessage) => void;
  onclose?: () => void;
  onerror?: (e: Error) => void;
  readonly #conn: Deno.UnixConn;
  readonly #who: { agent?: string; token?: string; key?: string };
  #reading: Promise<void> | undefined;
  #writes: Promise<void> = Promise.resolve();
  #closed = false;

  constructor(conn: Deno.UnixConn, who: { agent?: string; token?: string; key?: string } = {}) {
    this.#conn = conn;
    this.#who = who;
  }

  async start(): Promise<void> {
    await this.#write(helloLine(this.#who));
    this.#reading = (async () => {
      try {
        for await (const item of readLines(this.#conn)) {
          if (item.kind !== "line") continue;
          const text = decoder.decode(item.bytes).trim();
          if (text === "") continue;
          try {
            this.onmessage?.(JSON.parse(text));
          } catch (err) {
            this.onerror?.(err as Error);
          }
        }
      } catch (err) {
        if (!this.#closed) this.onerror?.(err as Error);
      }
      this.#closed = true;
      this.onclose?.();
    })();
  }

  send(message: JSONRPCMessage): Promise<void> {
    return this.#write(encoder.encode(JSON.stringify(message) + "\n"));
  }

  #write(bytes: Uint8Array): Promise<void> {
    this.#writes = this.#writes.then(async () => {
      let off = 0;
      while (off < bytes.length) off += await this.#conn.write(bytes.subarray(off));
    });
    return this.#writes;
  }

  async close(): Promise<void> {
    if (!this.#closed) {
      this.#closed = true;
      try {
        await this.#writes.catch(() => {});
        this.#conn.close();
      } catch {
        // already closed by the daemon
      }
    }
    await this.#reading;
  }
}
