/**
 * Adapter runs on the wire (docs/PLUGINS.md "Adapters"): the agent tools `adapter_run`,
 * `adapter_status`, `adapter_list` and `adapter_undo`. A run's phases are listed once, here;
 * src/adapters moves runs through them.
 */
import { z } from "zod";

/** Every phase a run can be in, in the order a successful run passes them. */
export const ADAPTER_RUN_PHASES = [
  "prepared",
  "admitted",
  "refused",
  "executing",
  "executed",
  "verified",
  "verify_failed",
  "failed",
  "outcome_unknown",
  "compensating",
  "compensated",
  "compensate_failed",
] as const;
export type AdapterRunPhase = typeof ADAPTER_RUN_PHASES[number];

/** Bounds of adapter input at the edge (each adapter bounds its own input further). */
export const ADAPTER_WIRE_LIMITS = {
  /** Runs `adapter_list` returns at most. */
  listMax: 200,
} as const;

export const AdapterRunId = z.string().regex(/^run_[0-9a-z]{12}$/, "is not an adapter run id");

export const AdapterRunInput = z.strictObject({
  /** `file.patch` or `http.request` (what this daemon's config offers: capabilities). */
  adapter: z.string().min(1).max(64),
  /** The adapter's own input (file.patch: {patch}; http.request: {target, method, path, body?}). */
  input: z.record(z.string(), z.unknown()),
});
export type AdapterRunInput = z.output<typeof AdapterRunInput>;

export const AdapterRunRef = z.strictObject({ run_id: AdapterRunId });
export type AdapterRunRef = z.output<typeof AdapterRunRef>;

export const AdapterListInput = z.strictObject({
  limit: z.int().min(1).max(ADAPTER_WIRE_LIMITS.listMax).optional(),
});
export type AdapterListInput = z.output<typeof AdapterListInput>;

/** An adapter's JSON detail, as an object (a bare value is wrapped as `{value}`). */
const Detail = z.record(z.string(), z.unknown());

export const AdapterRunView = z.object({
  run_id: z.string(),
  adapter: z.string(),
  phase: z.enum(ADAPTER_RUN_PHASES),
  /** True once `verify` observed that the effect holds (phase `verified`). */
  verified: z.boolean(),
  /** What the policy decided on (`file:/srv/app/a.txt`, an URL). */
  resource: z.string(),
  /** The exact change, as a person approving it saw it. */
  summary: z.string(),
  risk: z.enum(["low", "medium", "high"]),
  reversible: z.boolean(),
  /** What execute left (hashes, a status, an id): never a secret. */
  receipt: Detail.optional(),
  /** What verify saw. */
  observed: Detail.optional(),
  compensation: Detail.optional(),
  error: z.object({ code: z.string(), message: z.string() }).optional(),
  created_at: z.string(),
  updated_at: z.string(),
});
export type AdapterRunView = z.output<typeof AdapterRunView>;

export const AdapterRunList = z.object({
  runs: z.array(AdapterRunView),
  /** The adapters this daemon offers. */
  adapters: z.array(z.string()),
});
export type AdapterRunList = z.output<typeof AdapterRunList>;

/** `GET /api/adapters`: every agent's newest runs; `agents[i]` owns `runs[i]` (always sent). */
export const OperatorAdapterList = AdapterRunList.extend({
  agents: z.array(z.string()).optional(),
});
export type OperatorAdapterList = z.output<typeof OperatorAdapterList>;

/** One configured plugin as operators see it (`GET /api/plugins`, `termada plugins`). */
export const PluginInfo = z.object({
  name: z.string(),
  command: z.string(),
  /** starting | ready | restarting | stopped | failed. */
  state: z.string(),
  restarts: z.number().int(),
  /** Its tools' qualified names (`<plugin>.<tool>`). */
  tools: z.array(z.string()),
  last_error: z.string().optional(),
  pid: z.number().int().optional(),
});
export type PluginInfo = z.output<typeof PluginInfo>;

export const OperatorPluginList = z.object({ plugins: z.array(PluginInfo) });
export type OperatorPluginList = z.output<typeof OperatorPluginList>;
