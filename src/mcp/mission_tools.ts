/**
 * The Mission Control tools (docs/MISSION.md): thin adapters over the mission service. A server
 * built without missions answers them with NOT_SUPPORTED.
 */
import { z } from "zod";
import {
  MissionCreateInput,
  MissionIdInput,
  MissionListInput,
  MissionReportInput,
  type MissionService,
  type MissionSummary,
  MissionUpdateInput,
  type MissionView,
} from "../mission/mod.ts";
import { TermadaError } from "../shared/mod.ts";
import type { ToolContext, ToolDef } from "./tools.ts";

function missions(c: ToolContext): MissionService {
  if (!c.missions) {
    throw new TermadaError("NOT_SUPPORTED", "Missions are not available on this server");
  }
  return c.missions;
}

const Progress = z.object({
  total: z.number(),
  passed: z.number(),
  failed: z.number(),
  skipped: z.number(),
  running: z.number(),
  pending: z.number(),
});

const MissionOut = z.looseObject({
  mission_id: z.string(),
  title: z.string(),
  goal: z.string(),
  status: z.string(),
  owner: z.string(),
  session_id: z.string().nullable(),
  sessions: z.array(z.looseObject({ session_id: z.string(), attempt: z.number() })),
  steps: z.array(z.looseObject({
    step_id: z.string(),
    text: z.string(),
    status: z.string(),
    verified: z.boolean(),
    job_id: z.string().optional(),
  })),
  progress: Progress,
  pending_approvals: z.array(z.looseObject({ approval_id: z.string(), job_id: z.string() })),
  timeline: z.array(z.looseObject({ seq: z.number(), event: z.string(), summary: z.string() })),
});

const MARK: Record<string, string> = {
  passed: "✔",
  failed: "✘",
  skipped: "–",
  running: "…",
  pending: " ",
};

function renderMission(r: Record<string, unknown>): string {
  const m = r as unknown as MissionView;
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

const missionTool = (
  name: string,
  title: string,
  description: string,
  input: z.ZodType,
  run: (s: MissionService, c: ToolContext, args: unknown) => MissionView | Promise<MissionView>,
  annotations?: ToolDef["annotations"],
): ToolDef => ({
  name,
  title,
  description,
  input,
  output: MissionOut,
  annotations,
  run: async (c, a) => ({ ...(await run(missions(c), c, a)) }),
  render: renderMission,
});

export const MISSION_TOOLS: readonly ToolDef[] = [
  missionTool(
    "mission_create",
    "Start a mission",
    "Start a mission for a concrete operational goal: `goal`, a `plan` of 1–24 short steps. You get a dedicated session (`session_id`): run every step's commands there with exec_run {session}, then mark each step with mission_update {step_id, step_status: passed, job_id} — the runtime checks that the job ran in the mission's session and exited 0. Finish with mission_update {status: succeeded, summary} and mission_report.",
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
  {
    name: "mission_list",
    title: "List missions",
    description:
      "Your missions, newest first; `status` filters (planned, running, needs_attention, interrupted, succeeded, failed, cancelled).",
    input: MissionListInput,
    output: z.object({
      missions: z.array(z.looseObject({
        mission_id: z.string(),
        title: z.string(),
        status: z.string(),
        progress: Progress,
      })),
    }),
    run: (c, a) => Promise.resolve({ ...missions(c).list(c.agent, a) }),
    render: (r) => {
      const list = r.missions as MissionSummary[];
      if (list.length === 0) return "no missions";
      return list.map((m) =>
        `${m.mission_id} · ${m.status} · ${m.progress.passed}/${m.progress.total} · ${m.title}`
      ).join("\n");
    },
    annotations: { readOnlyHint: true },
  },
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
  {
    name: "mission_report",
    title: "Evidence report",
    description:
      "The mission's evidence report as Markdown (runtime observations apart from your claims: plan with each step's evidence job, timeline, audit anchors) plus the same evidence as JSON. Its SHA-256 is recorded in the audit log.",
    input: MissionReportInput,
    output: z.object({
      mission_id: z.string(),
      sha256: z.string(),
      evidence_sha256: z.string(),
      audit_seq: z.number().nullable(),
      format: z.enum(["markdown", "json"]),
      markdown: z.string(),
      evidence: z.looseObject({ schema: z.string() }),
    }),
    run: (c, a) => {
      const r = missions(c).report(c.agent, a);
      const format = (a as { format?: string }).format === "json" ? "json" : "markdown";
      return Promise.resolve({ ...r, format, evidence: { ...r.evidence } });
    },
    render: (r) =>
      (r as { format?: string }).format === "json"
        ? JSON.stringify(r.evidence, null, 2)
        : `report ${r.mission_id} · sha256 ${r.sha256} · audit #${r.audit_seq}\n\n${r.markdown}`,
    annotations: { readOnlyHint: false },
  },
];
