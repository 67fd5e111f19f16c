/** @jsxImportSource preact */
/** @jsxRuntime automatic */
/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
/**
 * Operator views: jobs of every agent (with Kill), the activity feed (audit events, filtered),
 * the agents seen, and a confirmation dialog (a native `<dialog>`: focus trap, Escape cancels).
 */
import type { ComponentChildren } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import type { JobOutputPage, OperatorJob } from "../src/wire/mod.ts";
import { isActiveStatus } from "../src/wire/statuses.ts";
import { JobScreen } from "./replay.tsx";

/** Where a job's screen comes from: its session's recording, over the job's time window. */
export interface ScreenSource {
  token: string;
  sessionId: string;
  startedAt: string;
  durationMs: number;
  active: boolean;
}

/**
 * The status to show: the engine ends a command the stop-all barrier refused as `denied`
 * (before it ran, like a policy denial); the `admission.refused` event of its job says it was
 * the barrier, shown as `refused`.
 */
export function shownStatus(status: string, jobId: string, refused?: Map<string, string>): string {
  return (status === "denied" || status === "failed") && refused?.has(jobId) ? "refused" : status;
}

/** The job a `JobOutput` panel shows: a listed job, or a mission step's evidence job. */
export type OutputJob = Pick<OperatorJob, "job_id" | "command"> & { status: string };

/** The audit chain check (`GET /api/audit/verify`), or why it could not run. */
export interface VerifyInfo {
  result?: {
    ok?: unknown;
    records?: unknown;
    firstBroken?: { seq?: number | null; segment?: string; reason?: string };
  };
  error?: string;
}

export interface FeedEvent {
  id: number;
  time: string;
  type: string;
  data: Record<string, unknown> & { actor?: { kind?: string; id?: string } };
}

export const isActive = (j: OperatorJob): boolean => isActiveStatus(j.status);

function duration(ms: number): string {
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60_000)} m ${Math.round((ms % 60_000) / 1000)} s`;
}

const time = (iso: string) => new Date(iso).toLocaleTimeString();

/** A modal confirmation: open while `open`; Escape or Cancel calls `onCancel`. */
export function Confirm(props: {
  open: boolean;
  title: string;
  children?: ComponentChildren;
  confirmLabel: string;
  /** The dismiss button's label (default "Cancel"). */
  cancelLabel?: string;
  onConfirm: () => void;
  onCancel: () => void;
}): preact.JSX.Element {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const d = ref.current;
    if (!d) return;
    if (props.open && !d.open) d.showModal();
    if (!props.open && d.open) d.close();
  }, [props.open]);
  return (
    <dialog
      ref={ref}
      class="confirm"
      aria-labelledby="confirm-title"
      onCancel={(e) => {
        e.preventDefault();
        props.onCancel();
      }}
    >
      <h2 id="confirm-title">{props.title}</h2>
      <div class="confirm-body">{props.children}</div>
      <div class="actions">
        <button type="button" class="danger" data-confirm onClick={props.onConfirm}>
          {props.confirmLabel}
        </button>
        <button type="button" data-cancel autofocus onClick={props.onCancel}>
          {props.cancelLabel ?? "Cancel"}
        </button>
      </div>
    </dialog>
  );
}

/** One job's output, read page by page ("Load more" follows `next_cursor`). */
export function JobOutput(props: {
  job: OutputJob;
  load: (id: string, cursor?: string) => Promise<JobOutputPage>;
  onClose: () => void;
  /** The job's screen from its session's recording (a Text / Screen toggle). */
  screen?: ScreenSource;
  refused?: Map<string, string>;
}): preact.JSX.Element {
  const id = props.job.job_id;
  const [text, setText] = useState("");
  const [next, setNext] = useState<string | undefined>();
  const [more, setMore] = useState(false);
  const [status, setStatus] = useState<string>(props.job.status);
  const [loading, setLoading] = useState(false);
  const [error, setError] = useState<string | undefined>();
  // Text (the cleaned output) or Screen (rendered); a full-screen job opens on its screen.
  const [view, setView] = useState<"text" | "screen" | undefined>();
  const [fullScreen, setFullScreen] = useState(false);
  const [screenReload, setScreenReload] = useState(0);
  const shown = view ?? (fullScreen ? "screen" : "text");
  const gen = useRef(0);
  const page = async (cursor: string | undefined, reset: boolean) => {
    const mine = ++gen.current;
    setLoading(true);
    try {
      const p = await props.load(id, cursor);
      if (mine !== gen.current) return;
      const gap = p.gap ? `[… ${p.gap.dropped_bytes} earlier bytes dropped …]\n` : "";
      setText((t) => (reset ? "" : t) + gap + p.output);
      setNext(p.next_cursor);
      setMore(p.has_more);
      setStatus(p.status);
      setError(undefined);
    } catch (err) {
      if (mine === gen.current) setError((err as Error).message);
    } finally {
      if (mine === gen.current) setLoading(false);
    }
  };
  useEffect(() => {
    setText("");
    setNext(undefined);
    page(undefined, true);
  }, [id]);
  return (
    <section class="job-output" data-job-output={id} aria-label={`Output of job ${id}`}>
      <header>
        <h2>
          Output of <span class="mono">{id}</span>
        </h2>
        <StatusBadge
          status={shownStatus(status, id, props.refused)}
          reason={props.refused?.get(id)}
        />
        <span class="cmd">
          <code>{props.job.command.join(" ")}</code>
        </span>
        {props.screen && (
          <span class="toggle" role="group" aria-label="Show">
            {(["text", "screen"] as const).map((v) => (
              <button
                type="button"
                key={v}
                data-output-view={v}
                class={shown === v ? "on" : ""}
                aria-pressed={shown === v}
                onClick={() => setView(v)}
              >
                {v === "text" ? "Text" : "Screen"}
              </button>
            ))}
          </span>
        )}
        <button type="button" data-close-output onClick={props.onClose}>Close</button>
      </header>
      {error && <p class="error" role="alert">{error}</p>}
      {fullScreen && (
        <p class="note" data-full-screen>
          A full-screen program: its text output runs its frames together; Screen shows what it
          drew.
        </p>
      )}
      <pre class="output" data-output hidden={shown === "screen"}>
        {text || (loading ? "Loading…" : "(no output yet)")}
      </pre>
      {props.screen && (
        <div class="screen-box" hidden={shown !== "screen"} data-screen-box>
          <JobScreen
            {...props.screen}
            reload={screenReload}
            onFullScreen={setFullScreen}
          />
        </div>
      )}
      <div class="actions">
        <button
          type="button"
          data-load-more
          disabled={loading || next === undefined}
          onClick={() => {
            page(next, false);
            setScreenReload((n) => n + 1);
          }}
        >
          {more ? "Load more" : "Check for new output"}
        </button>
      </div>
    </section>
  );
}

/** A job's status badge; `reason` (e.g. why it was refused) on hover. */
export function StatusBadge(props: { status: string; reason?: string }): preact.JSX.Element {
  return (
    <span class={`badge st-${props.status}`} data-shown-status={props.status} title={props.reason}>
      {props.status}
    </span>
  );
}

export function JobsView(props: {
  jobs: OperatorJob[];
  busy: Record<string, boolean>;
  onKill: (job: OperatorJob) => void;
  loadOutput: (id: string, cursor?: string) => Promise<JobOutputPage>;
  /** The operator token (the job screen reads the session's recording). */
  token?: string;
  /** Jobs the stop-all barrier refused (job id → reason), from `admission.refused` events. */
  refused?: Map<string, string>;
}): preact.JSX.Element {
  const [open, setOpen] = useState<string | undefined>();
  const active = props.jobs.filter(isActive);
  const recent = props.jobs.filter((j) => !isActive(j));
  const opened = props.jobs.find((j) => j.job_id === open);
  const row = (j: OperatorJob) => (
    <tr
      key={j.job_id}
      data-job={j.job_id}
      data-status={shownStatus(j.status, j.job_id, props.refused)}
      data-engine-status={j.status}
      class={`openable ${open === j.job_id ? "open" : ""}`}
      onClick={(e) => {
        if ((e.target as HTMLElement).closest("button")) return;
        setOpen(j.job_id);
      }}
    >
      <td class="mono">
        <button
          type="button"
          class="link"
          data-open-job={j.job_id}
          aria-label={`Show output of job ${j.job_id}`}
          onClick={() => setOpen(j.job_id)}
        >
          {j.job_id}
        </button>
      </td>
      <td>{j.owner}</td>
      <td class="mono">{j.session_id}</td>
      <td class="cmd">
        <code>{j.command.join(" ")}</code>
      </td>
      <td>
        <StatusBadge
          status={shownStatus(j.status, j.job_id, props.refused)}
          reason={props.refused?.get(j.job_id)}
        />
      </td>
      <td>{j.exit_code ?? j.signal ?? ""}</td>
      <td>{time(j.started_at)}</td>
      <td>{duration(j.duration_ms)}</td>
      <td>
        {isActive(j) && (
          <button
            type="button"
            class="kill danger"
            disabled={props.busy[j.job_id]}
            aria-label={`Kill job ${j.job_id}`}
            onClick={() => props.onKill(j)}
          >
            Kill
          </button>
        )}
      </td>
    </tr>
  );
  const table = (list: OperatorJob[], empty: string) =>
    list.length === 0 ? <p class="empty">{empty}</p> : (
      <table class="jobs">
        <thead>
          <tr>
            <th>Job</th>
            <th>Agent</th>
            <th>Session</th>
            <th>Command</th>
            <th>Status</th>
            <th>Exit</th>
            <th>Started</th>
            <th>Duration</th>
            <th></th>
          </tr>
        </thead>
        <tbody>{list.map(row)}</tbody>
      </table>
    );
  return (
    <>
      {opened && (
        <JobOutput
          key={opened.job_id}
          job={opened}
          load={props.loadOutput}
          onClose={() => setOpen(undefined)}
          refused={props.refused}
          screen={props.token
            ? {
              token: props.token,
              sessionId: opened.session_id,
              startedAt: opened.started_at,
              durationMs: opened.duration_ms,
              active: isActive(opened),
            }
            : undefined}
        />
      )}
      <h2>Active</h2>
      <div class="table-scroll" data-jobs="active">{table(active, "No active jobs.")}</div>
      <h2>Recent</h2>
      <div class="table-scroll" data-jobs="recent">{table(recent, "No finished jobs.")}</div>
    </>
  );
}

export type Filter = "all" | "runs" | "attention" | "connections" | "system";
const FILTERS: Filter[] = ["all", "runs", "attention", "connections", "system"];

export function categoryOf(e: FeedEvent): Exclude<Filter, "all"> {
  const t = e.type;
  if (
    /^(policy\.denied|admission\.refused|approval\.|stop_all|job\.killed_by_operator)/.test(t)
  ) return "attention";
  if (/^(job\.|input\.)/.test(t)) return "runs";
  if (/^(agent\.|session\.)/.test(t)) return "connections";
  return "system";
}

function summary(e: FeedEvent): string {
  const d = e.data;
  const parts: string[] = [];
  if (Array.isArray(d.command)) parts.push(d.command.join(" "));
  else if (typeof d.line === "string") parts.push(d.line);
  for (const k of ["job_id", "session_id", "approval_id", "status", "exit_code", "reason"]) {
    const v = d[k];
    if (v !== undefined && v !== null && typeof v !== "object") parts.push(`${k}=${v}`);
  }
  if (Array.isArray(d.stopped_jobs)) parts.push(`stopped=${d.stopped_jobs.length}`);
  return parts.join(" · ");
}

/** The audit chain's state: verified (with the record count), broken (where), or unknown. */
export function VerifyBadge(props: { verify: VerifyInfo | undefined }): preact.JSX.Element {
  const v = props.verify;
  if (!v) return <p class="verify" data-verify="checking">checking the audit chain…</p>;
  if (v.error || !v.result) {
    return <p class="verify unknown" data-verify="unknown">audit chain: {v.error ?? "unknown"}</p>;
  }
  const r = v.result;
  if (r.ok === true) {
    return (
      <p class="verify ok" data-verify="ok">
        <span class="badge">chain verified: {String(r.records ?? 0)} records</span>
      </p>
    );
  }
  const b = r.firstBroken;
  return (
    <p class="verify broken" data-verify="broken" role="alert">
      <span class="badge">
        BROKEN at seq {b?.seq ?? "?"}
        {b?.segment ? ` (${b.segment})` : ""}
      </span>{" "}
      {b?.reason ?? ""}
    </p>
  );
}

export function ActivityView(
  props: { events: FeedEvent[]; verify?: VerifyInfo },
): preact.JSX.Element {
  const [filter, setFilter] = useState<Filter>("all");
  const shown = props.events.filter((e) => filter === "all" || categoryOf(e) === filter);
  return (
    <>
      <VerifyBadge verify={props.verify} />
      <div class="filters" role="group" aria-label="Filter events">
        {FILTERS.map((f) => (
          <button
            type="button"
            key={f}
            data-filter={f}
            class={filter === f ? "on" : ""}
            aria-pressed={filter === f}
            onClick={() => setFilter(f)}
          >
            {f}
          </button>
        ))}
      </div>
      {shown.length === 0 && <p class="empty">No events.</p>}
      <ol class="feed">
        {shown.map((e) => (
          <li key={e.id} data-event={e.type} class={`cat-${categoryOf(e)}`}>
            <time>{time(e.time)}</time>
            <span class="etype">{e.type}</span>
            <span class="actor">
              {e.data.actor ? `${e.data.actor.kind}:${e.data.actor.id}` : ""}
            </span>
            <span class="esum">{summary(e)}</span>
          </li>
        ))}
      </ol>
    </>
  );
}

export interface AgentRow {
  agent: string;
  sessions: number;
  activeJobs: number;
  lastCommand?: string;
  lastSeen?: string;
}

/** Agents seen in sessions, jobs and events, with their last command. */
export function agentRows(
  sessions: { owner: string }[],
  jobs: OperatorJob[],
  events: FeedEvent[],
): AgentRow[] {
  const rows = new Map<string, AgentRow>();
  const get = (a: string) => {
    let r = rows.get(a);
    if (!r) rows.set(a, r = { agent: a, sessions: 0, activeJobs: 0 });
    return r;
  };
  const seen = (r: AgentRow, t: string) => {
    if (!r.lastSeen || t > r.lastSeen) r.lastSeen = t;
  };
  for (const s of sessions) get(s.owner).sessions++;
  // Events are newest first: the first command seen per agent is its last.
  for (const e of events) {
    const a = e.data.actor;
    if (a?.kind !== "agent" || !a.id) continue;
    const r = get(a.id);
    seen(r, e.time);
    if (!r.lastCommand && Array.isArray(e.data.command)) r.lastCommand = e.data.command.join(" ");
  }
  // Jobs are newest first too; they fill in what the event window no longer holds.
  for (const j of jobs) {
    const r = get(j.owner);
    if (isActive(j)) r.activeJobs++;
    seen(r, j.started_at);
    if (!r.lastCommand) r.lastCommand = j.command.join(" ");
  }
  return [...rows.values()].sort((x, y) => x.agent.localeCompare(y.agent));
}

export function AgentsView(props: { rows: AgentRow[] }): preact.JSX.Element {
  if (props.rows.length === 0) return <p class="empty">No agents seen yet.</p>;
  return (
    <div class="table-scroll">
      <table class="agents">
        <thead>
          <tr>
            <th>Agent</th>
            <th>Sessions</th>
            <th>Active jobs</th>
            <th>Last command</th>
            <th>Last seen</th>
          </tr>
        </thead>
        <tbody>
          {props.rows.map((r) => (
            <tr key={r.agent} data-agent-row={r.agent}>
              <td>{r.agent}</td>
              <td>{r.sessions}</td>
              <td>{r.activeJobs}</td>
              <td class="cmd">
                <code>{r.lastCommand ?? ""}</code>
              </td>
              <td>{r.lastSeen ? time(r.lastSeen) : ""}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

export interface PolicyRules {
  allow: string[];
  deny: string[];
  confirm: string[];
  auto_answer: { prompt: string; answer: string }[];
}

/** `GET /api/policy`: the effective rules (no tokens). */
export interface PolicyInfo {
  default_policy: string;
  policies: Record<string, PolicyRules>;
  agents: Record<string, { name?: string; policy: string }>;
  dev_mode: boolean;
}

function RuleList(props: { kind: string; rules: string[] }): preact.JSX.Element {
  return (
    <div class={`rules ${props.kind}`} data-rules={props.kind}>
      <h4>{props.kind}</h4>
      {props.rules.length === 0 ? <p class="empty">none</p> : (
        <ul>
          {props.rules.map((r, i) => (
            <li key={i}>
              <code>{r}</code>
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}

/** Read-only: every policy's rules, the agents using it, and the dev-mode default. */
export function PolicyView(
  props: { policy: PolicyInfo | undefined; error?: string },
): preact.JSX.Element {
  const p = props.policy;
  if (!p) return <p class="empty">{props.error ?? "Loading policy…"}</p>;
  const users = new Map<string, string[]>();
  for (const [id, a] of Object.entries(p.agents)) {
    const list = users.get(a.policy) ?? [];
    list.push(a.name && a.name !== id ? `${id} (${a.name})` : id);
    users.set(a.policy, list);
  }
  return (
    <div class="policy">
      <p class="policy-default" data-default-policy={p.default_policy}>
        Default policy: <strong>{p.default_policy}</strong> {p.dev_mode
          ? "— dev mode is on: agents not listed in the config connect and get it."
          : "— dev mode is off: only configured agents connect."}
      </p>
      {Object.entries(p.policies).sort(([a], [b]) => a.localeCompare(b)).map(([name, r]) => (
        <section class="policy-card" key={name} data-policy={name}>
          <h3>
            {name}
            {name === p.default_policy && <span class="badge">default</span>}
          </h3>
          <p class="policy-agents">
            Agents: {(users.get(name) ?? []).sort().join(", ") || "none configured"}
            {name === p.default_policy && p.dev_mode && " + dev-mode agents"}
          </p>
          {r.allow.length + r.deny.length + r.confirm.length === 0 && (
            <p class="note">No rules: every command is allowed.</p>
          )}
          <div class="rule-lists">
            <RuleList kind="allow" rules={r.allow} />
            <RuleList kind="deny" rules={r.deny} />
            <RuleList kind="confirm" rules={r.confirm} />
          </div>
          {r.auto_answer.length > 0 && (
            <div class="table-scroll">
              <table class="auto-answer" data-rules="auto_answer">
                <thead>
                  <tr>
                    <th>Prompt (regex)</th>
                    <th>Answer</th>
                  </tr>
                </thead>
                <tbody>
                  {r.auto_answer.map((a, i) => (
                    <tr key={i}>
                      <td>
                        <code>{a.prompt}</code>
                      </td>
                      <td>
                        <code>{JSON.stringify(a.answer)}</code>
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )}
        </section>
      ))}
    </div>
  );
}

/** The reason box and the Approve / Deny buttons of one waiting approval. */
export function ApprovalActions(props: {
  approvalId: string;
  reason: string;
  busy: boolean;
  onReason: (reason: string) => void;
  onDecide: (verb: "approve" | "deny") => void;
}): preact.JSX.Element {
  return (
    <div class="actions">
      <input
        type="text"
        class="reason"
        data-reason
        maxLength={500}
        placeholder="Reason (optional)"
        aria-label={`Reason for approval ${props.approvalId}`}
        value={props.reason}
        onInput={(e) => props.onReason((e.currentTarget as HTMLInputElement).value)}
      />
      <button
        type="button"
        class="approve"
        disabled={props.busy}
        onClick={() => props.onDecide("approve")}
      >
        Approve
      </button>
      <button
        type="button"
        class="deny"
        disabled={props.busy}
        onClick={() => props.onDecide("deny")}
      >
        Deny
      </button>
    </div>
  );
}
