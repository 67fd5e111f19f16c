/** @jsxImportSource preact */
/** @jsxRuntime automatic */
/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
/**
 * The Termada dashboard: connection state, every session as a live terminal (grouped by agent),
 * the approval queue, jobs, missions, servers, the vault, governance, activity, agents and policy.
 * All data comes from the token-protected operator API.
 */
import { render } from "preact";
import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { api, HttpError } from "./api.ts";
import { followStream, type StreamState } from "./sse.ts";
import { forgetToken, takeToken } from "./token.ts";
import { SessionCard } from "./terminal.tsx";
import { MissionsView } from "./missions.tsx";
import { ServersView } from "./servers.tsx";
import { VaultView } from "./vault.tsx";
import { ReplayView } from "./replay.tsx";
import { ApprovalQuorum, GovernanceView, ProblemLine, problemOf } from "./governance.tsx";
import {
  ActivityView,
  agentRows,
  AgentsView,
  ApprovalActions,
  Confirm,
  type FeedEvent,
  isActive,
  JobsView,
  type PolicyInfo,
  PolicyView,
  type VerifyInfo,
} from "./views.tsx";
import type {
  DaemonStatus,
  Decision,
  JobOutputPage,
  OperatorJob,
  OperatorSession,
  PendingApproval,
} from "../src/wire/mod.ts";
import "@xterm/xterm/css/xterm.css";
import "./style.css";

type Conn = "live" | "reconnecting" | "offline";
type Tab =
  | "sessions"
  | "approvals"
  | "missions"
  | "jobs"
  | "servers"
  | "vault"
  | "governance"
  | "replay"
  | "activity"
  | "agents"
  | "policy";

/** `#/missions` or `#/missions/<id>`: the Missions tab (and mission) to open. */
function missionFromHash(): { id?: string } | undefined {
  const m = /^#\/missions(?:\/([^/]+))?$/.exec(location.hash);
  if (!m) return undefined;
  return m[1] ? { id: decodeURIComponent(m[1]) } : {};
}

/** Events kept for the activity feed (the daemon keeps 1000 for replay). */
const MAX_EVENTS = 1000;

/**
 * Terminals streaming at once. Every stream holds one HTTP/1.1 connection and a browser opens
 * at most 6 per origin: the events stream + 4 terminals leave one for the API calls (approve!).
 */
const MAX_LIVE = 4;

/**
 * Session cards per page of the Sessions view. The page's sessions stream (up to MAX_LIVE; the
 * others on the page offer Follow live); sessions on other pages hold no connection.
 */
export const PAGE_SIZE = 6;

/** An agent's sessions by workspace label (labelled groups first, sorted; unlabelled last). */
function byWorkspace(list: OperatorSession[]): [string | undefined, OperatorSession[]][] {
  const groups = new Map<string | undefined, OperatorSession[]>();
  for (const s of list) {
    const g = groups.get(s.workspace) ?? [];
    g.push(s);
    groups.set(s.workspace, g);
  }
  return [...groups.entries()].sort(([a], [b]) =>
    a === undefined ? 1 : b === undefined ? -1 : a.localeCompare(b)
  );
}

function App(props: { token: string }): preact.JSX.Element {
  const { token } = props;
  const [conn, setConn] = useState<Conn>("reconnecting");
  const [sessions, setSessions] = useState<OperatorSession[]>([]);
  const [approvals, setApprovals] = useState<PendingApproval[]>([]);
  const [busy, setBusy] = useState<Record<string, boolean>>({});
  const [error, setError] = useState<string | undefined>();
  const [tab, setTab] = useState<Tab>(() => missionFromHash() ? "missions" : "sessions");
  // The mission open in the Missions tab (deep link: `#/missions/<id>`).
  const [mission, setMission] = useState<string | undefined>(() => missionFromHash()?.id);
  // Bumped on mission/job/approval/session events: the Missions view refetches (throttled).
  const [missionPulse, setMissionPulse] = useState(0);
  // Bumped on server, host key, forward, action and session events: the Servers view refetches.
  const [serverPulse, setServerPulse] = useState(0);
  // Bumped on vault events: the Vault view refetches.
  const [vaultPulse, setVaultPulse] = useState(0);
  // Bumped on approval, action, policy, auth, audit and job events: the Governance view refetches.
  const [govPulse, setGovPulse] = useState(0);
  const [jobs, setJobs] = useState<OperatorJob[]>([]);
  const [events, setEvents] = useState<FeedEvent[]>([]);
  // Unknown until the first `/api/status` answers (shown as running, like the daemon starts).
  const [status, setStatus] = useState<DaemonStatus | undefined>();
  const [confirm, setConfirm] = useState<
    { kind: "stop" } | { kind: "kill"; job: OperatorJob } | undefined
  >();
  const [followed, setFollowed] = useState<string[]>([]);
  // The Sessions view's page (PAGE_SIZE cards each).
  const [page, setPage] = useState(0);
  // The recording open in the Replay tab.
  const [replaying, setReplaying] = useState<string | undefined>();
  // Bumped on session events: the Replay list refetches.
  const [replayPulse, setReplayPulse] = useState(0);
  // The reason typed per approval (sent with Approve / Deny).
  const [reasons, setReasons] = useState<Record<string, string>>({});
  // Per approval card: the last Approve that counted without reaching the quorum, or the error.
  const [voted, setVoted] = useState<Record<string, { votes: number; quorum: number }>>({});
  const [cardErrors, setCardErrors] = useState<
    Record<string, { message: string; hint?: string }>
  >({});
  const [policy, setPolicy] = useState<PolicyInfo | undefined>();
  const [policyError, setPolicyError] = useState<string | undefined>();
  const [verify, setVerify] = useState<VerifyInfo | undefined>();
  const timer = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  const barrierTimer = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  const refreshRef = useRef<() => void>(() => {});
  // When the lists were last refreshed (shown while the events stream is not live).
  const [updatedAt, setUpdatedAt] = useState<Date | undefined>();

  const refresh = useCallback(async () => {
    try {
      const [s, a, j, st] = await Promise.all([
        api<{ sessions: OperatorSession[] }>(token, "/api/sessions"),
        api<{ approvals: PendingApproval[] }>(token, "/api/approvals"),
        api<{ jobs: OperatorJob[] }>(token, "/api/jobs?limit=200"),
        api<DaemonStatus>(token, "/api/status"),
      ]);
      setSessions(s.sessions);
      setApprovals(a.approvals);
      setJobs(j.jobs);
      setStatus(st);
      // The barrier ends without an event: refresh once when it is due (a timer, not a poll).
      clearTimeout(barrierTimer.current);
      if (st.stopped && st.barrier_until) {
        const due = Date.parse(st.barrier_until) - Date.now() + 250;
        if (due > 0 && due < 2 ** 31) {
          barrierTimer.current = setTimeout(() => refreshRef.current(), due);
        }
      }
      setUpdatedAt(new Date());
      setError(undefined);
    } catch (err) {
      setError(String((err as Error).message ?? err));
    }
  }, [token]);

  refreshRef.current = refresh;

  // A card's vote note and error go with the card (approved, denied or expired).
  useEffect(() => {
    const open = new Set(approvals.map((a) => a.approval_id));
    const keep = <T,>(r: Record<string, T>) => {
      const next = Object.fromEntries(Object.entries(r).filter(([id]) => open.has(id)));
      return Object.keys(next).length === Object.keys(r).length ? r : next;
    };
    setVoted(keep);
    setCardErrors(keep);
  }, [approvals]);
  useEffect(() => () => clearTimeout(barrierTimer.current), []);

  const soon = useCallback(() => {
    clearTimeout(timer.current);
    timer.current = setTimeout(refresh, 150);
  }, [refresh]);

  useEffect(() => {
    const abort = new AbortController();
    followStream("/api/events", {
      token,
      onState: (s: StreamState, detail?: string) => {
        if (s === "live") {
          setConn("live");
          refresh();
          setMissionPulse((n) => n + 1);
          setServerPulse((n) => n + 1);
          setVaultPulse((n) => n + 1);
          setGovPulse((n) => n + 1);
          setReplayPulse((n) => n + 1);
        } else if (s === "offline") {
          setConn("offline");
          if (detail === "HTTP 401") {
            forgetToken();
            setError("The operator token was refused: open the URL the daemon printed.");
          }
        } else if (s !== "ended") setConn("reconnecting");
      },
      onMessage: (m) => {
        if (
          m.event === "resync" ||
          /^(session|approval|job|stop_all|agent|admission|policy|input|operator)/.test(m.event)
        ) soon();
        if (m.event === "resync" || /^(mission|job|approval|session)\./.test(m.event)) {
          setMissionPulse((n) => n + 1);
        }
        if (
          m.event === "resync" || /^(server|host_key|forward|action|fleet|session)\./.test(m.event)
        ) {
          setServerPulse((n) => n + 1);
        }
        if (m.event === "resync" || /^vault\./.test(m.event)) setVaultPulse((n) => n + 1);
        if (m.event === "resync" || /^session\./.test(m.event)) setReplayPulse((n) => n + 1);
        if (m.event === "resync" || /^(approval|action|policy|auth|audit|job)\./.test(m.event)) {
          setGovPulse((n) => n + 1);
        }
        if (m.event === "resync") return;
        let e: FeedEvent;
        try {
          e = JSON.parse(m.data);
        } catch {
          return;
        }
        if (typeof e?.id !== "number") return;
        setEvents((list) =>
          list.some((x) => x.id === e.id) ? list : [e, ...list].slice(0, MAX_EVENTS)
        );
      },
    }, abort.signal);
    // No polling: lists refresh on events (and when the stream comes back live).
    return () => {
      abort.abort();
      clearTimeout(timer.current);
    };
  }, [token, refresh, soon]);

  const decide = async (id: string, verb: "approve" | "deny") => {
    setBusy((b) => ({ ...b, [id]: true }));
    const typed = (reasons[id] ?? "").trim();
    const reason = typed || `${verb === "deny" ? "denied" : "approved"} from the dashboard`;
    setCardErrors(({ [id]: _, ...rest }) => rest);
    try {
      const d = await api<Decision>(token, `/api/approvals/${encodeURIComponent(id)}/${verb}`, {
        method: "POST",
        body: JSON.stringify({ reason }),
      });
      setError(undefined);
      setReasons((r) => {
        const { [id]: _, ...rest } = r;
        return rest;
      });
      // A vote short of the quorum: the card stays, saying so.
      if (d.status === "pending") {
        setVoted((v) => ({ ...v, [id]: { votes: d.votes ?? 0, quorum: d.quorum ?? 0 } }));
      }
    } catch (err) {
      // Shown on the card (e.g. 403 DENIED_BY_POLICY: not an eligible approver); other views
      // that decide (Missions) have no card slot, so they get the banner.
      setCardErrors((e) => ({ ...e, [id]: problemOf(err) }));
      if (tab !== "approvals" || !(err instanceof HttpError)) {
        setError(`${verb} ${id}: ${(err as Error).message}`);
      }
    } finally {
      setBusy((b) => {
        const { [id]: _, ...rest } = b;
        return rest;
      });
      refresh();
    }
  };

  const post = async (label: string, path: string, payload: unknown) => {
    try {
      await api(token, path, { method: "POST", body: JSON.stringify(payload) });
      setError(undefined);
    } catch (err) {
      setError(`${label}: ${(err as Error).message}`);
    }
  };
  const confirmed = async () => {
    const c = confirm;
    setConfirm(undefined);
    if (!c) return;
    if (c.kind === "stop") {
      setBusy((b) => ({ ...b, "stop-all": true }));
      await post("stop all", "/api/stop", {});
      setBusy(({ "stop-all": _, ...rest }) => rest);
    } else {
      const id = c.job.job_id;
      setBusy((b) => ({ ...b, [id]: true }));
      await post(`kill ${id}`, `/api/jobs/${encodeURIComponent(id)}/kill`, {});
      setBusy(({ [id]: _, ...rest }) => rest);
    }
    refresh();
  };
  const resume = async () => {
    await post("resume", "/api/resume", {});
    refresh();
  };

  // The policy is read when its tab opens (it changes only with the config).
  useEffect(() => {
    if (tab !== "policy") return;
    let live = true;
    api<PolicyInfo>(token, "/api/policy").then(
      (p) => live && (setPolicy(p), setPolicyError(undefined)),
      (err) => live && setPolicyError(`policy: ${(err as Error).message}`),
    );
    return () => {
      live = false;
    };
  }, [tab, token]);

  // The audit chain is verified when Activity opens (and again on each visit).
  useEffect(() => {
    if (tab !== "activity") return;
    let live = true;
    api<Record<string, unknown>>(token, "/api/audit/verify").then(
      (v) => live && setVerify({ result: v }),
      (err) => live && setVerify({ error: (err as Error).message }),
    );
    return () => {
      live = false;
    };
  }, [tab, token]);

  // The address bar follows the Missions tab (`#/missions/<id>`), and the other way round.
  useEffect(() => {
    const want = tab === "missions"
      ? `#/missions${mission ? `/${encodeURIComponent(mission)}` : ""}`
      : "";
    if (location.hash !== want) {
      history.replaceState(null, "", location.pathname + location.search + want);
    }
  }, [tab, mission]);
  useEffect(() => {
    const onHash = () => {
      const m = missionFromHash();
      if (!m) return;
      setTab("missions");
      setMission(m.id);
    };
    addEventListener("hashchange", onHash);
    return () => removeEventListener("hashchange", onHash);
  }, []);

  // Sessions in display order (by agent, then workspace), paged.
  const ordered = orderSessions(sessions);
  const pages = Math.max(1, Math.ceil(ordered.length / PAGE_SIZE));
  const shownPage = Math.min(page, pages - 1);
  const onPage = ordered.slice(shownPage * PAGE_SIZE, (shownPage + 1) * PAGE_SIZE);
  const onPageKey = onPage.map((s) => s.session_id).join(" ");
  // Keep the followed set to the page's open sessions; fill free slots in display order.
  useEffect(() => {
    setFollowed((f) => {
      const open = new Set(onPage.map((s) => s.session_id));
      const next = f.filter((id) => open.has(id));
      for (const s of onPage) {
        if (next.length >= MAX_LIVE) break;
        if (!next.includes(s.session_id)) next.push(s.session_id);
      }
      return next.length === f.length && next.every((id, i) => id === f[i]) ? f : next;
    });
  }, [onPageKey]);
  const follow = (id: string) =>
    setFollowed((f) => [...f.filter((x) => x !== id), id].slice(-MAX_LIVE));
  /** Shows the page holding session `id` and follows it live. */
  const showSession = (id: string) => {
    const i = ordered.findIndex((s) => s.session_id === id);
    if (i >= 0) setPage(Math.floor(i / PAGE_SIZE));
    follow(id);
  };
  // "Open terminal" (Missions): follow the session live and scroll its card into view.
  const openSession = (id: string) => {
    showSession(id);
    setTab("sessions");
    setTimeout(() => {
      document.querySelector(`[data-session="${CSS.escape(id)}"]`)?.scrollIntoView({
        block: "start",
      });
    }, 50);
  };
  const loadOutput = (id: string, cursor?: string) =>
    api<JobOutputPage>(
      token,
      `/api/jobs/${encodeURIComponent(id)}/output${
        cursor ? `?cursor=${encodeURIComponent(cursor)}` : ""
      }`,
    );

  const byAgent = new Map<string, OperatorSession[]>();
  for (const s of onPage) {
    const list = byAgent.get(s.owner) ?? [];
    list.push(s);
    byAgent.set(s.owner, list);
  }
  const agents = [...byAgent.keys()].sort();
  // Commands parked for approval, by session (each card shows a banner with Approve / Deny).
  const parked = new Map<string, PendingApproval[]>();
  for (const a of approvals) parked.set(a.session_id, [...(parked.get(a.session_id) ?? []), a]);
  // Jobs the stop-all barrier refused: the engine ends them `failed`; their event says refused.
  const refused = new Map<string, string>();
  for (const e of events) {
    if (e.type === "admission.refused" && typeof e.data.job_id === "string") {
      refused.set(e.data.job_id, String(e.data.reason ?? "refused"));
    }
  }
  const activeJobs = jobs.filter(isActive).length;
  const stopped = status?.stopped ?? false;
  // Not live: the lists are whatever the last refresh saw; say so (and dim the views).
  const stale = conn !== "live";
  const staleText = updatedAt
    ? `stale data — last update ${updatedAt.toLocaleTimeString([], { hour12: false })}`
    : "no data yet";
  const staleNote = stale && (
    <p class="stale-note" data-stale-note>
      The event stream is {conn}: this view may be out of date ({staleText}).
    </p>
  );
  const viewClass = (name: string) => `${name}${stale ? " stale" : ""}`;
  const tabButton = (t: Tab, label: string, count?: preact.JSX.Element) => (
    <button
      type="button"
      class={tab === t ? "on" : ""}
      aria-pressed={tab === t}
      data-tab={t}
      onClick={() => setTab(t)}
    >
      {label}
      {count && " "}
      {count}
    </button>
  );

  return (
    <div class="app">
      <header class="top">
        <h1>Termada</h1>
        <span class={`conn ${conn}`} data-conn={conn}>{conn}</span>
        {stale && <span class="stale-badge" data-stale role="status">{staleText}</span>}
        <span class={`barrier ${stopped ? "on" : ""}`} data-barrier={String(stopped)}>
          {stopped
            ? `stopped until ${new Date(status?.barrier_until ?? "").toLocaleTimeString()}`
            : "running"}
        </span>
        {stopped && <button type="button" onClick={resume}>Resume</button>}
        {status?.boundary && <BoundaryBadge b={status.boundary} />}
        <button
          type="button"
          class="danger stop-all"
          data-stop-all
          disabled={busy["stop-all"]}
          onClick={() => setConfirm({ kind: "stop" })}
        >
          Stop all
        </button>
        <nav>
          {tabButton("sessions", "Sessions", <span class="count">{sessions.length}</span>)}
          {tabButton(
            "approvals",
            "Approvals",
            <span class={`count ${approvals.length ? "pending" : ""}`} data-pending>
              {approvals.length}
            </span>,
          )}
          {tabButton("missions", "Missions")}
          {tabButton("jobs", "Jobs", <span class="count" data-active-jobs>{activeJobs}</span>)}
          {tabButton("servers", "Servers")}
          {tabButton("vault", "Vault")}
          {tabButton("governance", "Governance")}
          {tabButton("replay", "Replay")}
          {tabButton("activity", "Activity")}
          {tabButton("agents", "Agents")}
          {tabButton("policy", "Policy")}
        </nav>
      </header>
      {error && <p class="error" role="alert">{error}</p>}
      <main hidden={tab !== "sessions"} class={viewClass("sessions")} data-stale={String(stale)}>
        {staleNote}
        {agents.length === 0 && <p class="empty">No open sessions.</p>}
        {pages > 1 && (
          <SessionPager
            sessions={ordered}
            page={shownPage}
            pages={pages}
            parked={parked}
            onPage={setPage}
            onShow={showSession}
          />
        )}
        {agents.map((agent) => (
          <section class="agent" key={agent} data-agent={agent}>
            <h2>{agent}</h2>
            {byWorkspace(byAgent.get(agent)!).map(([ws, list]) => (
              <div class="workspace" key={ws ?? ""} data-workspace={ws ?? ""}>
                {ws !== undefined && <h3 class="ws-label">{ws}</h3>}
                {list.map((s) => (
                  <SessionCard
                    key={s.session_id}
                    session={s}
                    token={token}
                    live={followed.includes(s.session_id)}
                    onFollow={() => follow(s.session_id)}
                    onLease={soon}
                    approvals={{
                      pending: parked.get(s.session_id) ?? [],
                      busy,
                      onDecide: decide,
                    }}
                  />
                ))}
              </div>
            ))}
          </section>
        ))}
      </main>
      <main hidden={tab !== "approvals"} class={viewClass("approvals")} data-stale={String(stale)}>
        {staleNote}
        {approvals.length === 0 && <p class="empty">No approvals waiting.</p>}
        <ul>
          {approvals.map((a) => (
            <li key={a.approval_id} data-approval={a.approval_id}>
              <div class="who">
                <strong>{a.owner}</strong> · {a.session_id} · {a.mode} ·{" "}
                <time>{new Date(a.requested_at).toLocaleTimeString()}</time>
              </div>
              <pre>{a.command.join(" ")}</pre>
              <ApprovalQuorum approval={a} />
              {voted[a.approval_id] && (
                <p class="note" role="status" data-vote-counted>
                  Your vote counted: {voted[a.approval_id]!.votes} of {voted[a.approval_id]!.quorum}
                </p>
              )}
              <ProblemLine problem={cardErrors[a.approval_id]} tag="approval-error" />
              <ApprovalActions
                approvalId={a.approval_id}
                reason={reasons[a.approval_id] ?? ""}
                busy={!!busy[a.approval_id]}
                onReason={(v) => setReasons((r) => ({ ...r, [a.approval_id]: v }))}
                onDecide={(verb) => decide(a.approval_id, verb)}
              />
            </li>
          ))}
        </ul>
      </main>
      <main hidden={tab !== "jobs"} class={viewClass("jobs-view")} data-stale={String(stale)}>
        {staleNote}
        <JobsView
          token={token}
          refused={refused}
          jobs={jobs}
          busy={busy}
          onKill={(job) => setConfirm({ kind: "kill", job })}
          loadOutput={loadOutput}
        />
      </main>
      <main
        hidden={tab !== "missions"}
        class={viewClass("missions-view")}
        data-stale={String(stale)}
      >
        {staleNote}
        <MissionsView
          token={token}
          visible={tab === "missions"}
          pulse={missionPulse}
          selected={mission}
          onSelect={setMission}
          approvals={approvals}
          busy={busy}
          reasons={reasons}
          onReason={(id, v) => setReasons((r) => ({ ...r, [id]: v }))}
          onDecide={decide}
          sessionIds={sessions.map((s) => s.session_id)}
          onOpenSession={openSession}
          loadOutput={loadOutput}
        />
      </main>
      <main hidden={tab !== "servers"} class={viewClass("servers-view")} data-stale={String(stale)}>
        {staleNote}
        <ServersView
          token={token}
          visible={tab === "servers"}
          pulse={serverPulse}
          sessions={sessions}
        />
      </main>
      <main hidden={tab !== "vault"} class={viewClass("vault-view")} data-stale={String(stale)}>
        {staleNote}
        <VaultView token={token} visible={tab === "vault"} pulse={vaultPulse} />
      </main>
      <main
        hidden={tab !== "governance"}
        class={viewClass("governance-view")}
        data-stale={String(stale)}
      >
        {staleNote}
        <GovernanceView token={token} visible={tab === "governance"} pulse={govPulse} />
      </main>
      <main hidden={tab !== "replay"} class={viewClass("replay-view")} data-stale={String(stale)}>
        {staleNote}
        <ReplayView
          token={token}
          visible={tab === "replay"}
          pulse={replayPulse}
          selected={replaying}
          onSelect={setReplaying}
        />
      </main>
      <main hidden={tab !== "activity"} class={viewClass("activity")} data-stale={String(stale)}>
        {staleNote}
        <ActivityView events={events} verify={verify} />
      </main>
      <main hidden={tab !== "agents"} class={viewClass("agents-view")} data-stale={String(stale)}>
        {staleNote}
        <AgentsView rows={agentRows(sessions, jobs, events)} />
      </main>
      <main hidden={tab !== "policy"} class={viewClass("policy-view")} data-stale={String(stale)}>
        {staleNote}
        <PolicyView policy={policy} error={policyError} />
      </main>
      <Confirm
        open={confirm !== undefined}
        title={confirm?.kind === "kill" ? `Kill job ${confirm.job.job_id}?` : "Stop everything?"}
        confirmLabel={confirm?.kind === "kill" ? "Kill" : "Stop all"}
        onConfirm={confirmed}
        onCancel={() => setConfirm(undefined)}
      >
        {confirm?.kind === "kill"
          ? (
            <p>
              {confirm.job.owner}: <code>{confirm.job.command.join(" ")}</code>{" "}
              gets INT, then TERM, then KILL.
            </p>
          )
          : (
            <p>
              Every active job of every agent is stopped, pending approvals are denied, and new
              commands are refused for 30 s.
            </p>
          )}
      </Confirm>
    </div>
  );
}

/** Sessions in the Sessions view's order: by agent, then workspace (labelled first). */
function orderSessions(list: OperatorSession[]): OperatorSession[] {
  const byOwner = new Map<string, OperatorSession[]>();
  for (const s of list) byOwner.set(s.owner, [...(byOwner.get(s.owner) ?? []), s]);
  return [...byOwner.keys()].sort().flatMap((o) =>
    byWorkspace(byOwner.get(o)!).flatMap(([, l]) => l)
  );
}

/**
 * The pager of the Sessions view (more sessions than a page holds): previous / next, which
 * sessions the page shows, and every session as a chip (its state, a mark when a command of it
 * waits for approval) that opens its page and follows it.
 */
function SessionPager(props: {
  sessions: OperatorSession[];
  page: number;
  pages: number;
  parked: Map<string, PendingApproval[]>;
  onPage: (n: number) => void;
  onShow: (id: string) => void;
}): preact.JSX.Element {
  const { page, pages } = props;
  const from = page * PAGE_SIZE;
  const to = Math.min(props.sessions.length, from + PAGE_SIZE);
  return (
    <nav class="pager" aria-label="Session pages" data-pager>
      <button
        type="button"
        data-page-prev
        disabled={page === 0}
        onClick={() => props.onPage(page - 1)}
      >
        ‹ Previous
      </button>
      <span data-page-info={`${page + 1}/${pages}`}>
        Sessions {from + 1}–{to} of {props.sessions.length} · page {page + 1} of {pages}
      </span>
      <button
        type="button"
        data-page-next
        disabled={page >= pages - 1}
        onClick={() => props.onPage(page + 1)}
      >
        Next ›
      </button>
      <ol class="session-index">
        {props.sessions.map((s, i) => (
          <li key={s.session_id}>
            <button
              type="button"
              data-session-chip={s.session_id}
              class={`chip ${s.state} ${Math.floor(i / PAGE_SIZE) === page ? "here" : ""}`}
              title={`${s.owner} · ${s.cwd} · ${s.cols}×${s.rows}`}
              onClick={() => props.onShow(s.session_id)}
            >
              {s.session_id}
              {props.parked.has(s.session_id) && <span class="wait">· approval</span>}
            </button>
          </li>
        ))}
      </ol>
    </nav>
  );
}

function NoToken(): preact.JSX.Element {
  return (
    <div class="app">
      <header class="top">
        <h1>Termada</h1>
        <span class="conn offline" data-conn="offline">offline</span>
      </header>
      <p class="error" role="alert">
        No operator token. Open the tokenized Dashboard URL the daemon printed at start.
      </p>
    </div>
  );
}

const token = takeToken();
render(token ? <App token={token} /> : <NoToken />, document.getElementById("app")!);

/**
 * What the kernel boundary around sessions holds on this machine: "boundary on" when every part
 * is active, otherwise what is missing (hover: each part and why not; docs/SECURITY.md).
 */
function BoundaryBadge({ b }: { b: DaemonStatus["boundary"] }) {
  const parts = [
    ["exec gate", b.exec_gate],
    [`control plane hidden${b.hiding.how ? ` (${b.hiding.how})` : ""}`, b.hiding],
    [`landlock${b.landlock.abi ? ` v${b.landlock.abi}` : ""}`, b.landlock],
    ["cgroups", b.cgroup],
  ] as const;
  const missing = parts.filter(([, f]) => !f.active);
  const state = b.mode === "off" ? "off" : missing.length === 0 ? "on" : "degraded";
  const title = parts.map(([name, f]) =>
    `${name}: ${f.active ? "on" : `off — ${f.reason ?? "unavailable"}`}`
  ).join("\n");
  return (
    <span class={`boundary ${state}`} data-boundary={state} title={`mode ${b.mode}\n${title}`}>
      {state === "on"
        ? "boundary on"
        : state === "off"
        ? "boundary off"
        : `boundary: no ${missing.map(([name]) => name.split(" (")[0]).join(", ")}`}
    </span>
  );
}
