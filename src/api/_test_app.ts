/** Test harness: the HTTP app on the real control layer (allow-all policy) and an event bus. */
import { type TestRuntime, testRuntime, type TestRuntimeOptions } from "../control/_test_util.ts";
import type { EventBus } from "../shared/mod.ts";
import type { DashboardFiles } from "./dashboard.ts";
import { type AgentDirectory, createApp } from "./mod.ts";

export const OPERATOR_TOKEN = "op-" + "x".repeat(40);

export interface OperatorTestApp extends AsyncDisposable {
  te: TestRuntime;
  bus: EventBus;
  app: ReturnType<typeof createApp>;
  /** GET on the Unix listener with the operator token. */
  get(path: string, headers?: Record<string, string>): Response | Promise<Response>;
}

export async function operatorTestApp(
  options: {
    devMode?: boolean;
    dashboardFiles?: DashboardFiles;
    busCapacity?: number;
    audit?: TestRuntimeOptions["audit"];
  } = {},
): Promise<OperatorTestApp> {
  // (the directory below knows no tokens: operator routes are what these tests exercise)
  const te = await testRuntime({ busCapacity: options.busCapacity, audit: options.audit });
  const app = createApp({
    control: te.control,
    version: "test",
    port: 7717,
    agents: testDirectory({ devMode: options.devMode ?? true, devKey: () => true }),
    operatorToken: OPERATOR_TOKEN,
    operator: { bus: te.bus, auditTail: (n) => te.audit.tail(n) },
    dashboardFiles: options.dashboardFiles,
  });
  return {
    te,
    bus: te.bus,
    app,
    get(path: string, headers: Record<string, string> = {}) {
      return app.app.fetch(
        new Request(`http://termada${path}`, {
          headers: { authorization: `Bearer ${OPERATOR_TOKEN}`, ...headers },
        }),
        { listener: "unix" },
      );
    },
    async [Symbol.asyncDispose]() {
      await app.close();
      await te[Symbol.asyncDispose]();
    },
  };
}

/** A directory of static tokens for tests (the daemon's real one is src/daemon/agents.ts). */
export function testDirectory(o: {
  devMode: boolean;
  devKey: (key: string | undefined) => boolean;
  tokens?: ReadonlyMap<string, string>;
}): AgentDirectory {
  return {
    devMode: o.devMode,
    strict: false,
    devKey: o.devKey,
    authenticate: (credential) => {
      const agent = o.tokens?.get(credential);
      return Promise.resolve(
        agent
          ? { agent, principal: `agent:${agent}`, via: "token" as const }
          : { error: "Unknown agent token" },
      );
    },
    devIdentity: (agent) => ({ agent, principal: `agent:${agent}`, via: "dev" }),
    noCredential: () => {},
    isConfigured: (id) => [...(o.tokens?.values() ?? [])].includes(id),
  };
}
