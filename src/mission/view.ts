/**
 * The JSON shapes of a mission as agents and operators see them (docs/MISSION.md), built from
 * the store's rows. Times are ISO-8601.
 */
import type { MissionRecordRow, MissionRow, MissionSessionRow, StepRow } from "../store/mod.ts";
import type {
  AdapterEvidence,
  JobEvidence,
  MissionSummary,
  MissionView,
  PendingView,
  Progress,
  StepStatus,
  StepView,
  TimelineEntry,
} from "../wire/mod.ts";

export type {
  AdapterEvidence,
  ApprovalEvidence,
  JobEvidence,
  MissionSummary,
  MissionView,
  PendingView,
  Progress,
  StepView,
  TimelineEntry,
} from "../wire/mod.ts";

export const iso = (ms: number): string => new Date(ms).toISOString();

export function stepId(idx: number): string {
  return `s${idx}`;
}

/** An adapter run's evidence (a job's has no `kind`). */
export function isAdapterEvidence(e: JobEvidence | AdapterEvidence): e is AdapterEvidence {
  return (e as { kind?: string }).kind === "adapter";
}

/** Evidence the runtime itself observed: the kernel's exit status, or a verified adapter run. */
function verifiedEvidence(e: Record<string, unknown>): boolean {
  return e.kind === "adapter" ? e.phase === "verified" : e.exit_source === "kernel";
}

export function stepView(s: StepRow): StepView {
  const v: StepView = {
    step_id: stepId(s.idx),
    index: s.idx,
    text: s.text,
    status: s.status,
    verified: s.status === "passed" && s.evidence !== null && verifiedEvidence(s.evidence),
    updated_at: iso(s.updated_at),
  };
  if (s.job_id !== null) v.job_id = s.job_id;
  if (s.note !== null) v.note = s.note;
  if (s.evidence !== null) {
    v.evidence = s.evidence as unknown as JobEvidence | AdapterEvidence;
    if (isAdapterEvidence(v.evidence)) v.adapter_run_id = v.evidence.run_id;
  }
  return v;
}

export function progressOf(steps: readonly { status: StepStatus }[]): Progress {
  const p: Progress = {
    total: steps.length,
    passed: 0,
    failed: 0,
    skipped: 0,
    running: 0,
    pending: 0,
  };
  for (const s of steps) p[s.status]++;
  return p;
}

const short = (v: unknown, max = 160): string => {
  const s = Array.isArray(v) ? v.join(" ") : String(v ?? "");
  return s.length > max ? s.slice(0, max - 1) + "…" : s;
};

/** One line a person reads for a runtime event of the mission. */
export function summarize(event: string, d: Record<string, unknown>): string {
  const job = d.job_id ? String(d.job_id) : "";
  switch (event) {
    case "job.requested":
      return `${job} admitted: ${short(d.command)}`;
    case "job.finished":
      return `${job} ${d.status}${d.exit_code === undefined ? "" : ` ${d.exit_code}`}${
        d.signal ? ` (${d.signal})` : ""
      } after ${d.duration_ms ?? "?"} ms, ${d.output_bytes ?? 0} bytes of output`;
    case "approval.requested":
      return `${job} waits for approval ${d.approval_id}: ${short(d.command)}`;
    case "exec.approval_requested":
      return `${job} holds ${short(d.argv)} at exec for approval ${d.approval_id}`;
    case "exec.denied":
      return `${job} stopped at exec: ${short(d.argv)} — ${
        short((d.decision as { reason?: string } | undefined)?.reason ?? "")
      }`;
    case "approval.resolved":
      return `approval ${d.approval_id} ${
        d.approved ? "approved" : d.reason === "expired" ? "expired" : "denied"
      }${d.actor_id ? ` by ${d.actor_id}` : ""}`;
    case "policy.denied":
      return `${job} denied by policy: ${
        short((d.decision as { reason?: string } | undefined)?.reason ?? "")
      }`;
    case "admission.refused":
      return `${job} refused: ${short(d.reason)}`;
    case "input.written":
      return `input typed into ${job} (${short(d.reader, 40)}): ${short(d.line, 80)}`;
    case "input.auto_answered":
      return `policy answered a prompt of ${job}`;
    case "session.created":
      return `session ${d.session_id} opened (${d.shell ?? "shell"}, ${d.cwd ?? ""})`;
    case "session.closed":
      return `session ${d.session_id} closed: ${short(d.reason)}`;
    case "session.takeover":
      return `operator took over session ${d.session_id}`;
    case "session.release":
      return `operator released session ${d.session_id}`;
    case "operator.input":
      return `operator typed ${d.bytes ?? "?"} bytes into ${d.session_id}`;
    case "job.killed_by_operator":
      return `operator killed ${job}`;
    case "mission.status":
      return `status ${d.from} → ${d.to}${d.reason ? `: ${short(d.reason)}` : ""}`;
    case "mission.resumed":
      return `resumed in a fresh session ${d.session_id} (attempt ${d.attempt}); nothing of the old terminal state carried over`;
    default:
      return event;
  }
}

export function timelineEntry(r: MissionRecordRow): TimelineEntry {
  const actor = r.actor;
  return {
    seq: r.seq,
    time: iso(r.at),
    event: r.event,
    actor,
    summary: summarize(r.event, { ...r.data, actor_id: `${actor.kind}:${actor.id}` }),
    data: r.data,
  };
}

export function sessionViews(rows: readonly MissionSessionRow[]): MissionView["sessions"] {
  return rows.map((s) => ({
    session_id: s.session_id,
    attempt: s.attempt,
    started_at: iso(s.started_at),
    ...(s.ended_at === null ? {} : { ended_at: iso(s.ended_at) }),
    ...(s.end_reason === null ? {} : { end_reason: s.end_reason }),
  }));
}

export function missionView(
  m: MissionRow,
  parts: {
    steps: StepRow[];
    sessions: MissionSessionRow[];
    pending: PendingView[];
    timeline: MissionRecordRow[];
  },
): MissionView {
  const v: MissionView = {
    mission_id: m.id,
    title: m.title,
    goal: m.goal,
    target: m.target,
    workspace: m.workspace,
    status: m.status,
    owner: m.owner,
    session_id: m.session_id,
    sessions: sessionViews(parts.sessions),
    steps: parts.steps.map(stepView),
    progress: progressOf(parts.steps),
    pending_approvals: parts.pending,
    created_at: iso(m.created_at),
    updated_at: iso(m.updated_at),
    timeline: parts.timeline.map(timelineEntry),
    timeline_total: m.timeline_count,
    timeline_dropped: m.timeline_dropped,
    anchors_dropped: m.anchors_dropped,
  };
  if (m.summary !== null) v.summary = m.summary;
  if (m.ended_at !== null) v.ended_at = iso(m.ended_at);
  if (m.report_sha256 !== null) v.report_sha256 = m.report_sha256;
  return v;
}

export function missionSummary(
  m: MissionRow,
  steps: readonly StepRow[],
  pending: number,
): MissionSummary {
  return {
    mission_id: m.id,
    title: m.title,
    status: m.status,
    owner: m.owner,
    session_id: m.session_id,
    progress: progressOf(steps),
    pending_approvals: pending,
    created_at: iso(m.created_at),
    updated_at: iso(m.updated_at),
  };
}
