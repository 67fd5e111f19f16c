/** Helpers for black-box daemon tests: spawn `termada serve` as a real process in a temp home. */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { preloadNative, procStat } from "../src/pty/mod.ts";

preloadNative();

export const ROOT = new URL("..", import.meta.url).pathname;
export const MOD = `${ROOT}mod.ts`;
const DENO_ARGS = [
  "run",
  "--config",
  `${ROOT}deno.json`,
  "-P=daemon",
  "--no-prompt",
  "--quiet",
  MOD,
];

export interface RunningDaemon extends AsyncDisposable {
  proc: Deno.ChildProcess;
  home: string;
  socketPath: string;
  port: number;
  /** stderr so far (banner, logs). */
  stderr(): string;
  /** SIGTERM and wait; returns the exit code. */
  stop(): Promise<number>;
}

export async function tempHome(): Promise<string> {
  return await Deno.makeTempDir({ prefix: "termada-home-" });
}

/** A fresh TERMADA_HOME holding `config` as its config.yaml. */
export async function homeWithConfig(config: string): Promise<string> {
  const home = await tempHome();
  await Deno.writeTextFile(`${home}/config.yaml`, config);
  return home;
}

/** fetch for the daemon's operator API over TCP, with the operator token of `home`. */
export function operatorFetch(
  d: { home: string; port: number },
  operator = "test",
): (path: string, init?: RequestInit) => Promise<Response> {
  const token = Deno.readTextFileSync(`${d.home}/token`).trim();
  return (path, init = {}) =>
    fetch(`http://127.0.0.1:${d.port}/api${path}`, {
      ...init,
      headers: {
        authorization: `Bearer ${token}`,
        "x-termada-operator": operator,
        ...init.headers,
      },
    });
}

export function termadaEnv(
  home: string,
  extra: Record<string, string> = {},
): Record<string, string> {
  return { ...Deno.env.toObject(), TERMADA_HOME: home, NO_COLOR: "1", ...extra };
}

/** Runs `termada …` to completion (for commands that should fail fast). */
export async function termada(
  home: string,
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: [...DENO_ARGS, ...args],
    env: termadaEnv(home, env),
    stdout: "piped",
    stderr: "piped",
  }).output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

/** Starts a daemon and resolves once its banner says where it listens. */
export async function startDaemon(
  home: string,
  options: { args?: string[]; env?: Record<string, string> } = {},
): Promise<RunningDaemon> {
  const proc = new Deno.Command(Deno.execPath(), {
    args: [...DENO_ARGS, "serve", "--bind", "127.0.0.1:0", ...(options.args ?? [])],
    env: termadaEnv(home, options.env),
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  let err = "";
  const dec = new TextDecoder();
  const reader = proc.stderr.getReader();
  const pump = (async () => {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      err += dec.decode(value, { stream: true });
    }
  })();
  const deadline = Date.now() + 15_000;
  while (!/Stop with Ctrl-C/.test(err)) {
    if (Date.now() > deadline) {
      proc.kill("SIGKILL");
      await proc.status;
      throw new Error(`daemon did not start:\n${err}`);
    }
    const st = await Promise.race([proc.status, new Promise((r) => setTimeout(r, 25))]);
    if (st) {
      await pump;
      throw new Error(`daemon exited:\n${err}`);
    }
  }
  const socketPath = /Unix socket\s+(\S+)/.exec(err)![1]!;
  const port = Number(/http:\/\/127\.0\.0\.1:(\d+)\/mcp/.exec(err)![1]);
  let stopped: Promise<number> | undefined;
  const stop = () =>
    stopped ??= (async () => {
      try {
        proc.kill("SIGTERM");
      } catch {
        // already gone
      }
      const st = await proc.status;
      await pump;
      return st.code;
    })();
  return {
    proc,
    home,
    socketPath,
    port,
    stderr: () => err,
    stop,
    async [Symbol.asyncDispose]() {
      await stop();
    },
  };
}

/**
 * A minimal stdio transport over Deno.Command (newline-delimited JSON-RPC, as MCP stdio is).
 * The SDK's StdioClientTransport leaves a 2 s timer behind on close, which the test sanitizers
 * rightly flag; this one waits for the child and leaves nothing.
 */
class ChildStdioTransport implements Transport {
  onmessage?: (m: JSONRPCMessage) => void;
  onclose?: () => void;
  onerror?: (e: Error) => void;
  #child: Deno.ChildProcess;
  #writer: WritableStreamDefaultWriter<Uint8Array>;
  #reading: Promise<void> | undefined;
  stderrText = "";
  #stderrPump: Promise<void>;

  constructor(args: string[], env: Record<string, string>) {
    const child = new Deno.Command(Deno.execPath(), {
      args,
      env,
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    this.#child = child;
    this.#writer = child.stdin.getWriter();
    this.#stderrPump = (async () => {
      const dec = new TextDecoder();
      for await (const c of child.stderr) this.stderrText += dec.decode(c, { stream: true });
    })();
  }

  start(): Promise<void> {
    this.#reading = (async () => {
      const dec = new TextDecoder();
      let buf = "";
      for await (const chunk of this.#child.stdout) {
        buf += dec.decode(chunk, { stream: true });
        let nl: number;
        while ((nl = buf.indexOf("\n")) >= 0) {
          const line = buf.slice(0, nl).trim();
          buf = buf.slice(nl + 1);
          if (line) this.onmessage?.(JSON.parse(line));
        }
      }
      // The shim exited on its own (its daemon stopped): stdin is released here, since the
      // client will not call close() on a transport that already reported its end.
      await this.#closeStdin();
      this.onclose?.();
    })();
    return Promise.resolve();
  }

  async send(message: JSONRPCMessage): Promise<void> {
    await this.#writer.write(new TextEncoder().encode(JSON.stringify(message) + "\n"));
  }

  #stdinClosed: Promise<void> | undefined;
  #closeStdin(): Promise<void> {
    return this.#stdinClosed ??= this.#writer.close().catch(async () => {
      // The shim exited first: release stdin all the same.
      await this.#writer.abort().catch(() => {});
    });
  }

  async close(): Promise<void> {
    await this.#closeStdin();
    const st = await Promise.race([
      this.#child.status,
      new Promise<undefined>((r) => {
        const t = setTimeout(() => r(undefined), 5000);
        this.#child.status.finally(() => clearTimeout(t));
      }),
    ]);
    if (!st) {
      this.#child.kill("SIGKILL");
      await this.#child.status;
    }
    await this.#reading;
    await this.#stderrPump;
  }
}

/** An MCP client that talks to the daemon through `termada serve --stdio`. */
export async function stdioClient(
  home: string,
  shimArgs: string[] = [],
  env: Record<string, string> = {},
): Promise<Client & AsyncDisposable> {
  const transport = new ChildStdioTransport(
    [...DENO_ARGS, "serve", "--stdio", ...shimArgs],
    termadaEnv(home, env),
  );
  const client = new Client({ name: "termada-test", version: "1" });
  await client.connect(transport);
  return Object.assign(client, {
    async [Symbol.asyncDispose]() {
      await client.close();
    },
  });
}

/** The daemon pid from the lock file (for daemons the shim started). */
export function lockPid(home: string): number | undefined {
  try {
    const n = Number(Deno.readTextFileSync(`${home}/termada.lock`).trim());
    return n > 0 ? n : undefined;
  } catch {
    return undefined;
  }
}

export async function waitGone(pid: number, ms = 10_000): Promise<void> {
  const t0 = Date.now();
  while (Date.now() - t0 < ms) {
    const st = procStat(pid);
    if (!st || st.state === "Z") return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`process ${pid} still running`);
}

type Structured = Record<string, unknown>;
export async function call(client: Client, name: string, args: Structured): Promise<Structured> {
  const r = await client.callTool({ name, arguments: args });
  return r.structuredContent as Structured;
}
