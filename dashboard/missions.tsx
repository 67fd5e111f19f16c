/** @jsxImportSource preact */
/** @jsxRuntime automatic */
/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
/**
 * Missions (docs/MISSION.md): every agent's missions with status and progress, and one mission
 * in detail — its pending approvals pinned at the top, the plan with what the runtime verified
 * (evidence jobs) kept apart from what the agent claimed, the runtime timeline, the session
 * attempts, the report download and Cancel. Data: `GET /api/missions`, `GET /api/missions/{id}`,
 * `GET /api/missions/{id}/report`, `POST /api/missions/{id}/cancel`; refetched (throttled) when
 * mission, job, approval or session events arrive.
 */
import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { ApprovalActions, Confirm, JobOutput, type OutputJob } from "./views.tsx";
import { api, type HttpError } from "./api.ts";
import { useThrottledLoad } from "./hooks.ts";
import type {
  AdapterEvidence,
  JobEvidence,
  JobOutputPage,
  MissionList,
  MissionStatus,
  MissionSummary,
  MissionView,
  PendingApproval,
  PendingView,
  Progress as MissionProgress,
  ToolError,
} from "../src/wire/mod.ts";
import { isTerminalMission } from "../src/wire/statuses.ts";

/** "active": every mission that is not terminal (planned and running have no filter of their own). */
type StatusFilter = "all" | "active" | Exclude<MissionStatus, "planned" | "running">;
const FILTERS: StatusFilter[] = [
  "all",
  "active",
  "needs_attention",
  "interrupted",
  "succeeded",
  "failed",
  "cancelled",
];

/** Refetches at most this often (events can come in bursts). */

const time = (iso: string | undefined) => iso ? new Date(iso).toLocaleTimeString() : "";
const dateTime = (iso: string | undefined) => iso ? new Date(iso).toLocaleString() : "";

function duration(ms: number): string {
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60_000)} m ${Math.round((ms % 60_000) / 1000)} s`;
}

/** `passed/total` with a bar (a native `<progress>`: no inline style under the CSP). */
function Progress(props: { progress: MissionProgress }): preact.JSX.Element {
  const p = props.progress;
  return (
    <span class="mission-progress" data-progress={`${p.passed}/${p.total}`}>
      <progress
        max={Math.max(1, p.total)}
        value={p.passed}
        aria-label={`${p.passed} of ${p.total} steps passed`}
      />
      <span class="ratio">{p.passed}/{p.total}</span>
      {p.failed > 0 && <span class="badge st-failed">{p.failed} failed</span>}
    </span>
  );
}

function StatusBadge(props: { status: string }): preact.JSX.Element {
  return (
    <span class={`badge ms-${props.status}`} data-mission-status={props.status}>
      {props.status.replace("_", " ")}
    </span>
  );
}

/** What the App hands both the list and the detail: approvals, sessions, job output. */
interface OperatorActions {
  /** The operator approval queue (the pinned approvals also come from there, live). */
  approvals: PendingApproval[];
  busy: Record<string, boolean>;
  reasons: Record<string, string>;
  onReason: (id: string, reason: string) => void;
  onDecide: (id: string, verb: "approve" | "deny") => Promise<void>;
  /** Open sessions (for "Open terminal"). */
  sessionIds: string[];
  onOpenSession: (id: string) => void;
  loadOutput: (id: string, cursor?: string) => Promise<JobOutputPage>;
}

export function MissionsView(
  props: OperatorActions & {
    token: string;
    /** The tab is shown: data is fetched only then (and on events while shown). */
    visible: boolean;
    /** Bumped by the App on mission, job, approval and session events (and when live again). */
    pulse: number;
    selected: string | undefined;
    onSelect: (id: string | undefined) => void;
  },
): preact.JSX.Element {
  const { token, selected } = props;
  const [list, setList] = useState<MissionSummary[] | undefined>();
  const [listError, setListError] = useState<string | undefined>();
  const [unavailable, setUnavailable] = useState(false);
  const [detail, setDetail] = useState<MissionView | undefined>();
  const [detailError, setDetailError] = useState<string | undefined>();
  const [filter, setFilter] = useState<StatusFilter>("all");
  const selectedRef = useRef(selected);
  selectedRef.current = selected;

  const load = useCallback(async () => {
    const id = selectedRef.current;
    const [l, d] = await Promise.allSettled([
      api<MissionList>(token, "/api/missions?limit=200"),
      id ? api<MissionView>(token, `/api/missions/${encodeURIComponent(id)}`) : undefined,
    ]);
    if (l.status === "fulfilled") {
      setList(l.value.missions);
      setListError(undefined);
      setUnavailable(false);
    } else {
      const err = l.reason as HttpError;
      // An older daemon has no /api/missions at all (or runs without missions).
      setUnavailable(err.status === 404);
      setListError(`missions: ${err.message}`);
    }
    if (id !== selectedRef.current) return;
    if (!id) {
      setDetail(undefined);
      setDetailError(undefined);
    } else if (d.status === "fulfilled") {
      setDetail(d.value);
      setDetailError(undefined);
    } else {
      const err = d.reason as HttpError;
      setDetailError(err.status === 404 ? `Mission ${id} not found.` : `mission: ${err.message}`);
    }
  }, [token]);

  const refetch = useThrottledLoad(load, props.visible, props.pulse);
  // Another mission selected: forget the old one's detail and fetch at once.
  useEffect(() => {
    setDetail((d) => d && d.mission_id === selected ? d : undefined);
    setDetailError(undefined);
    if (props.visible && selected) refetch.now();
  }, [selected]);

  if (unavailable) {
    return <p class="empty">Missions are not available on this daemon.</p>;
  }
  const missions = list ?? [];
  const shown = missions.filter((m) =>
    filter === "all" || (filter === "active" ? !isTerminalMission(m.status) : m.status === filter)
  );
  const count = (f: StatusFilter) =>
    f === "all"
      ? missions.length
      : missions.filter((m) => f === "active" ? !isTerminalMission(m.status) : m.status === f)
        .length;
  return (
    <div class={`missions ${selected ? "has-selection" : ""}`}>
      <section class="mission-list" aria-label="Missions">
        <div class="filters" role="group" aria-label="Filter missions by status">
          {FILTERS.map((f) => (
            <button
              type="button"
              key={f}
              data-mission-filter={f}
              class={filter === f ? "on" : ""}
              aria-pressed={filter === f}
              onClick={() => setFilter(f)}
            >
              {f.replace("_", " ")} <span class="count">{count(f)}</span>
            </button>
          ))}
        </div>
        {listError && <p class="error" role="alert">{listError}</p>}
        {list === undefined && !listError && <p class="empty">Loading missions…</p>}
        {list !== undefined && shown.length === 0 && (
          <p class="empty">{missions.length ? "No missions with this status." : "No missions."}</p>
        )}
        <ul class="mission-rows">
          {shown.map((m) => (
            <li key={m.mission_id}>
              <button
                type="button"
                class={`mission-row ${selected === m.mission_id ? "on" : ""}`}
                data-mission-row={m.mission_id}
                aria-pressed={selected === m.mission_id}
                onClick={() => props.onSelect(m.mission_id)}
              >
                <span class="mission-row-head">
                  <strong class="mission-title">{m.title}</strong>
                  <StatusBadge status={m.status} />
                  {m.pending_approvals > 0 && (
                    <span class="count pending" data-mission-pending={m.pending_approvals}>
                      {m.pending_approvals} approval{m.pending_approvals === 1 ? "" : "s"}
                    </span>
                  )}
                </span>
                <span class="mission-row-meta">
                  <span class="owner">{m.owner}</span> · <span class="mono">{m.mission_id}</span> ·
                  {" "}
                  <time>{time(m.updated_at)}</time>
                </span>
                <Progress progress={m.progress} />
              </button>
            </li>
          ))}
        </ul>
      </section>
      {selected && (
        <MissionDetail
          key={selected}
          id={selected}
          mission={detail?.mission_id === selected ? detail : undefined}
          error={detailError}
          {...props}
          reload={() => refetch.now()}
        />
      )}
    </div>
  );
}

function MissionDetail(
  props: OperatorActions & {
    token: string;
    id: string;
    mission: MissionView | undefined;
    error: string | undefined;
    reload: () => Promise<void>;
    onSelect: (id: string | undefined) => void;
  },
): preact.JSX.Element {
  const { id, mission: m, token } = props;
  const [openJob, setOpenJob] = useState<OutputJob | undefined>();
  const [confirming, setConfirming] = useState(false);
  const [cancelReason, setCancelReason] = useState("");
  const [cancelling, setCancelling] = useState(false);
  const [actionError, setActionError] = useState<string | undefined>();
  const [report, setReport] = useState<{ busy?: boolean; sha256?: string; bytes?: number }>({});

  const back = (
    <button
      type="button"
      class="back"
      data-mission-back
      onClick={() => props.onSelect(undefined)}
    >
      ← All missions
    </button>
  );
  if (!m) {
    return (
      <section class="mission-detail" data-mission-detail={id} aria-busy={!props.error}>
        {back}
        {props.error
          ? <p class="error" role="alert">{props.error}</p>
          : <p class="empty">Loading mission…</p>}
      </section>
    );
  }

  // Pending approvals of the mission: from the mission itself, and live from the operator queue
  // (any approval of a job in one of the mission's sessions).
  const sessions = new Set([
    ...m.sessions.map((s) => s.session_id),
    ...(m.session_id ? [m.session_id] : []),
  ]);
  const pinned = new Map<string, PendingView>();
  for (const a of m.pending_approvals) pinned.set(a.approval_id, a);
  for (const a of props.approvals) {
    if (sessions.has(a.session_id) && !pinned.has(a.approval_id)) pinned.set(a.approval_id, a);
  }
  const terminal = isTerminalMission(m.status);
  const sessionOpen = m.session_id !== null && props.sessionIds.includes(m.session_id);
  const steps = m.steps;
  const verified = steps.filter((s) => s.verified).length;
  const timeline = m.timeline;

  const decide = async (approvalId: string, verb: "approve" | "deny") => {
    await props.onDecide(approvalId, verb);
    await props.reload();
  };

  const download = async () => {
    setReport({ busy: true });
    setActionError(undefined);
    try {
      const res = await fetch(`/api/missions/${encodeURIComponent(id)}/report`, {
        headers: {
          authorization: `Bearer ${token}`,
          accept: "text/markdown",
          "x-termada-operator": "dashboard",
        },
        cache: "no-store",
      });
      if (!res.ok) {
        const body = await res.json().catch(() => ({}));
        const e = (body as Partial<ToolError>).error;
        throw new Error(e?.message ?? `HTTP ${res.status}`);
      }
      const text = await res.text();
      // The token stays in a header: the file is handed over as a Blob URL, never a URL with it.
      const url = URL.createObjectURL(new Blob([text], { type: "text/markdown" }));
      const a = document.createElement("a");
      a.href = url;
      a.download = `${id.replace(/[^\w.-]+/g, "_")}-report.md`;
      a.hidden = true;
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60_000);
      setReport({
        sha256: res.headers.get("x-termada-report-sha256") ?? undefined,
        bytes: new TextEncoder().encode(text).length,
      });
    } catch (err) {
      setReport({});
      setActionError(`report: ${(err as Error).message}`);
    }
  };

  const cancel = async () => {
    setConfirming(false);
    setCancelling(true);
    try {
      await api(token, `/api/missions/${encodeURIComponent(id)}/cancel`, {
        method: "POST",
        body: JSON.stringify({ reason: cancelReason.trim() || "cancelled from the dashboard" }),
      });
      setActionError(undefined);
      setCancelReason("");
    } catch (err) {
      setActionError(`cancel: ${(err as Error).message}`);
    } finally {
      setCancelling(false);
      await props.reload();
    }
  };

  return (
    <section class="mission-detail" data-mission-detail={id} aria-label={`Mission ${m.title}`}>
      {back}
      {pinned.size > 0 && (
        <section class="mission-approvals" data-mission-approvals aria-label="Pending approvals">
          <h3>Waiting for your approval</h3>
          <ul>
            {[...pinned.values()].map((a) => (
              <li key={a.approval_id} data-mission-approval={a.approval_id}>
                <div class="who">
                  <span class="mono">{a.job_id}</span> · <time>{time(a.requested_at)}</time>
                </div>
                <pre>{a.command.join(" ")}</pre>
                <ApprovalActions
                  approvalId={a.approval_id}
                  reason={props.reasons[a.approval_id] ?? ""}
                  busy={!!props.busy[a.approval_id]}
                  onReason={(v) =>
                    props.onReason(a.approval_id, v)}
                  onDecide={(verb) =>
                    decide(a.approval_id, verb)}
                />
              </li>
            ))}
          </ul>
        </section>
      )}
      <header class="mission-head">
        <h2>{m.title}</h2>
        <StatusBadge status={m.status} />
        <Progress progress={m.progress} />
      </header>
      <p class="mission-meta">
        <span class="mono">{m.mission_id}</span>
        {" · agent "}
        <strong>{m.owner}</strong>
        {m.target && ` · target ${m.target}`}
        {m.workspace && ` · workspace ${m.workspace}`}
        {` · created ${dateTime(m.created_at)}`}
        {m.ended_at && ` · ended ${dateTime(m.ended_at)}`}
      </p>
      {props.error && <p class="error" role="alert">{props.error}</p>}
      {actionError && <p class="error" role="alert">{actionError}</p>}
      <div class="actions mission-actions">
        <button type="button" data-report disabled={report.busy} onClick={download}>
          Download report
        </button>
        {m.session_id && (
          <button
            type="button"
            data-open-terminal={m.session_id}
            disabled={!sessionOpen}
            title={sessionOpen ? undefined : "The session is not open"}
            onClick={() => m.session_id && props.onOpenSession(m.session_id)}
          >
            Open terminal
          </button>
        )}
        {!terminal && (
          <button
            type="button"
            class="danger"
            data-cancel-mission
            disabled={cancelling}
            onClick={() => setConfirming(true)}
          >
            Cancel mission
          </button>
        )}
      </div>
      {report.sha256 !== undefined || report.bytes !== undefined
        ? (
          <p class="note" data-report-done>
            Report downloaded ({report.bytes} bytes
            {report.sha256 && (
              <>
                , SHA-256 <span class="mono hash">{report.sha256}</span>
              </>
            )}).
          </p>
        )
        : null}
      <h3>Goal</h3>
      <blockquote class="mission-goal">{m.goal}</blockquote>
      <p class="mission-verdict" data-verdict>
        Runtime: <strong>{m.status.replace("_", " ")}</strong>, {verified} of {steps.length}{" "}
        step{steps.length === 1 ? "" : "s"} verified by runtime,{" "}
        {steps.filter((s) => s.status !== "pending" && !s.verified).length} claimed by agent.
      </p>
      {m.summary && (
        <div class="mission-summary" data-agent-summary>
          <h3>Agent's summary (the agent's claim)</h3>
          <blockquote>{m.summary}</blockquote>
        </div>
      )}
      <h3>Plan</h3>
      {openJob && (
        <JobOutput
          key={openJob.job_id}
          job={openJob}
          load={props.loadOutput}
          onClose={() => setOpenJob(undefined)}
        />
      )}
      <ol class="mission-steps">
        {steps.map((s) => (
          <li
            key={s.step_id}
            data-step={s.step_id}
            data-step-status={s.status}
            data-verified={String(s.verified)}
          >
            <div class="step-head">
              <span class="mono">{s.step_id}</span>
              <span class={`badge st-${s.status}`}>{s.status}</span>
              <span class="step-text">{s.text}</span>
            </div>
            {s.verified
              ? (
                <p class="mark verified" data-mark="verified">
                  ✓ verified by runtime
                  {s.evidence && <ProofLink evidence={s.evidence} onOpen={setOpenJob} />}
                </p>
              )
              : s.status !== "pending" && (
                <p class="mark claimed" data-mark="claimed">
                  claimed by agent
                  {s.evidence && <ProofLink evidence={s.evidence} onOpen={setOpenJob} />}
                </p>
              )}
            {s.evidence && (isRun(s.evidence)
              ? <RunEvidence evidence={s.evidence} />
              : <Evidence evidence={s.evidence} />)}
            {s.note && (
              <p class="step-note">
                <span class="dim">agent's note:</span> {s.note}
              </p>
            )}
          </li>
        ))}
      </ol>
      <h3>Runtime timeline</h3>
      {m.timeline_dropped > 0 && (
        <p class="note">{m.timeline_dropped} later events were not kept in the timeline.</p>
      )}
      {timeline.length === 0
        ? <p class="empty">Nothing observed yet.</p>
        : (
          <ol class="feed mission-timeline" data-mission-timeline>
            {timeline.map((e) => (
              <li key={e.seq} data-timeline-event={e.event}>
                <time title={e.time}>{time(e.time)}</time>
                <span class="etype">{e.event}</span>
                <span class="esum">{e.summary}</span>
              </li>
            ))}
          </ol>
        )}
      <h3>Session attempts</h3>
      <ol class="mission-attempts">
        {m.sessions.map((s) => (
          <li key={s.session_id} data-attempt={s.attempt}>
            #{s.attempt} <span class="mono">{s.session_id}</span> · {time(s.started_at)}
            {s.ended_at ? ` → ${time(s.ended_at)}` : " (open)"}
            {s.end_reason && ` · ${s.end_reason}`}
          </li>
        ))}
      </ol>
      {m.report_sha256 && (
        <p class="note">
          Last report SHA-256: <span class="mono hash">{m.report_sha256}</span>
        </p>
      )}
      <Confirm
        open={confirming}
        title={`Cancel mission ${m.title}?`}
        confirmLabel="Cancel mission"
        cancelLabel="Keep it"
        onConfirm={cancel}
        onCancel={() => setConfirming(false)}
      >
        <p>
          The mission ends as{" "}
          <strong>cancelled</strong>: its session is closed and a job still running in it is killed.
          This is audited and cannot be undone.
        </p>
        <input
          type="text"
          class="reason"
          data-cancel-reason
          maxLength={500}
          placeholder="Reason (optional)"
          aria-label="Reason for cancelling"
          value={cancelReason}
          onInput={(e) => setCancelReason((e.currentTarget as HTMLInputElement).value)}
        />
      </Confirm>
    </section>
  );
}

/** A step proven by an adapter run (its evidence has `kind: "adapter"`), not by a job. */
function isRun(e: JobEvidence | AdapterEvidence): e is AdapterEvidence {
  return (e as { kind?: string }).kind === "adapter";
}

/** " · job <link>" for a job's evidence, " · adapter run <id>" for a run's. */
function ProofLink(
  props: { evidence: JobEvidence | AdapterEvidence; onOpen: (job: OutputJob) => void },
): preact.JSX.Element {
  const e = props.evidence;
  if (isRun(e)) {
    return (
      <>
        {" · adapter run "}
        <span class="mono" data-evidence-run={e.run_id}>{e.run_id}</span>
      </>
    );
  }
  return (
    <>
      {" · job "}
      <JobLink evidence={e} onOpen={props.onOpen} />
    </>
  );
}

function RunEvidence(props: { evidence: AdapterEvidence }): preact.JSX.Element {
  const e = props.evidence;
  return (
    <dl class="evidence" data-evidence={e.run_id}>
      <dt>adapter</dt>
      <dd class="cmd">
        <code>{e.adapter}</code> on <code>{e.resource}</code>
      </dd>
      <dt>change</dt>
      <dd>{e.summary}</dd>
      <dt>result</dt>
      <dd>
        {e.phase}
        {e.phase === "verified" && " (effect observed by the runtime)"}
      </dd>
      {e.receipt_sha256 && (
        <>
          <dt>receipt sha256</dt>
          <dd class="mono">{e.receipt_sha256}</dd>
        </>
      )}
    </dl>
  );
}

function JobLink(
  props: { evidence: JobEvidence; onOpen: (job: OutputJob) => void },
): preact.JSX.Element {
  const e = props.evidence;
  return (
    <button
      type="button"
      class="link mono"
      data-evidence-job={e.job_id}
      aria-label={`Show output of job ${e.job_id}`}
      onClick={() => props.onOpen({ job_id: e.job_id, command: e.command, status: e.status })}
    >
      {e.job_id}
    </button>
  );
}

function Evidence(props: { evidence: JobEvidence }): preact.JSX.Element {
  const e = props.evidence;
  return (
    <dl class="evidence" data-evidence={e.job_id}>
      <dt>command</dt>
      <dd class="cmd">
        <code>{e.command.join(" ")}</code>
      </dd>
      <dt>result</dt>
      <dd>
        {e.status}
        {e.exit_code !== undefined && `, exit code ${e.exit_code}`}
        {e.signal && `, signal ${e.signal}`}
        {`, ${duration(e.duration_ms)}, ${e.output_bytes} output bytes`}
      </dd>
      {e.approval && (
        <>
          <dt>approval</dt>
          <dd>
            {e.approval.status}
            {e.approval.decided_by && ` by ${e.approval.decided_by}`}
            {e.approval.decided_at && ` at ${time(e.approval.decided_at)}`}
          </dd>
        </>
      )}
      {e.output_sha256 && (
        <>
          <dt>output SHA-256</dt>
          <dd class="mono hash">{e.output_sha256}</dd>
        </>
      )}
    </dl>
  );
}
