/**
 * `http.request` over the operator's named endpoints: one adapter whose input names its
 * `target` (a configured base URL with its own headers, verify, reconcile and compensate
 * options), dispatching each phase to that target's own {@link httpRequestAdapter}. The plan
 * keeps the target's name (and a target's `cost` is the run's estimate), so a run resumed after a restart goes to the same origin — and fails
 * closed (UNKNOWN_ADAPTER) when the config no longer has it.
 */
import { z } from "zod";
import {
  httpRequestAdapter,
  HttpRequestInput,
  type HttpRequestOptions,
  type HttpRequestPlan,
  type HttpRequestReceipt,
} from "./http_request.ts";
import { type Adapter, AdapterError, type Prepared } from "./sdk.ts";

/** Most named endpoints. */
export const MAX_HTTP_TARGETS = 32;
const TARGET_NAME = /^[a-z][a-z0-9_-]{0,31}$/;

export const HttpTargetsInput = HttpRequestInput.extend({
  /** The configured endpoint (`adapters.http[].name`). */
  target: z.string().regex(TARGET_NAME),
});
export type HttpTargetsInput = z.output<typeof HttpTargetsInput>;

export type HttpTargetsPlan = { target: string; request: HttpRequestPlan };

type One = Adapter<HttpRequestInput, HttpRequestPlan, HttpRequestReceipt>;

/** The `http.request` adapter over `targets` (name → options); throws TypeError on bad options. */
export function httpTargetsAdapter(
  targets: Readonly<Record<string, HttpRequestOptions & { cost?: number }>>,
): Adapter<HttpTargetsInput, HttpTargetsPlan, HttpRequestReceipt> {
  const names = Object.keys(targets);
  if (names.length > MAX_HTTP_TARGETS) {
    throw new TypeError(`At most ${MAX_HTTP_TARGETS} http targets`);
  }
  const byName = new Map<string, One>();
  for (const name of names) {
    if (!TARGET_NAME.test(name)) throw new TypeError(`Bad http target name "${name}"`);
    byName.set(name, httpRequestAdapter(targets[name]!));
  }
  const of = (target: string): One => {
    const a = byName.get(target);
    if (!a) {
      throw new AdapterError(
        "UNKNOWN_ADAPTER",
        `No http target "${target}" (configured: ${names.join(", ") || "none"})`,
        { outcome: "not_applied" },
      );
    }
    return a;
  };
  return {
    name: "http.request",
    input: HttpTargetsInput,
    async prepare(input, ctx): Promise<Prepared<HttpTargetsPlan>> {
      const { target, ...request } = input;
      const p = await of(target).prepare(request, ctx);
      const cost = targets[target]?.cost;
      return {
        ...p,
        plan: { target, request: p.plan },
        summary: `${target}: ${p.summary}`,
        // The operator's price of one request, for `cost` budgets.
        ...(cost !== undefined ? { cost } : {}),
      };
    },
    execute: (plan, ctx) => of(plan.target).execute(plan.request, ctx),
    verify: (plan, receipt, ctx) => of(plan.target).verify(plan.request, receipt, ctx),
    compensate(plan, receipt, ctx) {
      const a = of(plan.target);
      if (!a.compensate) {
        throw new AdapterError(
          "NOT_REVERSIBLE",
          `http target "${plan.target}" has no compensate`,
          { outcome: "not_applied" },
        );
      }
      return a.compensate(plan.request, receipt, ctx);
    },
    reconcile(plan, ctx) {
      const a = of(plan.target);
      return a.reconcile
        ? a.reconcile(plan.request, ctx)
        : Promise.resolve({ status: "unknown", detail: "no reconcile for this target" });
    },
  };
}
