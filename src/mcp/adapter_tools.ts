/**
 * The adapter tools (docs/PLUGINS.md "Adapters"): typed effects Termada can prove — a unified
 * diff applied under the configured roots (`file.patch`), a request to a configured endpoint
 * (`http.request`) — each prepared without side effects, decided by the gateway, executed with
 * an idempotency key and verified; a verified run's id proves a mission step.
 */
import {
  AdapterListInput,
  AdapterRunInput,
  AdapterRunList,
  AdapterRunRef,
  AdapterRunView,
} from "../wire/mod.ts";
import { tool, type ToolDef } from "./tools.ts";

const line = (r: AdapterRunView) =>
  `${r.run_id} · ${r.adapter} · ${r.phase}${r.verified ? " (verified)" : ""} · ${r.summary}${
    r.error ? ` · ${r.error.code}: ${r.error.message}` : ""
  }`;

export const ADAPTER_TOOLS: readonly ToolDef[] = [
  tool({
    name: "adapter_run",
    title: "Run a typed adapter",
    description:
      "Make a change Termada can prove. adapter file.patch: input {patch} (a unified diff, paths under the operator's roots). adapter http.request: input {target, method, path, body?} (a configured endpoint). The change is prepared without side effects, decided by the policy (it may wait for an approval), executed once (idempotency key), then verified: phase `verified` means the effect was observed. Pass the run_id to mission_update to prove a step.",
    input: AdapterRunInput,
    output: AdapterRunView,
    // Not the call's signal: a client that goes away must not leave a run half done.
    run: (c, a) => c.agents.adapters().run(c.agent, a),
    render: line,
  }),
  tool({
    name: "adapter_status",
    title: "An adapter run",
    description:
      "One of your adapter runs: its phase (verified, verify_failed, failed, outcome_unknown, compensated…), receipt and what verification observed.",
    input: AdapterRunRef,
    output: AdapterRunView,
    run: (c, a) => c.agents.adapters().get(c.agent, a.run_id),
    render: line,
    annotations: { readOnlyHint: true },
  }),
  tool({
    name: "adapter_list",
    title: "Your adapter runs",
    description:
      "Your newest adapter runs (oldest of them first) and the adapters this daemon offers.",
    input: AdapterListInput,
    output: AdapterRunList,
    run: (c, a) => c.agents.adapters().list(c.agent, a),
    render: (r) => [`adapters: ${r.adapters.join(", ") || "none"}`, ...r.runs.map(line)].join("\n"),
    annotations: { readOnlyHint: true },
  }),
  tool({
    name: "adapter_undo",
    title: "Undo an adapter run",
    description:
      "Compensate one of your reversible runs (a patch reversed, the configured undo request sent), decided by the policy again. Phase `compensated` when it is undone.",
    input: AdapterRunRef,
    output: AdapterRunView,
    run: (c, a) => c.agents.adapters().undo(c.agent, a.run_id),
    render: line,
    annotations: { destructiveHint: true },
  }),
];
