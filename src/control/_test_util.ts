/**
 * Test harness: the real control layer (engine, gateway, approvals, trail) on a real SQLite
 * store and a real audit log in a temp dir, with a policy the test chooses (default: allow all).
 * `rt.engine` drives it as an edge would: raw input parsed with the wire schemas, then the
 * agent's operations — so every engine test also passes the gateway. Torn down with `await using`.
 */
import { AuditLog, type AuditRecord } from "../audit/mod.ts";
import type { CallOptions, EngineOptions, Job, Session } from "../engine/mod.ts";
import { preloadNative } from "../pty/mod.ts";
import { EventBus } from "../shared/mod.ts";
import { Store } from "../store/mod.ts";
import {
  ExecKillInput,
  ExecListInput,
  ExecPollInput,
  ExecRunInput,
  ExecSignalInput,
  ExecStartInput,
  ExecWaitInput,
  ExecWriteInput,
  parseInput,
  SessionCreateInput,
  SessionIdInput,
} from "../wire/mod.ts";
import { Control } from "./control.ts";
import type { PolicyPort } from "./gateway.ts";
import type { OperatorOps } from "./operator.ts";
import type { AuditSink } from "./recorder.ts";

preloadNative();

export const ALLOW_ALL: PolicyPort = {
  decide: () => ({ action: "allow", reason: "allowed" }),
  decideLine: () => ({ action: "allow", reason: "allowed" }),
};

/** An agent's operations with raw (unparsed) input, as an edge calls them. */
export interface AgentApi {
  run(owner: string, input: unknown, call?: CallOptions): ReturnType<Control["agents"]["run"]>;
  start(owner: string, input: unknown): ReturnType<Control["agents"]["start"]>;
  poll(owner: string, input: unknown, call?: CallOptions): ReturnType<Control["agents"]["poll"]>;
  wait(owner: string, input: unknown, call?: CallOptions): ReturnType<Control["agents"]["wait"]>;
  write(owner: string, input: unknown): ReturnType<Control["agents"]["write"]>;
  signal(owner: string, input: unknown): ReturnType<Control["agents"]["signal"]>;
  kill(owner: string, input: unknown): ReturnType<Control["agents"]["kill"]>;
  listJobs(owner: string, input?: unknown): ReturnType<Control["agents"]["listJobs"]>;
  createSession(owner: string, input?: unknown): ReturnType<Control["agents"]["createSession"]>;
  listSessions(owner: string): ReturnType<Control["agents"]["listSessions"]>;
  closeSession(owner: string, input: unknown): ReturnType<Control["agents"]["closeSession"]>;
  screen(owner: string, input: unknown): ReturnType<Control["agents"]["screen"]>;
  jobOf(owner: string, jobId: string): Job;
  sessionOf(owner: string, sessionId: string): Session;
}

export interface TestRuntime extends AsyncDisposable {
  control: Control;
  engine: AgentApi;
  ops: OperatorOps;
  store: Store;
  audit: AuditLog;
  bus: EventBus;
  dir: string;
  /** The audit records written so far (read back from disk). */
  records(): AuditRecord[];
}

export interface TestRuntimeOptions {
  policy?: PolicyPort;
  engine?: Partial<EngineOptions>;
  confirmTimeoutMs?: number;
  reapAfterMs?: number | null;
  finishedPerAgent?: number;
  /** Wrap the audit log (fault injection). */
  audit?: (log: AuditLog) => AuditSink;
  busCapacity?: number;
  /** fsync audit records (default false in tests; the benchmarks turn it on). */
  fsync?: boolean;
}

export async function testRuntime(options: TestRuntimeOptions = {}): Promise<TestRuntime> {
  const dir = await Deno.makeTempDir({ prefix: "termada-test-" });
  const store = Store.open(`${dir}/state.db`);
  const audit = AuditLog.open(`${dir}/audit`, { fsync: options.fsync ?? false });
  const bus = new EventBus(options.busCapacity ?? 1000);
  Deno.mkdirSync(`${dir}/spool`, { mode: 0o700 });
  const control = new Control({
    engine: {
      runtimeDir: dir,
      defaultCwd: dir,
      env: {
        PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
        HOME: dir,
        LANG: "C.UTF-8",
      },
      killGraceMs: 300,
      ...options.engine,
    },
    store,
    audit: options.audit ? options.audit(audit) : audit,
    bus,
    policy: options.policy ?? ALLOW_ALL,
    spoolDir: `${dir}/spool`,
    spoolMaxBytes: 64 * 1024 * 1024,
    finishedPerAgent: options.finishedPerAgent ?? 1000,
    confirmTimeoutMs: options.confirmTimeoutMs,
    reapAfterMs: options.reapAfterMs === undefined ? null : options.reapAfterMs,
  });
  const a = control.agents;
  const engine: AgentApi = {
    run: (o, i, c) => a.run(o, parseInput(ExecRunInput, i), c),
    start: (o, i) => a.start(o, parseInput(ExecStartInput, i)),
    poll: (o, i, c) => a.poll(o, parseInput(ExecPollInput, i), c),
    wait: (o, i, c) => a.wait(o, parseInput(ExecWaitInput, i), c),
    write: (o, i) => a.write(o, parseInput(ExecWriteInput, i)),
    signal: (o, i) => a.signal(o, parseInput(ExecSignalInput, i)),
    kill: (o, i) => a.kill(o, parseInput(ExecKillInput, i)),
    listJobs: (o, i = {}) => a.listJobs(o, parseInput(ExecListInput, i)),
    createSession: (o, i = {}) => a.createSession(o, parseInput(SessionCreateInput, i)),
    listSessions: (o) => a.listSessions(o),
    closeSession: (o, i) => a.closeSession(o, parseInput(SessionIdInput, i)),
    screen: (o, i) => a.screen(o, parseInput(SessionIdInput, i)),
    jobOf: (o, id) => a.job(o, id),
    sessionOf: (o, id) => a.session(o, id),
  };
  return {
    control,
    engine,
    ops: control.operators,
    store,
    audit,
    bus,
    dir,
    records: () => audit.tail(10_000),
    async [Symbol.asyncDispose]() {
      await control.shutdown();
      audit.close();
      store.close();
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    },
  };
}

/** Asserts that `fn` rejects with a TermadaError of `code`. */
export async function rejectsWith(fn: () => unknown, code: string): Promise<Error> {
  try {
    await fn();
  } catch (err) {
    const c = (err as { code?: string }).code;
    if (c !== code) {
      throw new Error(`expected error ${code}, got ${c ?? "no code"}: ${(err as Error).message}`);
    }
    return err as Error;
  }
  throw new Error(`expected error ${code}, but it succeeded`);
}

/** Lists pids whose command line contains `needle` (via pgrep, outside the engine). */
export function pgrep(needle: string): number[] {
  const out = new Deno.Command("pgrep", { args: ["-f", needle], stdout: "piped" }).outputSync();
  return new TextDecoder().decode(out.stdout).trim().split("\n").filter(Boolean).map(Number);
}

/** Resolves once `cond` holds, polling with a deadline (for states no event announces). */
export async function until(cond: () => boolean, ms = 5000, what = "condition"): Promise<void> {
  const t0 = Date.now();
  while (!cond()) {
    if (Date.now() - t0 > ms) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
