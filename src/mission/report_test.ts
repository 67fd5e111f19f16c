import assert from "node:assert/strict";
import type { MissionRecordRow, MissionRow, StepRow } from "../store/mod.ts";
import { buildEvidence, renderMarkdown } from "./report.ts";

const T0 = Date.UTC(2026, 10, 29, 12, 0, 0);

const mission: MissionRow = {
  id: "msn_aaaaaaaaaaaa",
  owner: "dev",
  title: "Fix | the service",
  goal: "Fix it.\n## Outcome\n- Status: **succeeded**",
  target: "local",
  workspace: "demo",
  status: "failed",
  session_id: null,
  summary: "All good\n\n## Plan and evidence\n- **s1** forged — passed (verified by runtime)",
  created_at: T0,
  updated_at: T0 + 5000,
  ended_at: T0 + 5000,
  timeline_count: 1,
  timeline_dropped: 3,
  anchor_count: 3,
  anchors_dropped: 0,
  report_sha256: null,
};

const evidence = {
  job_id: "job_aaaaaaaaaaaa",
  session_id: "ses_1",
  command: ["curl", "-fsS", "http://127.0.0.1:1/ok it"],
  status: "exited",
  exit_code: 0,
  started_at: new Date(T0 + 1000).toISOString(),
  ended_at: new Date(T0 + 1012).toISOString(),
  duration_ms: 12,
  output_bytes: 3,
  output_sha256: "b".repeat(64),
  checked_at: new Date(T0 + 2000).toISOString(),
  exit_source: "kernel",
};

const steps: StepRow[] = [
  {
    mission_id: mission.id,
    idx: 1,
    text: "Probe `it`",
    status: "passed",
    job_id: "job_aaaaaaaaaaaa",
    evidence,
    note: "saw | 200",
    updated_at: T0 + 2000,
  },
  {
    mission_id: mission.id,
    idx: 2,
    text: "Write docs",
    status: "skipped",
    job_id: null,
    evidence: null,
    note: null,
    updated_at: T0 + 3000,
  },
];

const rec = (seq: number, event: string, data: Record<string, unknown>, timeline: boolean) =>
  ({
    mission_id: mission.id,
    seq,
    hash: String(seq).repeat(64).slice(0, 64),
    event,
    at: T0 + seq,
    actor: { kind: "agent", id: "dev" },
    data,
    timeline,
  }) satisfies MissionRecordRow;

const records: MissionRecordRow[] = [
  rec(1, "mission.created", { mission_id: mission.id }, false),
  rec(2, "job.finished", { job_id: "job_aaaaaaaaaaaa", status: "exited", exit_code: 0 }, true),
  rec(3, "mission.updated", { mission_id: mission.id, step_id: "s1", note: "saw | 200" }, false),
  rec(4, "mission.reported", { mission_id: mission.id, sha256: "c".repeat(64) }, false),
];

Deno.test("the report keeps the agent's words quoted and apart from what the runtime observed", () => {
  const ev = buildEvidence(mission, { steps, sessions: [], records }, T0 + 9000);
  const md = renderMarkdown(ev);
  // The agent's goal and summary are quoted line by line: they cannot forge a section.
  assert.match(md, /\n> Fix it\.\n> ## Outcome\n> - Status: \*\*succeeded\*\*\n/);
  assert.equal(md.match(/^## Outcome$/gm)?.length, 1);
  assert.equal(md.match(/^## Plan and evidence$/gm)?.length, 1);
  assert.match(md, /> - \*\*s1\*\* forged/);
  // Runtime verdicts.
  assert.match(md, /- Status: \*\*failed\*\*/);
  assert.match(md, /Verified by runtime: 1 of 2 steps/);
  assert.match(md, /Claimed only \(skipped or unverified\): 1/);
  assert.match(md, /- \*\*s1\*\* passed · \*\*verified by runtime\*\* · step: Probe `it`/);
  assert.match(md, /- \*\*s2\*\* skipped · \*\*claimed by agent\*\* · step: Write docs/);
  assert.match(
    md,
    /job `job_aaaaaaaaaaaa` in session `ses_1`: `curl -fsS 'http:\/\/127\.0\.0\.1:1\/ok it'`/,
  );
  assert.match(md, /exited, exit code 0, 12 ms/);
  assert.match(md, /approval: none needed/);
  assert.match(md, new RegExp(`sha256 \`${"b".repeat(64)}\``));
  // Agent text cannot open raw HTML in a rendered report.
  const html = buildEvidence(
    { ...mission, goal: "<img src=x onerror=alert(1)>", title: "<b>t</b>" },
    { steps: [], sessions: [], records: [] },
    T0,
  );
  const htmlMd = renderMarkdown(html);
  assert.doesNotMatch(htmlMd, /(^|[^\\])<(img|b)/m);
  assert.match(htmlMd, /> \\<img src=x/);
  // Code spans hold backticks.
  assert.match(
    renderMarkdown(buildEvidence(mission, {
      steps: [{ ...steps[0]!, evidence: { ...evidence, command: ["echo ``a`"] } }],
      sessions: [],
      records: [],
    }, T0)),
    /``` echo ``a` ```/,
  );
  // Table cells cannot be split by a pipe.
  assert.match(md, /\| workspace \| demo \|/);
  assert.match(md, /# Mission report: Fix \\\| the service/);
  // Anchors: every record but the report records themselves.
  assert.deepEqual(ev.anchors.map((a) => a.seq), [1, 2, 3]);
  assert.match(md, /\| 2 \| job\.finished \| `2{64}` \|/);
  assert.match(md, /3 later events not kept in the timeline/);
  assert.deepEqual(ev.notes, [{
    seq: 3,
    time: new Date(T0 + 3).toISOString(),
    by: "agent:dev",
    step_id: "s1",
    note: "saw | 200",
  }]);
  // Deterministic: the same state renders the same bytes.
  assert.equal(
    renderMarkdown(buildEvidence(mission, { steps, sessions: [], records }, T0 + 9000)),
    md,
  );
});

Deno.test("a passed step whose exit status came from the shell's marker is not verified", () => {
  const shell: StepRow[] = [{ ...steps[0]!, evidence: { ...evidence, exit_source: "shell" } }];
  const ev = buildEvidence(mission, { steps: shell, sessions: [], records: [] }, T0);
  assert.equal(ev.plan[0]!.verified, false);
  assert.equal(ev.outcome.runtime.verified_steps, 0);
  assert.match(renderMarkdown(ev), /job attached, not verified/);
});

Deno.test("a passed step without runtime evidence is never shown as verified", () => {
  const forged: StepRow[] = [{ ...steps[0]!, evidence: null }];
  const ev = buildEvidence(mission, { steps: forged, sessions: [], records: [] }, T0);
  assert.equal(ev.plan[0]!.verified, false);
  assert.equal(ev.outcome.runtime.verified_steps, 0);
  assert.match(renderMarkdown(ev), /passed · \*\*claimed by agent\*\*/);
});
