/** @jsxImportSource preact */
/** @jsxRuntime automatic */
/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
/**
 * Governance: what the operator settles or watches that is not a single job — admitted actions
 * whose outcome the daemon could not know (a restart mid-action), to be marked succeeded or
 * failed with a note; every budget's standing in its window; and the signed anchors of the
 * audit chain with their receivers. Data: `GET /api/actions?state=outcome_unknown`,
 * `POST /api/actions/{id}/reconcile`, `GET /api/budgets`, `GET /api/audit/anchors`,
 * `POST /api/audit/anchor`; refetched (throttled) while the tab is shown when the App bumps
 * `pulse` (approval, action, policy, auth, audit and job events). Also the approval requirements
 * line the Approvals view shows on a card (quorum, roles, MFA, requester excluded).
 */
import { useCallback, useState } from "preact/hooks";
import { api, HttpError } from "./api.ts";
import { useBusy, useThrottledLoad } from "./hooks.ts";
import type { PendingApproval } from "../src/wire/mod.ts";

// The shapes below mirror the daemon's answers (src/store/governance.ts, src/governance/); the
// wire contract has no schema for them yet, and the dashboard imports types from it only.

/** One admitted action (`GET /api/actions`). */
export interface ActionView {
  id: string;
  kind: string;
  /** The agent id. */
  owner: string;
  principal: string;
  tenant: string | null;
  recipient: string;
  summary: string[];
  state: "admitted" | "succeeded" | "failed" | "released" | "outcome_unknown";
  /** Epoch ms. */
  admitted_at: number;
  ended_at: number | null;
  reconciled_by: string | null;
  reconciled_at: number | null;
  reconcile_note: string | null;
}

/** One budget's standing in its current window (`GET /api/budgets`). */
export interface BudgetView {
  /** `<policy>/<name>`. */
  budget: string;
  scope_key: string;
  metric: string;
  used: number;
  reserved: number;
  limit: number;
  /** ISO, or null when it never resets. */
  reset_at: string | null;
}

export interface AnchorReceiverView {
  name: string;
  url: string;
  pending: number;
  delivered_through: number;
  last_error: string | null;
  next_retry: string | null;
}

/** `GET /api/audit/anchors`. */
export interface AnchorStatusView {
  key_id: string;
  last_anchor: { seq: number; hash: string; time: string } | null;
  last_error?: string | null;
  receivers: AnchorReceiverView[];
}

/** What went wrong, as the daemon put it. */
interface Problem {
  message: string;
  hint?: string;
}

/** The daemon's message and hint of a failed request. */
export function problemOf(err: unknown): Problem {
  if (err instanceof HttpError) {
    return { message: err.message, ...(err.body?.hint ? { hint: err.body.hint } : {}) };
  }
  return { message: String((err as Error)?.message ?? err) };
}

/** A failed request's message (and hint) where it happened. */
export function ProblemLine(
  props: { problem: Problem | undefined; tag: string },
): preact.JSX.Element | null {
  if (!props.problem) return null;
  const attrs = { [`data-${props.tag}`]: true };
  return (
    <p class="op-error" role="alert" {...attrs}>
      <span class="op-error-message">{props.problem.message}</span>
      {props.problem.hint && <span class="op-error-hint">{props.problem.hint}</span>}
    </p>
  );
}

/** A local date and time, the ISO form on hover. */
function When(props: { at: number | string | null | undefined }): preact.JSX.Element {
  if (props.at === null || props.at === undefined) return <span class="dim">—</span>;
  const d = new Date(props.at);
  if (Number.isNaN(d.getTime())) return <span>{String(props.at)}</span>;
  const iso = d.toISOString();
  return <time dateTime={iso} title={iso}>{d.toLocaleString()}</time>;
}

/**
 * Who must approve a waiting request, when it is more than one operator: "1 of 2 approvers ·
 * role sre · MFA · not alice", and who approved so far. Nothing for a plain one-operator rule.
 */
export function ApprovalQuorum(props: { approval: PendingApproval }): preact.JSX.Element | null {
  const a = props.approval;
  const r = a.requirements;
  if (!r || !(r.quorum > 1 || r.roles.length > 0 || r.mfa || r.exclude_requester)) return null;
  const approvers = a.approvers ?? [];
  const parts = [`${approvers.length} of ${r.quorum} ${r.quorum === 1 ? "approver" : "approvers"}`];
  if (r.roles.length > 0) parts.push(`role ${r.roles.join(" or ")}`);
  if (r.mfa) parts.push("MFA");
  if (r.exclude_requester) parts.push(`not ${a.requester ?? "the requester"}`);
  return (
    <div class="quorum" data-quorum={a.approval_id}>
      <span data-requirements>{parts.join(" · ")}</span>
      {approvers.length > 0 && (
        <span class="dim" data-approvers>approved by {approvers.join(", ")}</span>
      )}
    </div>
  );
}

type Part<T> = { ok: T } | { error: Problem; missing?: boolean } | undefined;

async function part<T>(p: Promise<T>): Promise<Part<T>> {
  try {
    return { ok: await p };
  } catch (err) {
    // 404 / 501: an older daemon, or one that keeps no actions or anchors.
    const missing = err instanceof HttpError && (err.status === 404 || err.status === 501);
    return { error: problemOf(err), missing };
  }
}

export function GovernanceView(props: {
  token: string;
  /** The tab is shown: data is fetched only then (and on events while shown). */
  visible: boolean;
  /** Bumped by the App on governance-related events and when the stream is live again. */
  pulse: number;
}): preact.JSX.Element {
  const { token } = props;
  const [actions, setActions] = useState<Part<ActionView[]>>();
  const [budgets, setBudgets] = useState<Part<BudgetView[]>>();
  const [anchors, setAnchors] = useState<Part<AnchorStatusView>>();
  // Settled here: hidden at once, even if a fetch that started earlier still lists them.
  const [settled, setSettled] = useState<Set<string>>(() => new Set());
  const [notes, setNotes] = useState<Record<string, string>>({});
  const [rowErrors, setRowErrors] = useState<Record<string, Problem>>({});
  const [busy, run] = useBusy();
  const [note, setNote] = useState<string | undefined>();
  const [anchorError, setAnchorError] = useState<Problem | undefined>();

  const load = useCallback(async () => {
    const [a, b, n] = await Promise.all([
      part(
        api<{ actions: ActionView[] }>(token, "/api/actions?state=outcome_unknown&limit=200").then(
          (x) => x.actions,
        ),
      ),
      part(api<{ budgets: BudgetView[] }>(token, "/api/budgets").then((x) => x.budgets)),
      part(api<AnchorStatusView>(token, "/api/audit/anchors")),
    ]);
    setActions(a);
    setBudgets(b);
    setAnchors(n);
  }, [token]);

  useThrottledLoad(load, props.visible, props.pulse);

  const reconcile = (row: ActionView, state: "succeeded" | "failed") => {
    const text = (notes[row.id] ?? "").trim();
    if (text === "") return;
    setNote(undefined);
    setRowErrors(({ [row.id]: _, ...rest }) => rest);
    return run(row.id, async () => {
      try {
        await api<ActionView>(token, `/api/actions/${encodeURIComponent(row.id)}/reconcile`, {
          method: "POST",
          body: JSON.stringify({ state, note: text }),
        });
        setSettled((s) => new Set(s).add(row.id));
        setNotes(({ [row.id]: _, ...rest }) => rest);
        setNote(`Marked ${row.id} as ${state}`);
      } catch (err) {
        setRowErrors((e) => ({ ...e, [row.id]: problemOf(err) }));
      }
      await load();
    });
  };

  const anchorNow = () => {
    setAnchorError(undefined);
    setNote(undefined);
    return run("anchor", async () => {
      try {
        await api(token, "/api/audit/anchor", { method: "POST", body: "{}" });
      } catch (err) {
        setAnchorError(problemOf(err));
      }
      await load();
    });
  };

  const unknown = actions && "ok" in actions
    ? actions.ok.filter((x) => x.state === "outcome_unknown" && !settled.has(x.id))
    : [];

  return (
    <div class="governance">
      {note && <p class="note" role="status" data-gov-note>{note}</p>}

      <section class="gov-section" data-gov-section="actions" aria-label="Outcome unknown">
        <h2>Outcome unknown</h2>
        <p class="dim">
          Actions the daemon admitted but could not see finish (it restarted, or a link was lost).
          Say what happened; budgets count it that way.
        </p>
        {actions === undefined
          ? <p class="empty">Loading…</p>
          : "error" in actions
          ? <ProblemLine problem={actions.error} tag="gov-actions-error" />
          : unknown.length === 0
          ? <p class="empty" data-gov-actions-empty>Nothing to reconcile.</p>
          : (
            <ul class="gov-actions">
              {unknown.map((row) => {
                const text = notes[row.id] ?? "";
                const off = !!busy[row.id] || text.trim() === "";
                return (
                  <li key={row.id} data-action={row.id} data-kind={row.kind}>
                    <div class="who">
                      <span class="mono">{row.id}</span> · <span class="badge">{row.kind}</span> ·
                      {" "}
                      <strong>{row.owner}</strong>
                      {row.principal && row.principal !== row.owner && (
                        <span class="dim">{` (${row.principal})`}</span>
                      )} · {row.recipient} · <When at={row.admitted_at} />
                    </div>
                    {row.summary.length > 0 && <pre>{row.summary.join(" ")}</pre>}
                    <div class="actions">
                      <input
                        class="reason"
                        data-action-note={row.id}
                        aria-label={`Note for action ${row.id}`}
                        placeholder="What happened (required)"
                        maxLength={1000}
                        value={text}
                        onInput={(e) => {
                          const v = (e.currentTarget as HTMLInputElement).value;
                          setNotes((n) => ({ ...n, [row.id]: v }));
                        }}
                      />
                      <button
                        type="button"
                        class="approve"
                        data-reconcile="succeeded"
                        disabled={off}
                        onClick={() => reconcile(row, "succeeded")}
                      >
                        It succeeded
                      </button>
                      <button
                        type="button"
                        class="deny"
                        data-reconcile="failed"
                        disabled={off}
                        onClick={() => reconcile(row, "failed")}
                      >
                        It failed
                      </button>
                    </div>
                    <ProblemLine problem={rowErrors[row.id]} tag="action-error" />
                  </li>
                );
              })}
            </ul>
          )}
      </section>

      <section class="gov-section" data-gov-section="budgets" aria-label="Budgets">
        <h2>Budgets</h2>
        {budgets === undefined
          ? <p class="empty">Loading…</p>
          : "error" in budgets
          ? <ProblemLine problem={budgets.error} tag="gov-budgets-error" />
          : budgets.ok.length === 0
          ? <p class="empty" data-gov-budgets-empty>No budgets in the policies.</p>
          : (
            <div class="table-scroll">
              <table class="budget-table">
                <thead>
                  <tr>
                    <th>Budget</th>
                    <th>Scope</th>
                    <th>Used</th>
                    <th>Resets</th>
                  </tr>
                </thead>
                <tbody>
                  {budgets.ok.map((b) => (
                    <tr
                      key={`${b.budget} ${b.scope_key}`}
                      data-budget={b.budget}
                      data-scope={b.scope_key}
                      data-used={b.used}
                      data-limit={b.limit}
                    >
                      <td class="mono">{b.budget}</td>
                      <td class="mono">{b.scope_key}</td>
                      <td class="budget-used">
                        <meter
                          min={0}
                          max={b.limit}
                          value={Math.min(b.used + b.reserved, b.limit)}
                          low={b.limit * 0.5}
                          high={b.limit * 0.8}
                          optimum={0}
                          aria-label={`${b.budget} used`}
                        />
                        <span data-budget-text>
                          {b.used} / {b.limit} {b.metric}
                          {b.reserved > 0 && ` (${b.reserved} reserved)`}
                        </span>
                      </td>
                      <td>{b.reset_at ? <When at={b.reset_at} /> : "never"}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )}
      </section>

      <section class="gov-section" data-gov-section="anchors" aria-label="Audit anchors">
        <h2>Audit anchors</h2>
        {anchors === undefined
          ? <p class="empty">Loading…</p>
          : "error" in anchors
          ? <ProblemLine problem={anchors.error} tag="gov-anchors-error" />
          : (
            <>
              <div
                class="anchor-status"
                data-anchor-seq={anchors.ok.last_anchor?.seq ?? ""}
              >
                <span>
                  key <span class="mono" data-anchor-key>{anchors.ok.key_id}</span>
                </span>
                <span data-anchor-last>
                  {anchors.ok.last_anchor
                    ? (
                      <>
                        last anchor seq {anchors.ok.last_anchor.seq} at{" "}
                        <When at={anchors.ok.last_anchor.time} />
                      </>
                    )
                    : "no anchor yet"}
                </span>
                <button
                  type="button"
                  data-anchor-now
                  disabled={!!busy.anchor}
                  onClick={anchorNow}
                >
                  {busy.anchor ? "Anchoring…" : "Anchor now"}
                </button>
              </div>
              {anchors.ok.last_error && (
                <p class="op-error" data-anchor-error>{anchors.ok.last_error}</p>
              )}
              <ProblemLine problem={anchorError} tag="anchor-now-error" />
              {anchors.ok.receivers.length === 0
                ? (
                  <p class="empty" data-anchor-no-receivers>
                    No receivers: anchors are kept on this machine only.
                  </p>
                )
                : (
                  <div class="table-scroll">
                    <table class="anchor-table">
                      <thead>
                        <tr>
                          <th>Receiver</th>
                          <th>Pending</th>
                          <th>Delivered through</th>
                          <th>Last error</th>
                          <th>Next retry</th>
                        </tr>
                      </thead>
                      <tbody>
                        {anchors.ok.receivers.map((r) => (
                          <tr key={r.name} data-receiver={r.name} data-pending={r.pending}>
                            <td>
                              <strong>{r.name}</strong>
                              <div class="dim mono receiver-url">{r.url}</div>
                            </td>
                            <td>{r.pending}</td>
                            <td>{r.delivered_through}</td>
                            <td class="receiver-error" data-receiver-error>
                              {r.last_error ?? <span class="dim">—</span>}
                            </td>
                            <td>
                              <When at={r.next_retry} />
                            </td>
                          </tr>
                        ))}
                      </tbody>
                    </table>
                  </div>
                )}
            </>
          )}
      </section>
    </div>
  );
}
