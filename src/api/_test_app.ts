/** Test harness: the HTTP app with a real engine, an allow-all gateway and an event bus. */
import { type AuditPort, Gateway } from "../control/mod.ts";
import { testEngine } from "../engine/_test_util.ts";
import { EventBus } from "../shared/mod.ts";
import type { DashboardFiles } from "./dashboard.ts";
import { createApp } from "./mod.ts";

export const OPERATOR_TOKEN = "op-" + "x".repeat(40);

export interface OperatorTestApp extends AsyncDisposable {
  te: Awaited<ReturnType<typeof testEngine>>;
  bus: EventBus;
  app: ReturnType<typeof createApp>;
  gateway: Gateway;
  /** GET on the Unix listener with the operator token. */
  get(path: string, headers?: Record<string, string>): Response | Promise<Response>;
}

export async function operatorTestApp(
  options: {
    busCapacity?: number;
    devMode?: boolean;
    audit?: AuditPort;
    dashboardFiles?: DashboardFiles;
  } = {},
): Promise<OperatorTestApp> {
  const bus = new EventBus(options.busCapacity ?? 1000);
  const gateway = new Gateway({
    bus,
    policy: {
      decide: () => ({ action: "allow", reason: "ok" }),
      decideLine: () => ({ action: "allow", reason: "ok" }),
    },
    audit: options.audit ?? { append: () => {} },
    approvals: { insertApproval: () => {}, decideApproval: () => true },
  });
  const te = await testEngine({ admission: gateway });
  gateway.attach(te.engine);
  const app = createApp({
    engine: te.engine,
    version: "test",
    port: 7717,
    agents: {
      agentForToken: () => undefined,
      isConfigured: () => false,
      devMode: options.devMode ?? true,
    },
    operatorToken: OPERATOR_TOKEN,
    operator: { gateway, bus },
    dashboardFiles: options.dashboardFiles,
  });
  return {
    te,
    bus,
    app,
    gateway,
    get(path: string, headers: Record<string, string> = {}) {
      return app.app.fetch(
        new Request(`http://termada${path}`, {
          headers: { authorization: `Bearer ${OPERATOR_TOKEN}`, ...headers },
        }),
        { listener: "unix" },
      );
    },
    async [Symbol.asyncDispose]() {
      gateway.close();
      await app.close();
      await te[Symbol.asyncDispose]();
    },
  };
}
