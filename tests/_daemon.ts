/** Helpers for black-box daemon tests: spawn `termada serve` as a real process in a temp home. */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { ClientCapabilities, JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { preloadNative, procStat } from "../src/pty/mod.ts";

preloadNative();

export const ROOT = new URL("..", import.meta.url).pathname;
export const MOD = `${ROOT}mod.ts`;
/** `deno run …` arguments that run Termada from source with the daemon permission set. */
export const DENO_ARGS: readonly string[] = [
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

/** Runs `termada …` with `input` on its stdin (values and passphrases never go in argv). */
export async function termadaWithStdin(
  home: string,
  args: string[],
  input: string,
  env: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  const p = new Deno.Command(Deno.execPath(), {
    args: [...DENO_ARGS, ...args],
    env: termadaEnv(home, env),
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const w = p.stdin.getWriter();
  await w.write(new TextEncoder().encode(input));
  await w.close();
  const out = await p.output();
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

/** What to spawn: `deno` by default, with exactly `env` when `clearEnv` is set. */
export interface SpawnSpec {
  command?: string;
  args: readonly string[];
  env: Record<string, string>;
  /** Inherit nothing: `env` is the child's whole environment. */
  clearEnv?: boolean;
  cwd?: string;
}

/** A child with piped stdio, spawned from `spec`. */
export function spawnPiped(spec: SpawnSpec): Deno.ChildProcess {
  return new Deno.Command(spec.command ?? Deno.execPath(), {
    args: [...spec.args],
    env: spec.env,
    clearEnv: spec.clearEnv ?? false,
    cwd: spec.cwd,
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
}

/** Calls `onLine` for each non-empty (trimmed) line of `stream`; resolves at its end. */
export async function pumpLines(
  stream: ReadableStream<Uint8Array>,
  onLine: (line: string) => void,
  onChunk?: () => void,
): Promise<void> {
  const dec = new TextDecoder();
  let buf = "";
  for await (const chunk of stream) {
    buf += dec.decode(chunk, { stream: true });
    let nl: number;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl).trim();
      buf = buf.slice(nl + 1);
      if (line) onLine(line);
    }
    onChunk?.();
  }
}

/** Appends everything `stream` carries to `sink`, as text. */
export async function pumpText(
  stream: ReadableStream<Uint8Array>,
  sink: (text: string) => void,
): Promise<void> {
  const dec = new TextDecoder();
  for await (const c of stream) sink(dec.decode(c, { stream: true }));
}

/**
 * A minimal stdio transport over Deno.Command (newline-delimited JSON-RPC, as MCP stdio is).
 * The SDK's StdioClientTransport leaves a 2 s timer behind on close, which the test sanitizers
 * rightly flag, and cannot clear the environment or set a cwd; this one can, and waits for the
 * child and leaves nothing.
 */
export class ChildStdioTransport implements Transport {
  onmessage?: (m: JSONRPCMessage) => void;
  onclose?: () => void;
  onerror?: (e: Error) => void;
  readonly child: Deno.ChildProcess;
  #writer: WritableStreamDefaultWriter<Uint8Array>;
  #reading: Promise<void> | undefined;
  stderrText = "";
  #stderrPump: Promise<void>;

  constructor(spec: SpawnSpec) {
    this.child = spawnPiped(spec);
    this.#writer = this.child.stdin.getWriter();
    this.#stderrPump = pumpText(this.child.stderr, (t) => this.stderrText += t);
  }

  start(): Promise<void> {
    this.#reading = (async () => {
      await pumpLines(this.child.stdout, (line) => {
        let message: JSONRPCMessage;
        try {
          message = JSON.parse(line);
        } catch (err) {
          this.onerror?.(new Error(`not JSON on stdout: ${line.slice(0, 200)}`, { cause: err }));
          return;
        }
        this.onmessage?.(message);
      });
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
      this.child.status,
      new Promise<undefined>((r) => {
        const t = setTimeout(() => r(undefined), 5000);
        this.child.status.finally(() => clearTimeout(t));
      }),
    ]);
    if (!st) {
      this.child.kill("SIGKILL");
      await this.child.status;
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
  options: { capabilities?: ClientCapabilities; setup?: (client: Client) => void } = {},
): Promise<Client & AsyncDisposable> {
  const transport = new ChildStdioTransport({
    args: [...DENO_ARGS, "serve", "--stdio", ...shimArgs],
    env: termadaEnv(home, env),
  });
  const client = new Client(
    { name: "termada-test", version: "1" },
    options.capabilities ? { capabilities: options.capabilities } : undefined,
  );
  options.setup?.(client);
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
