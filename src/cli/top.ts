/**
 * `termada top`: a live full-screen view for the operator — sessions, jobs (with duration and
 * output rate), pending approvals and recent activity — with keys to kill a job, approve or
 * deny an approval and stop everything. The lists come from the operator routes once, then the
 * daemon's event stream (`GET /api/events`) says when to re-fetch one (debounced); a 1 s tick
 * only advances the duration and rate columns. Not on a terminal (or with --json) it prints one
 * snapshot and exits.
 *
 * The pure part (`TopState`, `render`, `handleKey`) has no I/O and is unit-tested; `TopRuntime`
 * owns the terminal (raw mode, alternate screen) and restores it on every exit path.
 */
import type { DaemonStatus, OperatorJob, OperatorSession, PendingApproval } from "../wire/mod.ts";
import { isActiveStatus } from "../wire/mod.ts";
import { TermadaError, toTermadaError } from "../shared/mod.ts";
import type { TermadaPaths } from "../config/mod.ts";
import { strictArgs, table } from "./_args.ts";
import { call, type OperatorContext, paths, request } from "./operator.ts";
import { formatDuration } from "./ops.ts";
import {
  type Column,
  fit,
  formatBytes,
  type Key,
  layout,
  parseKeys,
  Ring,
  SCREEN,
  SseParser,
  tableRow,
} from "./_tui.ts";

const USAGE = "Usage: termada top [--json]\n" +
  "A live full-screen view of every agent's sessions, jobs (duration, output rate), pending\n" +
  "approvals and the daemon's recent activity, redrawn from its event stream.\n" +
  "Keys: Tab/←/→ pane, ↑/↓ or j/k select, K or x kill the selected job, a approve and d deny\n" +
  "the selected approval, S stop all (asks y/N), q or Ctrl-C quit.\n" +
  "When stdout is not a terminal (or with --json) it prints one snapshot and exits.\n";

/** Jobs asked for (active ones first, then the most recent finished ones). */
const JOBS_LIMIT = 100;
/** Lines of activity kept (the newest are shown). */
export const ACTIVITY_LINES = 200;
/** A burst of events makes one re-fetch. */
const DEBOUNCE_MS = 100;
const TICK_MS = 1000;
/** A running job with no `jobs.output` event for this long writes nothing: 0 B/s. */
const QUIET_RATE_MS = 2500;
/** How long a message stays on the bottom line. */
const MESSAGE_MS = 5000;
/** How long the "stream ended" line stays before top exits. */
const ENDED_MS = 1500;
/** A stream that lasted this long and ended is resumed (at most RESUMES times). */
const RESUME_AFTER_MS = 5000;
const RESUMES = 3;
const DEFAULT_DENY_REASON = "Denied from termada top";
const MAX_REASON = 200;

// ── state ──────────────────────────────────────────────────────────────────────────────────

/** What the list routes give: one snapshot of the daemon. */
export interface TopData {
  status: DaemonStatus;
  sessions: OperatorSession[];
  jobs: OperatorJob[];
  approvals: PendingApproval[];
}

export type Pane = "jobs" | "approvals";
const PANES: readonly Pane[] = ["jobs", "approvals"];

/** A job's output rate: undefined bytes/s until two samples (or a quiet spell) tell it. */
export interface Rate {
  bytesPerSec?: number;
}

export type Prompt = { kind: "stop" } | { kind: "deny"; approvalId: string; text: string };

export interface TopState extends TopData {
  /** When `jobs` were fetched (durations of running jobs grow from there). */
  fetchedAt: number;
  now: number;
  activity: Ring<string>;
  focus: Pane;
  selected: Record<Pane, number>;
  rates: Map<string, Rate>;
  /** The last output total of each job (from `jobs.output`) and when it arrived. */
  samples: Map<string, { bytes: number; at: number }>;
  /** When this view opened (a job quiet since then writes 0 B/s). */
  openedAt: number;
  prompt?: Prompt;
  message?: { text: string; until: number };
  /** Set once the event stream ended: the reason shown before top exits. */
  ended?: string;
}

export function newState(data: TopData, now: number): TopState {
  return {
    ...data,
    jobs: ordered(data.jobs),
    fetchedAt: now,
    now,
    activity: new Ring<string>(ACTIVITY_LINES),
    focus: "jobs",
    selected: { jobs: 0, approvals: 0 },
    rates: new Map(),
    samples: new Map(),
    openedAt: now,
  };
}

/**
 * A `jobs.output` event (the daemon's 1 Hz output totals of jobs whose output grew): each job's
 * rate is the growth since its previous sample over the time between them.
 */
export function applyProgress(
  s: TopState,
  jobs: readonly { job_id: string; output_bytes: number }[],
  now: number,
): void {
  for (const j of jobs) {
    const before = s.samples.get(j.job_id);
    s.samples.set(j.job_id, { bytes: j.output_bytes, at: now });
    if (before && now > before.at && j.output_bytes >= before.bytes) {
      const bytesPerSec = Math.round((j.output_bytes - before.bytes) * 1000 / (now - before.at));
      s.rates.set(j.job_id, { bytesPerSec });
    }
  }
}

/** Running jobs with no output event for QUIET_RATE_MS write nothing: their rate is 0. */
export function quietRates(s: TopState, now: number): void {
  for (const j of s.jobs) {
    if (!isActiveStatus(j.status)) continue;
    const last = s.samples.get(j.job_id)?.at ?? s.openedAt;
    if (now - last >= QUIET_RATE_MS) s.rates.set(j.job_id, { bytesPerSec: 0 });
  }
}

/** Active jobs first (newest first), then finished ones (newest first). */
function ordered(jobs: OperatorJob[]): OperatorJob[] {
  const newest = (a: OperatorJob, b: OperatorJob) => b.started_at.localeCompare(a.started_at);
  return [
    ...jobs.filter((j) => isActiveStatus(j.status)).sort(newest),
    ...jobs.filter((j) => !isActiveStatus(j.status)).sort(newest),
  ];
}

/** Replaces one list, keeping the selection on the same item when it is still there. */
export function setList<K extends "jobs" | "approvals" | "sessions">(
  s: TopState,
  kind: K,
  items: TopData[K],
  now: number,
): void {
  if (kind === "sessions") {
    s.sessions = items as OperatorSession[];
    return;
  }
  const pane = kind as Pane;
  const before = idOf(s, pane, s.selected[pane]);
  if (pane === "jobs") {
    s.jobs = ordered(items as OperatorJob[]);
    s.fetchedAt = now;
    const active = new Set(s.jobs.filter((j) => isActiveStatus(j.status)).map((j) => j.job_id));
    for (const id of s.rates.keys()) if (!active.has(id)) s.rates.delete(id);
    for (const id of s.samples.keys()) if (!active.has(id)) s.samples.delete(id);
  } else s.approvals = items as PendingApproval[];
  const n = count(s, pane);
  const again = before === undefined ? -1 : ids(s, pane).indexOf(before);
  s.selected[pane] = again >= 0 ? again : Math.max(0, Math.min(s.selected[pane], n - 1));
}

const count = (s: TopState, pane: Pane) => pane === "jobs" ? s.jobs.length : s.approvals.length;
const ids = (s: TopState, pane: Pane) =>
  pane === "jobs" ? s.jobs.map((j) => j.job_id) : s.approvals.map((a) => a.approval_id);
const idOf = (s: TopState, pane: Pane, i: number) => ids(s, pane)[i];

export function selectedJob(s: TopState): OperatorJob | undefined {
  return s.jobs[s.selected.jobs];
}

export function selectedApproval(s: TopState): PendingApproval | undefined {
  return s.approvals[s.selected.approvals];
}

export function say(s: TopState, text: string, now: number): void {
  s.message = { text, until: now + MESSAGE_MS };
}

// ── keys ───────────────────────────────────────────────────────────────────────────────────

/** What a key asks the runtime to do (navigation and prompts change the state directly). */
export type Action =
  | { kind: "quit" }
  | { kind: "redraw" }
  | { kind: "kill"; jobId: string }
  | { kind: "approve"; approvalId: string }
  | { kind: "deny"; approvalId: string; reason: string }
  | { kind: "stop" };

/** Applies one key to the state; returns what the runtime must do, if anything. */
export function handleKey(s: TopState, key: Key, now: number): Action | undefined {
  if (s.prompt) return promptKey(s, s.prompt, key, now);
  if (key === "ctrl-c" || isChar(key, "q")) return { kind: "quit" };
  if (key === "ctrl-l") return { kind: "redraw" };
  if (key === "tab" || key === "backtab" || key === "left" || key === "right") {
    s.focus = PANES[(PANES.indexOf(s.focus) + 1) % PANES.length]!;
    return undefined;
  }
  const step = moveOf(key);
  if (step !== undefined) {
    const n = count(s, s.focus);
    s.selected[s.focus] = Math.max(0, Math.min(n - 1, s.selected[s.focus] + step));
    return undefined;
  }
  if (isChar(key, "K") || isChar(key, "x")) return killKey(s, now);
  if (isChar(key, "a") || isChar(key, "d")) {
    const a = selectedApproval(s);
    if (!a) {
      say(s, "No approval is pending", now);
      return undefined;
    }
    if (isChar(key, "a")) return { kind: "approve", approvalId: a.approval_id };
    s.prompt = { kind: "deny", approvalId: a.approval_id, text: "" };
    return undefined;
  }
  if (isChar(key, "S")) s.prompt = { kind: "stop" };
  return undefined;
}

function isChar(key: Key, c: string): boolean {
  return typeof key === "object" && key.char === c;
}

/** How far a navigation key moves the selection. */
function moveOf(key: Key): number | undefined {
  if (key === "down" || isChar(key, "j")) return 1;
  if (key === "up" || isChar(key, "k")) return -1;
  if (key === "pagedown") return 10;
  if (key === "pageup") return -10;
  if (key === "home" || isChar(key, "g")) return -Infinity;
  if (key === "end" || isChar(key, "G")) return Infinity;
  return undefined;
}

function killKey(s: TopState, now: number): Action | undefined {
  const j = selectedJob(s);
  if (!j || !isActiveStatus(j.status)) {
    say(s, j ? `${j.job_id} has already ended (${j.status})` : "No job is selected", now);
    return undefined;
  }
  return { kind: "kill", jobId: j.job_id };
}

function promptKey(s: TopState, p: Prompt, key: Key, now: number): Action | undefined {
  if (p.kind === "stop") {
    s.prompt = undefined;
    if (isChar(key, "y") || isChar(key, "Y")) return { kind: "stop" };
    say(s, "Stop all cancelled", now);
    return undefined;
  }
  if (key === "escape" || key === "ctrl-c") {
    s.prompt = undefined;
    say(s, "Deny cancelled", now);
  } else if (key === "enter") {
    s.prompt = undefined;
    return { kind: "deny", approvalId: p.approvalId, reason: p.text.trim() || DEFAULT_DENY_REASON };
  } else if (key === "backspace") p.text = [...p.text].slice(0, -1).join("");
  else if (key === "ctrl-u") p.text = "";
  else if (typeof key === "object" && p.text.length < MAX_REASON) p.text += key.char;
  return undefined;
}

// ── render ─────────────────────────────────────────────────────────────────────────────────

const JOB_COLUMNS: readonly Column[] = [
  { title: "", max: 1, min: 1 },
  { title: "ID", max: 16 },
  { title: "AGENT", max: 12, drop: 2 },
  { title: "STATE", max: 10 },
  { title: "DUR", max: 6, drop: 3 },
  { title: "RATE", max: 7, drop: 1 },
  { title: "COMMAND", max: 1000, flex: true, min: 12 },
];
const APPROVAL_COLUMNS: readonly Column[] = [
  { title: "", max: 1, min: 1 },
  { title: "ID", max: 16 },
  { title: "AGENT", max: 12, drop: 2 },
  { title: "WAITED", max: 6, drop: 1 },
  { title: "LEFT", max: 6, drop: 3 },
  { title: "COMMAND", max: 1000, flex: true, min: 12 },
];
const SESSION_COLUMNS: readonly Column[] = [
  { title: "", max: 1, min: 1 },
  { title: "ID", max: 16 },
  { title: "AGENT", max: 12, drop: 2 },
  { title: "STATE", max: 12 },
  { title: "JOB", max: 16, drop: 1 },
  { title: "CWD", max: 1000, flex: true, min: 8 },
];

/** The screen for `s`: exactly `height` lines of exactly `width` cells. */
export function render(s: TopState, width: number, height: number): string[] {
  const w = Math.max(1, width);
  const h = Math.max(1, height);
  const rows = allocate(h - 2, [
    s.jobs.length,
    s.approvals.length,
    s.sessions.length,
    s.activity.length,
  ]);
  const lines = [
    header(s, w),
    ...pane(`JOBS ${s.jobs.length}`, s.focus === "jobs", JOB_COLUMNS, jobRows(s), {
      rows: rows[0]!,
      selected: s.selected.jobs,
      empty: "No jobs",
    }, w),
    ...pane(
      `APPROVALS ${s.approvals.length}`,
      s.focus === "approvals",
      APPROVAL_COLUMNS,
      approvalRows(s),
      { rows: rows[1]!, selected: s.selected.approvals, empty: "No approvals pending" },
      w,
    ),
    ...pane(`SESSIONS ${s.sessions.length}`, false, SESSION_COLUMNS, sessionRows(s), {
      rows: rows[2]!,
      empty: "No sessions",
    }, w),
    fit(`   ACTIVITY (newest first, last ${ACTIVITY_LINES} kept)`, w),
    ...activityRows(s, rows[3]!, w),
  ].slice(0, h - 1);
  while (lines.length < h - 1) lines.push(fit("", w));
  lines.push(footer(s, w));
  return lines;
}

/**
 * Rows of the four panes (jobs, approvals, sessions, activity) in `body` lines, each pane also
 * taking a title line: at least one row each, then the lists up to a share of the screen as
 * their items need, the activity the rest.
 */
export function allocate(body: number, wants: readonly number[]): number[] {
  const rows = [1, 1, 1, 1];
  let left = body - 8;
  const caps = [0.35, 0.2, 0.15].map((f) => Math.max(1, Math.floor(body * f)));
  for (let grew = true; grew && left > 0;) {
    grew = false;
    for (let i = 0; i < 3 && left > 0; i++) {
      if (rows[i]! < Math.min(Math.max(1, wants[i] ?? 0), caps[i]!)) {
        rows[i]!++;
        left--;
        grew = true;
      }
    }
  }
  rows[3]! += Math.max(0, left);
  return rows;
}

function header(s: TopState, w: number): string {
  const st = s.status;
  const active = s.jobs.filter((j) => isActiveStatus(j.status)).length;
  const flags = [
    st.stopped ? `STOPPED${barrierLeft(st, s.now)}` : "",
    st.audit_healthy ? "" : "AUDIT LOG STOPPED",
  ].filter(Boolean);
  const clock = clockOf(s.now);
  const left = `termada top  ${st.version} pid ${st.pid}  ${s.sessions.length} sessions  ` +
    `${active} active jobs  ${s.approvals.length} approvals` +
    (flags.length > 0 ? `  ${flags.join("  ")}` : "");
  if ([...left].length + clock.length + 1 > w) return fit(left, w);
  return left + " ".repeat(w - [...left].length - clock.length) + clock;
}

/** " 59m59s left" of the kill switch's barrier (nothing when it holds until `resume`). */
function barrierLeft(st: DaemonStatus, now: number): string {
  const until = st.barrier_until === undefined ? NaN : Date.parse(st.barrier_until);
  return Number.isFinite(until) ? ` ${formatDuration(until - now)} left` : "";
}

function footer(s: TopState, w: number): string {
  if (s.ended) return fit(`${s.ended}; exiting`, w);
  const p = s.prompt;
  if (p?.kind === "stop") {
    return fit("Stop ALL jobs, cancel approvals and refuse new commands? [y/N] ", w);
  }
  if (p?.kind === "deny") {
    const head = `Deny ${p.approvalId}, reason (Enter: "${DEFAULT_DENY_REASON}"): `;
    const room = Math.max(1, w - [...head].length - 1);
    return fit(head + [...p.text].slice(-room).join("") + "_", w);
  }
  if (s.message && s.message.until > s.now) return fit(s.message.text, w);
  return fit("q quit  Tab pane  j/k select  K kill job  a approve  d deny  S stop all", w);
}

interface PaneView {
  rows: number;
  selected?: number;
  empty: string;
}

/** A title line (the column headings, the pane's name in the ID column) and `v.rows` rows. */
function pane(
  title: string,
  focused: boolean,
  columns: readonly Column[],
  cells: string[][],
  v: PaneView,
  w: number,
): string[] {
  const heads = columns.map((c) => c.title);
  heads[0] = focused ? "▸" : "";
  heads[1] = title;
  const widths = layout(columns, [heads, ...cells], w);
  const out = [tableRow(heads, widths, w)];
  if (cells.length === 0) return [...out, fit(`   ${v.empty}`, w)];
  const win = windowOf(cells.length, v.rows, v.selected ?? 0);
  for (let i = win.start; i < win.start + win.shown; i++) {
    const row = [...cells[i]!];
    row[0] = i === v.selected && v.selected !== undefined ? ">" : "";
    out.push(tableRow(row, widths, w));
  }
  if (win.more > 0) out.push(fit(`   … +${win.more} more`, w));
  return out;
}

/**
 * Which items of `n` show in `rows` lines with `selected` visible: all of them, or `rows - 1`
 * around the selection and a "+N more" line.
 */
export function windowOf(
  n: number,
  rows: number,
  selected: number,
): { start: number; shown: number; more: number } {
  if (n <= rows) return { start: 0, shown: n, more: 0 };
  const shown = Math.max(0, rows - 1);
  const start = Math.max(0, Math.min(selected - shown + 1, n - shown));
  return { start: shown === 0 ? 0 : start, shown, more: n - shown };
}

function jobRows(s: TopState): string[][] {
  return s.jobs.map((j) => {
    const active = isActiveStatus(j.status);
    const ms = j.duration_ms +
      (active && j.status !== "pending_approval" ? s.now - s.fetchedAt : 0);
    return ["", j.job_id, j.owner, stateOf(j), formatDuration(ms), rateOf(s, j), commandOf(j)];
  });
}

function stateOf(j: OperatorJob): string {
  if (j.status === "pending_approval") return "approval";
  if (j.status === "awaiting_input") return "input";
  if (j.status === "exited" && j.exit_code !== undefined) return `exited ${j.exit_code}`;
  if (j.status === "killed" && j.signal) return `killed ${j.signal}`;
  return j.status;
}

function rateOf(s: TopState, j: OperatorJob): string {
  if (j.status !== "running" && j.status !== "awaiting_input") return "-";
  const r = s.rates.get(j.job_id);
  if (r?.bytesPerSec === undefined) return "…";
  return `${formatBytes(r.bytesPerSec)}/s`;
}

const commandOf = (j: { command: string[] }) => j.command.join(" ");

function approvalRows(s: TopState): string[][] {
  return s.approvals.map((a) => {
    const what = a.action
      ? `${a.action.kind}: ${a.command.join(" ")}`
      : a.exec
      ? `exec ${a.command.join(" ")}`
      : a.command.join(" ");
    const votes = a.requirements && a.requirements.quorum > 1
      ? ` [${a.approvers?.length ?? 0}/${a.requirements.quorum}]`
      : "";
    return [
      "",
      a.approval_id,
      a.owner,
      formatDuration(s.now - Date.parse(a.requested_at)),
      formatDuration(Date.parse(a.expires_at) - s.now),
      what + votes,
    ];
  });
}

function sessionRows(s: TopState): string[][] {
  return s.sessions.map((x) => [
    "",
    x.session_id,
    x.owner,
    x.link?.state === "reconnecting" ? "reconnecting" : x.state,
    x.current_job_id ?? "-",
    x.target === "local" ? x.cwd : `${x.target}:${x.cwd}`,
  ]);
}

function activityRows(s: TopState, rows: number, w: number): string[] {
  const lines = s.activity.newest(rows);
  if (lines.length === 0) return [fit("   No events yet", w)];
  return lines.map((l) => fit(`   ${l}`, w));
}

function clockOf(ms: number): string {
  const d = new Date(ms);
  return [d.getHours(), d.getMinutes(), d.getSeconds()].map((n) => String(n).padStart(2, "0"))
    .join(":");
}

/** One event of the daemon's stream as an activity line: time, type, who, what. */
export interface BusEventLike {
  id?: number;
  time?: string;
  type: string;
  data?: Record<string, unknown>;
}

export function describe(e: BusEventLike): string {
  const d = e.data ?? {};
  const actor = (d.actor as { id?: string } | undefined)?.id;
  const ref = ["job_id", "approval_id", "session_id", "action_id", "mission_id", "forward_id"]
    .map((k) => d[k]).find((v) => typeof v === "string") as string | undefined;
  const detail = Array.isArray(d.command)
    ? d.command.join(" ")
    : Array.isArray(d.summary)
    ? d.summary.join(" ")
    : typeof d.status === "string"
    ? d.status + (typeof d.exit_code === "number" ? ` ${d.exit_code}` : "")
    : typeof d.approved === "boolean"
    ? (d.approved ? "approved" : "denied")
    : typeof d.reason === "string"
    ? d.reason
    : "";
  const t = e.time ? clockOf(Date.parse(e.time)) : clockOf(Date.now());
  return [t, e.type.padEnd(22), actor, ref, detail].filter((x) => x).join(" ");
}

/** Which lists an event of `type` may have changed. */
export function affected(type: string): Set<Kind> {
  if (
    type === "resync" || type.startsWith("stop_all") || type.startsWith("daemon.") ||
    type.startsWith("audit.") || type.startsWith("policy.reloaded")
  ) return new Set(KINDS);
  const k = new Set<Kind>();
  if (type.startsWith("job.") || type.startsWith("input.") || type.startsWith("exec.")) {
    k.add("jobs").add("sessions");
  }
  if (type.startsWith("approval.") || type.endsWith("approval_requested")) {
    k.add("approvals").add("jobs");
  }
  if (type.startsWith("session.") || type.startsWith("agent.")) k.add("sessions");
  return k;
}

// ── the plain snapshot ─────────────────────────────────────────────────────────────────────

type Kind = "status" | "sessions" | "jobs" | "approvals";
const KINDS: readonly Kind[] = ["status", "sessions", "jobs", "approvals"];

async function fetchKind<K extends Kind>(p: TermadaPaths, kind: K): Promise<TopData[K]> {
  switch (kind) {
    case "status":
      return await call(p, "GET", "/status") as unknown as TopData[K];
    case "sessions":
      return (await call(p, "GET", "/sessions")).sessions as TopData[K];
    case "jobs":
      return (await call(p, "GET", `/jobs?limit=${JOBS_LIMIT}`)).jobs as TopData[K];
    default:
      return (await call(p, "GET", "/approvals")).approvals as TopData[K];
  }
}

async function snapshot(p: TermadaPaths): Promise<TopData> {
  const [status, sessions, jobs, approvals] = await Promise.all(KINDS.map((k) => fetchKind(p, k)));
  return {
    status: status as DaemonStatus,
    sessions: sessions as OperatorSession[],
    jobs: ordered(jobs as OperatorJob[]),
    approvals: approvals as PendingApproval[],
  };
}

/** The snapshot as plain text: what `top` prints when stdout is not a terminal. */
export function plainSnapshot(d: TopData, now: number): string {
  const st = d.status;
  const section = (title: string, empty: string, head: string[], rows: string[][]) =>
    `\n${title} (${rows.length})\n` + (rows.length === 0 ? `${empty}\n` : table(head, rows));
  return `termada ${st.version}  pid ${st.pid}  admissions ${
    st.stopped ? `stopped until ${st.barrier_until ?? "resumed"}` : "open"
  }\n` +
    section(
      "Sessions",
      "No sessions.",
      ["ID", "AGENT", "STATE", "JOB", "CWD"],
      d.sessions.map((s) => [s.session_id, s.owner, s.state, s.current_job_id ?? "-", s.cwd]),
    ) +
    section(
      "Jobs",
      "No jobs.",
      ["ID", "AGENT", "STATUS", "DURATION", "COMMAND"],
      d.jobs.map((j) => [
        j.job_id,
        j.owner,
        j.exit_code === undefined ? j.status : `${j.status} (${j.exit_code})`,
        formatDuration(j.duration_ms),
        commandOf(j).slice(0, 80),
      ]),
    ) +
    section(
      "Approvals",
      "No approvals pending.",
      ["ID", "AGENT", "WAITED", "COMMAND"],
      d.approvals.map((a) => [
        a.approval_id,
        a.owner,
        formatDuration(now - Date.parse(a.requested_at)),
        commandOf(a).slice(0, 80),
      ]),
    );
}

// ── the command ────────────────────────────────────────────────────────────────────────────

export async function topCommand(args: string[], ctx: OperatorContext): Promise<number> {
  const { values } = strictArgs("top", args, {
    config: { type: "string" },
    json: { type: "boolean" },
    help: { type: "boolean" },
  }, 0);
  if (values.help) {
    await ctx.out(USAGE);
    return 0;
  }
  const p = await paths(values.config);
  // Before the screen changes: a daemon that is not running is the usual one-line error.
  const data = await snapshot(p);
  if (values.json) {
    await ctx.out(JSON.stringify(data, null, 2) + "\n");
    return 0;
  }
  if (!Deno.stdout.isTerminal() || !Deno.stdin.isTerminal()) {
    await ctx.out(plainSnapshot(data, Date.now()));
    return 0;
  }
  return await new TopRuntime(p, ctx, newState(data, Date.now())).run();
}

/**
 * The live view: owns raw mode, the alternate screen, the event stream, the tick and the key
 * reader; `run` resolves once all of them are stopped and the terminal is restored.
 */
class TopRuntime {
  readonly #p: TermadaPaths;
  readonly #ctx: OperatorContext;
  readonly #s: TopState;
  readonly #abort = new AbortController();
  readonly #exit = Promise.withResolvers<{ code: number; error?: TermadaError }>();
  #frame: string[] = [];
  #painting: Promise<void> | undefined;
  #dirty = false;
  #clear = true;
  #stale = new Set<Kind>();
  #debounce: ReturnType<typeof setTimeout> | undefined;

  constructor(p: TermadaPaths, ctx: OperatorContext, state: TopState) {
    this.#p = p;
    this.#ctx = ctx;
    this.#s = state;
  }

  async run(): Promise<number> {
    const signals = ["SIGINT", "SIGTERM", "SIGHUP"] as const;
    const quit = () => this.#finish({ code: 0 });
    const resize = () => {
      this.#clear = true;
      this.#paint();
    };
    const keys = Deno.stdin.readable.getReader();
    let tick: ReturnType<typeof setInterval> | undefined;
    let tasks: Promise<void>[] = [];
    Deno.stdin.setRaw(true);
    try {
      await this.#ctx.out(SCREEN.enter);
      for (const s of signals) Deno.addSignalListener(s, quit);
      Deno.addSignalListener("SIGWINCH", resize);
      tick = setInterval(() => this.#tick(), TICK_MS);
      tasks = [this.#readKeys(keys), this.#stream()];
      this.#paint();
      const { code, error } = await this.#exit.promise;
      if (error) throw error;
      return code;
    } finally {
      this.#abort.abort();
      clearInterval(tick);
      clearTimeout(this.#debounce);
      for (const s of signals) Deno.removeSignalListener(s, quit);
      Deno.removeSignalListener("SIGWINCH", resize);
      await this.#painting?.catch(() => {});
      // The terminal first: whatever happens below, the operator gets a working shell back.
      try {
        Deno.stdin.setRaw(false);
      } finally {
        await this.#ctx.out(SCREEN.leave).catch(() => {});
      }
      await keys.cancel().catch(() => {});
      await Promise.allSettled(tasks);
    }
  }

  #finish(exit: { code: number; error?: TermadaError }): void {
    this.#abort.abort();
    this.#exit.resolve(exit);
  }

  #fail(err: unknown): void {
    this.#finish({ code: 1, error: err instanceof TermadaError ? err : toTermadaError(err) });
  }

  // ── input ──

  async #readKeys(reader: ReadableStreamDefaultReader<Uint8Array>): Promise<void> {
    const dec = new TextDecoder();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done || this.#abort.signal.aborted) break;
        for (const key of parseKeys(dec.decode(value, { stream: true }))) this.#onKey(key);
      }
    } catch (err) {
      if (!this.#abort.signal.aborted) this.#fail(err);
      return;
    }
    this.#finish({ code: 0 }); // stdin closed
  }

  #onKey(key: Key): void {
    if (this.#s.ended) return;
    const now = Date.now();
    this.#s.now = now;
    const action = handleKey(this.#s, key, now);
    if (action?.kind === "quit") return this.#finish({ code: 0 });
    if (action?.kind === "redraw") this.#clear = true;
    else if (action) void this.#act(action);
    this.#paint();
  }

  async #act(a: Exclude<Action, { kind: "quit" } | { kind: "redraw" }>): Promise<void> {
    const s = this.#s;
    try {
      const text = await this.#perform(a);
      say(s, text, Date.now());
    } catch (err) {
      if (this.#abort.signal.aborted) return;
      const e = err instanceof TermadaError ? err : toTermadaError(err);
      say(s, `${e.code}: ${e.message}`, Date.now());
    }
    this.#refetch(new Set(KINDS));
    this.#paint();
  }

  async #perform(a: Exclude<Action, { kind: "quit" } | { kind: "redraw" }>): Promise<string> {
    const p = this.#p;
    const id = encodeURIComponent("jobId" in a ? a.jobId : "approvalId" in a ? a.approvalId : "");
    switch (a.kind) {
      case "kill": {
        const r = await call(p, "POST", `/jobs/${id}/kill`, {});
        return `Killed ${a.jobId}: ${(r.job as OperatorJob).status}`;
      }
      case "approve": {
        const r = await call(p, "POST", `/approvals/${id}/approve`, {});
        return r.status === "pending"
          ? `Vote recorded on ${a.approvalId}: ${r.votes} of ${r.quorum}`
          : `Approved ${a.approvalId}`;
      }
      case "deny":
        await call(p, "POST", `/approvals/${id}/deny`, { reason: a.reason });
        return `Denied ${a.approvalId}`;
      case "stop": {
        const r = await call(p, "POST", "/stop", {});
        return `Stopped ${(r.stopped_jobs as unknown[]).length} job(s), cancelled ${
          (r.cancelled_approvals as unknown[]).length
        } approval(s); new commands refused until ${r.barrier_until} (termada resume)`;
      }
    }
  }

  // ── the event stream ──

  /**
   * Follows the event stream; a stream that ran a while and ended (the daemon cuts off a client
   * that fell behind) is resumed once from its last id, any other end stops top.
   */
  async #stream(): Promise<void> {
    let since: string | undefined;
    for (let resumes = 0;; resumes++) {
      const t0 = Date.now();
      try {
        since = await this.#follow(since);
      } catch (err) {
        if (!this.#abort.signal.aborted) this.#end(err);
        return;
      }
      if (this.#abort.signal.aborted) return;
      if (resumes >= RESUMES || Date.now() - t0 < RESUME_AFTER_MS) return this.#end();
    }
  }

  /** One connection to the event stream; resolves with the last event id at its end. */
  async #follow(since: string | undefined): Promise<string | undefined> {
    const q = since === undefined ? "" : `?since=${encodeURIComponent(since)}`;
    return await request(this.#p, "GET", `/events${q}`, undefined, async (r) => {
      const reader = r.body!.pipeThrough(new TextDecoderStream()).getReader();
      const cancel = () => void reader.cancel().catch(() => {});
      this.#abort.signal.addEventListener("abort", cancel, { once: true });
      const sse = new SseParser();
      try {
        for (;;) {
          const { value, done } = await reader.read();
          if (done) return since;
          for (const e of sse.push(value)) {
            since = e.id ?? since;
            this.#onEvent(e.event, e.data);
          }
        }
      } finally {
        this.#abort.signal.removeEventListener("abort", cancel);
      }
    });
  }

  #end(cause?: unknown): void {
    const message = "The daemon closed the event stream (it stopped or restarted)";
    this.#s.ended = message;
    this.#paint();
    setTimeout(
      () =>
        this.#finish({
          code: 1,
          error: new TermadaError("SERVER_UNREACHABLE", message, {
            hint: "termada status; start it with termada serve",
            cause,
          }),
        }),
      ENDED_MS,
    );
  }

  #onEvent(type: string, data: string): void {
    if (type === "jobs.output") {
      try {
        const d = JSON.parse(data) as { data?: { jobs?: unknown } };
        const jobs = Array.isArray(d.data?.jobs) ? d.data.jobs : [];
        applyProgress(
          this.#s,
          jobs.filter((j): j is { job_id: string; output_bytes: number } =>
            typeof j?.job_id === "string" && typeof j?.output_bytes === "number"
          ),
          Date.now(),
        );
      } catch {
        return; // not an event of ours
      }
      return this.#paint();
    }
    if (type !== "resync") {
      let e: BusEventLike;
      try {
        e = JSON.parse(data) as BusEventLike;
      } catch {
        return; // not an event of ours: nothing to show
      }
      this.#s.activity.push(describe({ ...e, type: e.type ?? type }));
    }
    this.#refetch(affected(type));
    this.#paint();
  }

  /** Re-fetches the `kinds` lists once the burst of events is over. */
  #refetch(kinds: Set<Kind>): void {
    for (const k of kinds) this.#stale.add(k);
    if (this.#debounce !== undefined || this.#stale.size === 0) return;
    this.#debounce = setTimeout(async () => {
      const stale = [...this.#stale];
      this.#stale.clear();
      try {
        const got = await Promise.all(stale.map((k) => fetchKind(this.#p, k)));
        if (this.#abort.signal.aborted) return;
        const now = Date.now();
        stale.forEach((k, i) => {
          if (k === "status") this.#s.status = got[i] as DaemonStatus;
          else setList(this.#s, k, got[i] as TopData[typeof k], now);
        });
        this.#s.now = now;
        this.#paint();
      } catch {
        // The daemon went away: the event stream's end says so and stops top.
      } finally {
        this.#debounce = undefined;
        if (this.#stale.size > 0 && !this.#abort.signal.aborted) this.#refetch(new Set());
      }
    }, DEBOUNCE_MS);
  }

  // ── the tick: durations and output rates ──

  #tick(): void {
    this.#s.now = Date.now();
    quietRates(this.#s, this.#s.now);
    this.#paint();
  }

  // ── painting ──

  /** Draws the state; a paint asked for while one is written makes one more after it. */
  #paint(): void {
    if (this.#abort.signal.aborted) return; // the screen is being left
    if (this.#painting) {
      this.#dirty = true;
      return;
    }
    this.#painting = (async () => {
      do {
        this.#dirty = false;
        await this.#ctx.out(this.#draw());
      } while (this.#dirty);
    })().catch((err) => this.#fail(err)).finally(() => {
      this.#painting = undefined;
    });
  }

  /** The bytes that turn the last frame into this one (only changed lines are rewritten). */
  #draw(): string {
    const { columns, rows } = consoleSize();
    const lines = render(this.#s, columns, rows);
    let out = "";
    if (this.#clear || this.#frame.length !== lines.length) {
      out += "\x1b[2J";
      this.#frame = [];
      this.#clear = false;
    }
    lines.forEach((line, i) => {
      if (this.#frame[i] !== line) out += `\x1b[${i + 1};1H${line}`;
    });
    this.#frame = lines;
    return out;
  }
}

function consoleSize(): { columns: number; rows: number } {
  try {
    return Deno.consoleSize();
  } catch {
    return { columns: 80, rows: 24 }; // stdout stopped being a terminal: draw the usual size
  }
}
