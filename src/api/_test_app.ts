/** Test harness: the HTTP app on the real control layer (allow-all policy) and an event bus. */
import { type TestRuntime, testRuntime, type TestRuntimeOptions } from "../control/_test_util.ts";
import type { EventBus } from "../shared/mod.ts";
import type { DashboardFiles } from "./dashboard.ts";
import { createApp } from "./mod.ts";

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
  const te = await testRuntime({ busCapacity: options.busCapacity, audit: options.audit });
  const app = createApp({
    control: te.control,
    version: "test",
    port: 7717,
    agents: {
      agentForToken: () => undefined,
      isConfigured: () => false,
      devMode: options.devMode ?? true,
      devKey: () => true,
    },
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
