import assert from "node:assert/strict";
import type { DaemonStatus, OperatorJob, OperatorSession, PendingApproval } from "../wire/mod.ts";
import {
  ACTIVITY_LINES,
  affected,
  allocate,
  applyProgress,
  describe,
  handleKey,
  newState,
  plainSnapshot,
  quietRates,
  render,
  selectedJob,
  setList,
  type TopData,
  windowOf,
} from "./top.ts";
import { fit, formatBytes, layout, parseKeys, Ring, SseParser } from "./_tui.ts";

const NOW = Date.parse("2026-05-01T12:00:00Z");
const STATUS = {
  version: "0.1.0",
  pid: 4242,
  sessions: 1,
  pending_approvals: 1,
  stopped: false,
  audit_healthy: true,
  boundary: {},
} as unknown as DaemonStatus;

function job(id: string, over: Partial<OperatorJob> = {}): OperatorJob {
  return {
    job_id: id,
    session_id: "ses_000000000001",
    command: ["sleep", "30"],
    mode: "background",
    status: "running",
    started_at: "2026-05-01T11:59:00Z",
    duration_ms: 60_000,
    owner: "ci",
    ...over,
  };
}

function approval(id: string, command = ["touch", "/tmp/x"]): PendingApproval {
  return {
    approval_id: id,
    job_id: "job_000000000009",
    owner: "dev",
    session_id: "ses_000000000001",
    command,
    mode: "foreground",
    requested_at: "2026-05-01T11:59:30Z",
    expires_at: "2026-05-01T12:01:00Z",
  };
}

const SESSION = {
  session_id: "ses_000000000001",
  target: "local",
  shell: "bash",
  cwd: "/home/dev/project",
  state: "busy",
  current_job_id: "job_000000000001",
  cols: 80,
  rows: 24,
  created_at: "2026-05-01T11:00:00Z",
  owner: "ci",
} as OperatorSession;

function data(over: Partial<TopData> = {}): TopData {
  return {
    status: STATUS,
    sessions: [SESSION],
    jobs: [job("job_000000000001")],
    approvals: [approval("apr_000000000001")],
    ...over,
  };
}

const width = (line: string) => [...line].length;

Deno.test("render fills 80x24 exactly, one line per row, nothing wider than the screen", () => {
  const s = newState(data(), NOW);
  const lines = render(s, 80, 24);
  assert.equal(lines.length, 24);
  for (const l of lines) assert.equal(width(l), 80, JSON.stringify(l));
  const text = lines.join("\n");
  assert.match(text, /JOBS 1/);
  assert.match(text, /> +job_000000000001 +ci +running +1m0s/);
  assert.match(text, /APPROVALS 1/);
  assert.match(text, /apr_000000000001 +dev +30s +1m0s +touch \/tmp\/x/);
  assert.match(text, /ses_000000000001 +ci +busy +job_000000000001 +\/home\/dev\/project/);
  assert.match(lines[0]!, /^termada top {2}0\.1\.0 pid 4242/);
  assert.match(lines[23]!, /^q quit/);
});

Deno.test("a long command is cut with … and narrow screens drop columns instead of wrapping", () => {
  const long = job("job_000000000002", { command: ["bash", "-c", "x".repeat(300)] });
  const s = newState(data({ jobs: [long] }), NOW);
  for (const w of [80, 60, 40, 24]) {
    const lines = render(s, w, 24);
    assert.equal(lines.length, 24);
    for (const l of lines) assert.equal(width(l), w, `width ${w}: ${JSON.stringify(l)}`);
    const row = lines.find((l) => l.includes("job_000000000002"))!;
    assert.ok(row.endsWith("…"), row);
  }
  const narrow = render(s, 40, 24).find((l) => l.includes("job_000000000002"))!;
  assert.doesNotMatch(narrow, / ci /, "AGENT is dropped at 40 columns");
});

Deno.test("the duration of a running job grows with the clock; a pending one waits", () => {
  const s = newState(data(), NOW);
  s.now = NOW + 5000;
  assert.match(render(s, 80, 24).join("\n"), /running +1m5s/);
  s.jobs = [job("job_000000000003", { status: "pending_approval", duration_ms: 0 })];
  assert.match(render(s, 80, 24).join("\n"), /approval +0s/);
});

Deno.test("the rate column: … until known, bytes/s from jobs.output samples, 0 when quiet, - when not running", () => {
  const s = newState(
    data({ jobs: [job("job_a"), job("job_c"), job("job_b", { status: "exited" })] }),
    NOW,
  );
  assert.match(render(s, 80, 24).join("\n"), /job_a .*running +1m0s +…/);
  applyProgress(s, [{ job_id: "job_a", output_bytes: 1000 }], NOW + 1000);
  assert.match(render(s, 80, 24).join("\n"), /job_a .*running +1m0s +…/, "one sample: not yet");
  applyProgress(s, [{ job_id: "job_a", output_bytes: 1000 + 2048 }], NOW + 2000);
  assert.match(render(s, 80, 24).join("\n"), /job_a .*2\.0K\/s/);
  quietRates(s, NOW + 3000);
  assert.match(render(s, 80, 24).join("\n"), /job_c .*0B\/s/, "quiet since top opened");
  assert.match(render(s, 80, 24).join("\n"), /job_a .*2\.0K\/s/, "a recent sample stands");
  quietRates(s, NOW + 5000);
  assert.match(render(s, 80, 24).join("\n"), /job_a .*0B\/s/, "no event since: quiet");
  assert.match(render(s, 80, 24).join("\n"), /job_b .*exited +1m0s +-/);
});

Deno.test("a list longer than its pane scrolls with the selection and says +N more", () => {
  const jobs = Array.from({ length: 30 }, (_, i) => job(`job_${String(i).padStart(12, "0")}`));
  const s = newState(data({ jobs }), NOW);
  let text = render(s, 80, 24).join("\n");
  assert.match(text, /… \+\d+ more/);
  for (let i = 0; i < 29; i++) handleKey(s, "down", NOW);
  const selected = selectedJob(s)!.job_id;
  text = render(s, 80, 24).join("\n");
  assert.match(text, new RegExp(`> +${selected}`));
  assert.deepEqual(windowOf(30, 5, 29), { start: 26, shown: 4, more: 26 });
  assert.deepEqual(windowOf(3, 5, 0), { start: 0, shown: 3, more: 0 });
});

Deno.test("allocate keeps every pane on screen and gives the activity what the lists leave", () => {
  assert.deepEqual(allocate(22, [1, 0, 1, 50]), [1, 1, 1, 15]);
  const big = allocate(22, [100, 100, 100, 100]);
  assert.equal(big.reduce((a, b) => a + b, 0) + 4, 22);
  assert.ok(big.every((r) => r >= 1));
  // A tiny screen still renders the requested height.
  assert.equal(render(newState(data(), NOW), 30, 6).length, 6);
});

Deno.test("keys: Tab switches panes, j/k move, K kills a running job, a approves, q quits", () => {
  const s = newState(data({ jobs: [job("job_a"), job("job_b")] }), NOW);
  assert.equal(s.focus, "jobs");
  handleKey(s, { char: "j" }, NOW);
  assert.equal(selectedJob(s)!.job_id, "job_b");
  handleKey(s, { char: "j" }, NOW);
  assert.equal(selectedJob(s)!.job_id, "job_b", "stays on the last");
  handleKey(s, { char: "k" }, NOW);
  assert.deepEqual(handleKey(s, { char: "K" }, NOW), { kind: "kill", jobId: "job_a" });
  assert.deepEqual(handleKey(s, { char: "x" }, NOW), { kind: "kill", jobId: "job_a" });
  handleKey(s, "tab", NOW);
  assert.equal(s.focus, "approvals");
  assert.match(render(s, 80, 24).join("\n"), /▸ +APPROVALS 1/);
  assert.deepEqual(handleKey(s, { char: "a" }, NOW), {
    kind: "approve",
    approvalId: "apr_000000000001",
  });
  assert.deepEqual(handleKey(s, { char: "q" }, NOW), { kind: "quit" });
  assert.deepEqual(handleKey(s, "ctrl-c", NOW), { kind: "quit" });
});

Deno.test("K on a finished job says so instead of killing", () => {
  const s = newState(data({ jobs: [job("job_a", { status: "exited", exit_code: 0 })] }), NOW);
  assert.equal(handleKey(s, { char: "K" }, NOW), undefined);
  assert.match(render(s, 80, 24).at(-1)!, /job_a has already ended \(exited\)/);
});

Deno.test("d asks a reason on the bottom line; Enter denies with it or with the default", () => {
  const s = newState(data(), NOW);
  assert.equal(handleKey(s, { char: "d" }, NOW), undefined);
  assert.match(render(s, 80, 24).at(-1)!, /^Deny apr_000000000001, reason/);
  for (const c of "nop") handleKey(s, { char: c }, NOW);
  handleKey(s, "backspace", NOW);
  handleKey(s, { char: "q" }, NOW); // typed into the reason, not quitting
  assert.match(render(s, 80, 24).at(-1)!, /noq_ *$/);
  assert.deepEqual(handleKey(s, "enter", NOW), {
    kind: "deny",
    approvalId: "apr_000000000001",
    reason: "noq",
  });
  handleKey(s, { char: "d" }, NOW);
  const a = handleKey(s, "enter", NOW);
  assert.equal(a?.kind === "deny" && a.reason, "Denied from termada top");
  handleKey(s, { char: "d" }, NOW);
  assert.equal(handleKey(s, "escape", NOW), undefined);
  assert.equal(s.prompt, undefined);
});

Deno.test("S asks y/N: only y stops all", () => {
  const s = newState(data(), NOW);
  handleKey(s, { char: "S" }, NOW);
  assert.match(render(s, 80, 24).at(-1)!, /\[y\/N\]/);
  assert.equal(handleKey(s, "enter", NOW), undefined);
  assert.match(render(s, 80, 24).at(-1)!, /Stop all cancelled/);
  handleKey(s, { char: "S" }, NOW);
  assert.deepEqual(handleKey(s, { char: "y" }, NOW), { kind: "stop" });
});

Deno.test("a and d with no approval pending only say so", () => {
  const s = newState(data({ approvals: [] }), NOW);
  assert.equal(handleKey(s, { char: "a" }, NOW), undefined);
  assert.equal(handleKey(s, { char: "d" }, NOW), undefined);
  assert.equal(s.prompt, undefined);
  assert.match(render(s, 80, 24).join("\n"), /No approvals pending/);
});

Deno.test("a re-fetched list keeps the selection on the same item", () => {
  const s = newState(data({ jobs: [job("job_a"), job("job_b")] }), NOW);
  handleKey(s, "down", NOW);
  assert.equal(selectedJob(s)!.job_id, "job_b");
  const newer = job("job_c", { started_at: "2026-05-01T11:59:59Z" });
  setList(s, "jobs", [job("job_a"), job("job_b"), newer], NOW);
  assert.equal(selectedJob(s)!.job_id, "job_b");
  setList(s, "jobs", [job("job_a")], NOW);
  assert.equal(selectedJob(s)!.job_id, "job_a", "clamped when it is gone");
});

Deno.test("active jobs list first, then finished ones, newest first", () => {
  const s = newState(
    data({
      jobs: [
        job("job_old_done", { status: "exited", started_at: "2026-05-01T10:00:00Z" }),
        job("job_run_old", { started_at: "2026-05-01T10:00:00Z" }),
        job("job_new_done", { status: "killed", started_at: "2026-05-01T11:00:00Z" }),
        job("job_run_new", { started_at: "2026-05-01T11:00:00Z" }),
      ],
    }),
    NOW,
  );
  assert.deepEqual(s.jobs.map((j) => j.job_id), [
    "job_run_new",
    "job_run_old",
    "job_new_done",
    "job_old_done",
  ]);
});

Deno.test("activity keeps the last lines only and shows the newest first", () => {
  const s = newState(data(), NOW);
  for (let i = 0; i < ACTIVITY_LINES + 50; i++) {
    s.activity.push(describe({ type: "job.finished", data: { job_id: `job_${i}` } }));
  }
  assert.equal(s.activity.length, ACTIVITY_LINES);
  const text = render(s, 80, 24).join("\n");
  assert.match(text, new RegExp(`job_${ACTIVITY_LINES + 49}\\b`));
  assert.doesNotMatch(text, /job_0\b/);
});

Deno.test("describe names the event, who and what", () => {
  const line = describe({
    time: "2026-05-01T12:00:00Z",
    type: "approval.requested",
    data: { actor: { id: "dev" }, approval_id: "apr_1", command: ["touch", "x"] },
  });
  assert.match(line, /^\d\d:\d\d:\d\d approval\.requested +dev apr_1 touch x$/);
  assert.match(
    describe({ type: "job.finished", data: { job_id: "job_1", status: "exited", exit_code: 2 } }),
    /job_1 exited 2$/,
  );
});

Deno.test("which lists an event re-fetches", () => {
  assert.deepEqual([...affected("job.finished")].sort(), ["jobs", "sessions"]);
  assert.deepEqual([...affected("approval.requested")].sort(), ["approvals", "jobs"]);
  assert.deepEqual([...affected("session.created")], ["sessions"]);
  assert.equal(affected("stop_all.done").size, 4);
  assert.equal(affected("resync").size, 4);
  assert.equal(affected("vault.used").size, 0);
});

Deno.test("the plain snapshot lists sessions, jobs and approvals", () => {
  const text = plainSnapshot(data(), NOW);
  assert.match(text, /^termada 0\.1\.0 {2}pid 4242 {2}admissions open$/m);
  assert.match(text, /^Sessions \(1\)\nID +AGENT +STATE +JOB +CWD\nses_000000000001 +ci +busy/m);
  assert.match(text, /^Jobs \(1\)\n.*\njob_000000000001 +ci +running +1m0s +sleep 30$/m);
  assert.match(text, /^Approvals \(1\)\n.*\napr_000000000001 +dev +30s +touch \/tmp\/x$/m);
  const empty = plainSnapshot(data({ sessions: [], jobs: [], approvals: [] }), NOW);
  assert.match(empty, /No sessions\.\n[\s\S]*No jobs\.\n[\s\S]*No approvals pending\.\n$/);
});

Deno.test("tui helpers: fit, layout, keys, SSE, ring, bytes", () => {
  assert.equal(fit("abc", 5), "abc  ");
  assert.equal(fit("abcdef", 4), "abc…");
  assert.equal(fit("a\x1bb\n", 5), "a b  ");
  assert.deepEqual(
    layout(
      [{ title: "A", max: 4 }, { title: "B", max: 9, drop: 1 }, {
        title: "C",
        max: 99,
        flex: true,
        min: 5,
      }],
      [["aaaa", "bbbbbbbbb", "c"]],
      14,
    ),
    [4, 0, 8],
  );
  assert.deepEqual(parseKeys("j\x1b[A\x1b[B\tq\x03\x1b\x1b[Z\r\x7fé"), [
    { char: "j" },
    "up",
    "down",
    "tab",
    { char: "q" },
    "ctrl-c",
    "escape",
    "backtab",
    "enter",
    "backspace",
    { char: "é" },
  ]);
  const sse = new SseParser();
  assert.deepEqual(sse.push('id: 3\nevent: job.started\ndata: {"a"'), []);
  assert.deepEqual(sse.push(":1}\n\n: keep-alive\n\nid: 4\r\ndata: x\r\n\r\n"), [
    { id: "3", event: "job.started", data: '{"a":1}' },
    { id: "4", event: "message", data: "x" },
  ]);
  const r = new Ring<number>(3);
  for (let i = 0; i < 5; i++) r.push(i);
  assert.deepEqual(r.newest(10), [4, 3, 2]);
  assert.equal(formatBytes(512), "512B");
  assert.equal(formatBytes(1536), "1.5K");
  assert.equal(formatBytes(50 * 1024 * 1024), "50M");
});
