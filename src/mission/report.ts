/**
 * The evidence report: one JSON document of what the runtime observed (and, kept apart, what the
 * agent claimed), and its Markdown rendering. Pure functions of the stored mission: the same
 * inputs give the same bytes.
 */
import { argvToScript } from "../shell/mod.ts";
import type { MissionRecordRow, MissionRow, MissionSessionRow, StepRow } from "../store/mod.ts";
import type { Evidence } from "../wire/mod.ts";
import {
  type AdapterEvidence,
  isAdapterEvidence,
  iso,
  type JobEvidence,
  progressOf,
  sessionViews,
  stepView,
  timelineEntry,
} from "./view.ts";

export const EVIDENCE_SCHEMA = "termada.mission.evidence/1";

export type { Evidence };

/** Events that describe reports, not the mission's work: not anchors of the next report. */
const NOT_ANCHORED = new Set(["mission.reported"]);

export function buildEvidence(
  m: MissionRow,
  parts: { steps: StepRow[]; sessions: MissionSessionRow[]; records: MissionRecordRow[] },
  now: number,
): Evidence {
  const plan = parts.steps.map(stepView);
  const progress = progressOf(parts.steps);
  const verified = plan.filter((s) => s.verified).length;
  const claimedOnly =
    plan.filter((s) => (s.status === "passed" && !s.verified) || s.status === "skipped").length;
  const anchored = parts.records.filter((r) => !NOT_ANCHORED.has(r.event));
  const notes: Evidence["notes"] = [];
  for (const r of anchored) {
    if (r.event !== "mission.updated" || typeof r.data.note !== "string") continue;
    notes.push({
      seq: r.seq,
      time: iso(r.at),
      by: `${r.actor.kind}:${r.actor.id}`,
      ...(typeof r.data.step_id === "string" ? { step_id: r.data.step_id } : {}),
      note: r.data.note,
    });
  }
  return {
    schema: EVIDENCE_SCHEMA,
    generated_at: iso(now),
    mission: {
      mission_id: m.id,
      title: m.title,
      owner: m.owner,
      target: m.target,
      workspace: m.workspace,
      status: m.status,
      created_at: iso(m.created_at),
      ...(m.ended_at === null ? {} : { ended_at: iso(m.ended_at) }),
      sessions: sessionViews(parts.sessions),
    },
    goal: m.goal,
    outcome: {
      status: m.status,
      runtime: { verified_steps: verified, claimed_only_steps: claimedOnly, progress },
      ...(m.summary === null ? {} : { agent_summary: m.summary }),
    },
    plan,
    timeline: anchored.filter((r) => r.timeline).map(timelineEntry),
    timeline_dropped: m.timeline_dropped,
    anchors: anchored.map((r) => ({ seq: r.seq, hash: r.hash, event: r.event, time: iso(r.at) })),
    anchors_dropped: m.anchors_dropped,
    notes,
  };
}

/**
 * Agent-written text in a line or a table cell: it cannot split a cell (|), open raw HTML (<),
 * or break the line. Backslash escapes keep it readable as plain text too.
 */
function cell(s: string): string {
  return s.replace(/[\\|<]/g, (c) => `\\${c}`).replace(/[\r\n]+/g, " ");
}

/** An inline code span that holds any text: its fence is longer than any backtick run inside. */
function code(s: string): string {
  const t = s.replace(/[\r\n]+/g, " ");
  const longest = Math.max(0, ...(t.match(/`+/g) ?? []).map((r) => r.length));
  const fence = "`".repeat(longest + 1);
  const pad = longest > 0 || t.startsWith(" ") ? " " : "";
  return `${fence}${pad}${t}${pad}${fence}`;
}

/** A quoted block of the agent's own words (each line prefixed, so nothing renders as ours). */
function quote(s: string): string {
  return s.split(/\r?\n/).map((l) => `> ${l.replace(/</g, "\\<")}`).join("\n");
}

function evidenceLines(e: JobEvidence | AdapterEvidence): string[] {
  if (isAdapterEvidence(e)) {
    return [
      `  - adapter run ${code(e.run_id)} (${code(e.adapter)}) on ${code(e.resource)}: ${
        cell(e.summary)
      }`,
      `  - ${e.phase}${e.phase === "verified" ? " (its effect observed by the runtime)" : ""}, ` +
      `receipt sha256 ${
        e.receipt_sha256 ? code(e.receipt_sha256) : "none"
      } (${e.created_at} → ${e.updated_at})`,
    ];
  }
  const lines = [
    `  - job ${code(e.job_id)} in session ${code(e.session_id)}: ${code(argvToScript(e.command))}`,
    `  - ${e.status}${e.exit_code === undefined ? "" : `, exit code ${e.exit_code}`}${
      e.signal ? `, signal ${e.signal}` : ""
    }, ${e.duration_ms} ms (${e.started_at} → ${e.ended_at ?? "not ended"})`,
  ];
  if (e.approval) {
    const a = e.approval;
    lines.push(
      `  - approval ${code(a.approval_id)}: ${a.status}${
        a.decided_by ? ` by ${code(a.decided_by)}` : ""
      }${a.decided_at ? ` at ${a.decided_at}` : ""}${a.rule ? ` (rule ${code(a.rule)})` : ""}`,
    );
  } else {
    lines.push("  - approval: none needed (allowed by policy)");
  }
  lines.push(
    `  - output: ${e.output_bytes} bytes, sha256 ${
      e.output_sha256 ? code(e.output_sha256) : "not recorded"
    }`,
  );
  return lines;
}

export function renderMarkdown(ev: Evidence): string {
  const m = ev.mission;
  const out: string[] = [];
  out.push(`# Mission report: ${cell(m.title)}`, "");
  out.push(
    `Generated by Termada at ${ev.generated_at}. Everything below is what the runtime observed,`,
    "except the sections marked **claimed by the agent**.",
    "",
  );
  out.push("## Mission", "");
  out.push("| | |", "|---|---|");
  out.push(`| id | ${code(m.mission_id)} |`);
  out.push(`| agent | ${code(m.owner)} |`);
  out.push(`| target | ${cell(m.target)} |`);
  out.push(`| workspace | ${cell(m.workspace)} |`);
  out.push(`| status | **${m.status}** |`);
  out.push(`| created | ${m.created_at} |`);
  if (m.ended_at) out.push(`| ended | ${m.ended_at} |`);
  out.push("");
  out.push("Session attempts:", "");
  for (const s of m.sessions) {
    out.push(
      `- attempt ${s.attempt}: ${code(s.session_id)} from ${s.started_at}${
        s.ended_at ? ` to ${s.ended_at}` : " (open)"
      }${s.end_reason ? ` — ${cell(s.end_reason)}` : ""}`,
    );
  }
  if (m.sessions.length > 1) {
    out.push(
      "",
      "Each attempt after the first started in a fresh shell: no terminal state of an earlier attempt carried over.",
    );
  }
  out.push("", "## Goal (stated by the agent)", "", quote(ev.goal), "");
  const r = ev.outcome.runtime;
  out.push("## Outcome", "");
  out.push(
    `- Status: **${ev.outcome.status}**`,
    `- Verified by runtime: ${r.verified_steps} of ${r.progress.total} steps (a job in a mission session that exited 0, its exit status reported by the kernel to the daemon, or an adapter run whose effect the runtime observed)`,
    `- Claimed only (skipped or unverified): ${r.claimed_only_steps}`,
    `- Steps: ${r.progress.passed} passed, ${r.progress.failed} failed, ${r.progress.skipped} skipped, ${r.progress.running} running, ${r.progress.pending} pending`,
  );
  if (ev.outcome.agent_summary !== undefined) {
    out.push("", "Summary, **claimed by the agent**:", "", quote(ev.outcome.agent_summary));
  }
  out.push("", "## Plan and evidence", "");
  for (const s of ev.plan) {
    const mark = s.verified
      ? "verified by runtime"
      : s.status === "passed" && s.evidence
      ? "job attached, not verified (its exit status came from the shell's marker)"
      : s.status === "passed" || s.status === "skipped"
      ? "claimed by agent"
      : s.evidence
      ? "job attached"
      : "no evidence";
    // The runtime's verdict comes first; the agent's wording of the step after it.
    out.push(`- **${s.step_id}** ${s.status} · **${mark}** · step: ${cell(s.text)}`);
    if (s.evidence) out.push(...evidenceLines(s.evidence));
    if (s.note !== undefined) out.push(`  - note, claimed by the agent: ${cell(s.note)}`);
  }
  out.push("", "## Runtime timeline", "");
  if (ev.timeline.length === 0) out.push("(nothing happened yet)");
  for (const t of ev.timeline) {
    out.push(`- ${t.time} · #${t.seq} · ${code(t.event)} · ${cell(t.summary)}`);
  }
  if (ev.timeline_dropped > 0) {
    out.push(`- … ${ev.timeline_dropped} later events not kept in the timeline (bound reached)`);
  }
  out.push("", "## Audit anchors", "");
  out.push(
    "Every audit record of this mission (`seq`, `hash`): check them against the audit log with",
    "`termada audit verify` and the records of the same seq.",
    "",
    "| seq | event | hash |",
    "|---:|---|---|",
  );
  for (const a of ev.anchors) out.push(`| ${a.seq} | ${a.event} | ${code(a.hash)} |`);
  if (ev.anchors_dropped > 0) {
    out.push("", `${ev.anchors_dropped} later records were not anchored (bound reached).`);
  }
  out.push("", "## Notes (claims, not observations)", "");
  if (ev.notes.length === 0) out.push("(none)");
  for (const n of ev.notes) {
    out.push(
      `- #${n.seq} ${n.time} ${code(n.by)}${n.step_id ? ` on ${n.step_id}` : ""}: ${cell(n.note)}`,
    );
  }
  out.push("");
  return out.join("\n");
}
