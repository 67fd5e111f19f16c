/**
 * The Mission Control tools (docs/MISSION.md): thin adapters over the mission service. A server
 * built without missions answers them with NOT_SUPPORTED.
 */
import type { z } from "zod";
import type { MissionService } from "../mission/mod.ts";
import { TermadaError } from "../shared/mod.ts";
import {
  MissionCreateInput,
  MissionIdInput,
  MissionList,
  MissionListInput,
  MissionReportInput,
  MissionReportResult,
  MissionUpdateInput,
  type MissionView,
  MissionView as MissionViewSchema,
} from "../wire/mod.ts";
import { tool, type ToolContext, type ToolDef } from "./tools.ts";

function missions(c: ToolContext): MissionService {
  if (!c.missions) {
    throw new TermadaError("NOT_SUPPORTED", "Missions are not available on this server");
  }
  return c.missions;
}

const MARK: Record<string, string> = {
  passed: "✔",
  failed: "✘",
  skipped: "–",
  running: "…",
  pending: " ",
};

function renderMission(m: MissionView): string {
  const p = m.progress;
  const lines = [
    `${m.status} · ${m.mission_id} · session ${
      m.session_id ?? "none"
    } · ${p.passed}/${p.total} steps passed`,
    `goal: ${m.goal.split("\n")[0]}`,
  ];
  for (const s of m.steps) {
    lines.push(
      `[${MARK[s.status] ?? "?"}] ${s.step_id} ${s.text} — ${s.status}${
        s.verified ? ` (verified: ${s.job_id})` : s.job_id ? ` (${s.job_id})` : ""
      }`,
    );
  }
  for (const a of m.pending_approvals) {
    lines.push(`waiting for an operator: ${a.approval_id} (${a.job_id}) ${a.command.join(" ")}`);
  }
  if (m.status === "interrupted") {
    lines.push("[interrupted: mission_resume opens a fresh session; earlier shell state is gone]");
  } else if (m.session_id) {
    lines.push(`[run the steps with exec_run {session: "${m.session_id}"}, then mission_update]`);
  }
  return lines.join("\n");
}

const missionTool = <I extends z.ZodType>(
  name: string,
  title: string,
  description: string,
  input: I,
  run: (s: MissionService, c: ToolContext, args: z.output<I>) => MissionView | Promise<MissionView>,
  annotations?: ToolDef["annotations"],
): ToolDef =>
  tool({
    name,
    title,
    description,
    input,
    output: MissionViewSchema,
    annotations,
    run: (c, a) => run(missions(c), c, a),
    render: renderMission,
  });

export const MISSION_TOOLS: readonly ToolDef[] = [
  missionTool(
    "mission_create",
    "Start a mission",
    "Start a mission for a concrete operational goal: `goal`, a `plan` of 1–24 short steps. You get a dedicated session (`session_id`): run every step's commands there with exec_run {session_id}, then mark each step with mission_update {step_id, step_status: passed, job_id} — the runtime checks that the job ran in the mission's session and exited 0. Finish with mission_update {status: succeeded, summary} and mission_report.",
    MissionCreateInput,
    (s, c, a) => s.create(c.agent, a),
  ),
  missionTool(
    "mission_get",
    "Read a mission",
    "A mission with its plan (steps, verified evidence), pending approvals, session attempts and the last timeline entries.",
    MissionIdInput,
    (s, c, a) => s.get(c.agent, a),
    { readOnlyHint: true },
  ),
  tool({
    name: "mission_list",
    title: "List missions",
    description:
      "Your missions, newest first; `status` filters (planned, running, needs_attention, interrupted, succeeded, failed, cancelled).",
    input: MissionListInput,
    output: MissionList,
    run: (c, a) => missions(c).list(c.agent, a),
    render: (r) => {
      if (r.missions.length === 0) return "no missions";
      return r.missions.map((m) =>
        `${m.mission_id} · ${m.status} · ${m.progress.passed}/${m.progress.total} · ${m.title}`
      ).join("\n");
    },
    annotations: { readOnlyHint: true },
  }),
  missionTool(
    "mission_update",
    "Update a mission",
    "Mark a step (`step_id` s1…, `step_status` pending|running|passed|failed|skipped; `passed` needs the `job_id` of a job that ran in this mission's session and exited 0 — checked by the runtime), add a `note`, or finish the mission with `status` succeeded|failed|cancelled and a `summary`. `succeeded` needs every step passed or skipped, one passed, and no job still active. Finished missions cannot change.",
    MissionUpdateInput,
    (s, c, a) => s.update(c.agent, a),
  ),
  missionTool(
    "mission_resume",
    "Resume an interrupted mission",
    "An interrupted mission (the daemon restarted or its session closed) continues in a fresh session: nothing of the old shell (cwd, env, running programs) survived, so re-establish what the next step needs.",
    MissionIdInput,
    (s, c, a) => s.resume(c.agent, a),
  ),
  tool({
    name: "mission_report",
    title: "Evidence report",
    description:
      "The mission's evidence report as Markdown (runtime observations apart from your claims: plan with each step's evidence job, timeline, audit anchors) plus the same evidence as JSON. Its SHA-256 is recorded in the audit log.",
    input: MissionReportInput,
    output: MissionReportResult,
    run: (c, a) => ({ ...missions(c).report(c.agent, a), format: a.format ?? "markdown" }),
    render: (r) =>
      r.format === "json"
        ? JSON.stringify(r.evidence, null, 2)
        : `report ${r.mission_id} · sha256 ${r.sha256} · audit #${r.audit_seq}\n\n${r.markdown}`,
    annotations: { readOnlyHint: false },
  }),
];
