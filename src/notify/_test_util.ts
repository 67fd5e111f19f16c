/** Test helpers of src/notify: a manual clock, a scripted sink, a captured logger, TLS certs. */
import { makeTestCerts } from "../shared/_test_tls.ts";
import type { Logger } from "../shared/mod.ts";
import type { Timers } from "./_timers.ts";
import type { Message } from "./message.ts";
import type { Sink } from "./sink.ts";

/** Timers that fire only when the test advances the clock. */
export class FakeTimers implements Timers {
  #now = 0;
  #next = 1;
  readonly #timers = new Map<number, { at: number; fn: () => void }>();

  now(): number {
    return this.#now;
  }

  setTimeout(fn: () => void, ms: number): unknown {
    const id = this.#next++;
    this.#timers.set(id, { at: this.#now + ms, fn });
    return id;
  }

  clearTimeout(handle: unknown): void {
    this.#timers.delete(handle as number);
  }

  get pending(): number {
    return this.#timers.size;
  }

  /** When the next timer fires (undefined: none). */
  get nextAt(): number | undefined {
    let at: number | undefined;
    for (const t of this.#timers.values()) at = at === undefined ? t.at : Math.min(at, t.at);
    return at;
  }

  /** Moves the clock forward, firing what falls due in order and settling promises after each. */
  async advance(ms: number): Promise<void> {
    const end = this.#now + ms;
    await settle();
    while (true) {
      let due: [number, { at: number; fn: () => void }] | undefined;
      for (const e of this.#timers) {
        if (e[1].at <= end && (due === undefined || e[1].at < due[1].at)) due = e;
      }
      if (due === undefined) break;
      this.#timers.delete(due[0]);
      this.#now = Math.max(this.#now, due[1].at);
      due[1].fn();
      await settle();
    }
    this.#now = end;
    await settle();
  }
}

/** Lets every promise chain that can run now run. */
export async function settle(): Promise<void> {
  for (let i = 0; i < 50; i++) await Promise.resolve();
}

/** A sink that records messages and answers from a script (then succeeds). */
export class ScriptedSink implements Sink {
  readonly calls: Message[] = [];
  readonly delivered: Message[] = [];
  readonly script: Array<Error | "ok"> = [];
  closed = 0;

  constructor(readonly name = "fake") {}

  send(message: Message): Promise<void> {
    this.calls.push(message);
    const next = this.script.shift() ?? "ok";
    if (next !== "ok") return Promise.reject(next);
    this.delivered.push(message);
    return Promise.resolve();
  }

  close(): void {
    this.closed++;
  }
}

/** A logger that keeps each line as text: `LEVEL message key=value…`. */
export function captureLog(): Logger & { lines: string[] } {
  const lines: string[] = [];
  const emit = (level: string) => (message: string, fields?: Record<string, unknown>) => {
    lines.push(`${level} ${message} ${JSON.stringify(fields ?? {})}`);
  };
  return {
    lines,
    debug: emit("DEBUG"),
    info: emit("INFO"),
    warn: emit("WARN"),
    error: emit("ERROR"),
  };
}

/** Polls `check` until it holds (deadline `ms`). */
export async function waitFor(what: string, check: () => boolean, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

export interface TestCerts {
  /** PEM of the private CA (what `ca_file` / `caCerts` trust). */
  ca: string;
  cert: string;
  key: string;
}

let certs: Promise<TestCerts> | undefined;

/** A private CA and a 127.0.0.1 server certificate it signed, made once (src/shared/_test_tls.ts). */
export function testCerts(): Promise<TestCerts> {
  return certs ??= makeCerts();
}

async function makeCerts(): Promise<TestCerts> {
  const dir = await Deno.makeTempDir({ prefix: "termada-notify-tls-" });
  try {
    const { ca, cert, key } = await makeTestCerts(dir);
    return { ca, cert, key };
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** A stand-in for the Bot API over HTTPS on 127.0.0.1: records requests, answers by script. */
export class FakeBotApi implements AsyncDisposable {
  readonly requests: { path: string; body: Record<string, unknown> }[] = [];
  readonly #server: Deno.HttpServer<Deno.NetAddr>;
  readonly #hung: (() => void)[] = [];

  /** `answer(n)`: the n-th request's response (0-based); `"hang"` never answers. */
  constructor(
    certs: TestCerts,
    answer: (n: number) => Response | "hang" = () => Response.json({ ok: true, result: {} }),
  ) {
    this.#server = Deno.serve({
      hostname: "127.0.0.1",
      port: 0,
      cert: certs.cert,
      key: certs.key,
      onListen() {},
    }, async (req) => {
      const n = this.requests.length;
      this.requests.push({
        path: new URL(req.url).pathname,
        body: await req.json() as Record<string, unknown>,
      });
      const a = answer(n);
      if (a !== "hang") return a;
      await new Promise<void>((r) => this.#hung.push(r));
      return new Response("late", { status: 200 });
    });
  }

  get url(): string {
    return `https://127.0.0.1:${this.#server.addr.port}`;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    for (const r of this.#hung) r();
    await this.#server.shutdown();
  }
}

/** A 127.0.0.1 port nothing listens on (bound, then released). */
export function closedPort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}
