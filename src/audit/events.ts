/**
 * Every audit event Termada writes, as one typed union: the event name and the shape of its data.
 * Writers (src/control, src/mission, src/daemon) can only append events listed here, with data of
 * the declared shape; readers (missions' timelines, the dashboard's activity feed) match on the
 * same names. Data is redacted by the log before it is hashed and written (docs/AUDIT.md).
 */

/** The policy's decision as recorded (the matching rule when one decided). */
export interface DecisionRecord {
  action: "allow" | "deny" | "confirm";
  reason?: string;
  rule?: { list: string; pattern: string };
}

interface JobRef {
  job_id: string;
  session_id: string;
}

interface JobRequest extends JobRef {
  command: string[];
  mode: "foreground" | "background";
  cwd?: string;
}

interface InputRef extends JobRef {
  /** The line typed (`[secret]` / `[not echoed]` when it must not be kept). */
  line: string;
  reader: string;
}

/** An action as recorded: who asked for what, on which resources. */
interface ActionRef {
  action_id: string;
  kind: string;
  session_id?: string;
  /** What it does, as people read it (argv, path, forward spec). */
  summary: string[];
  /** The resources decided, as people read them (`server "prod"`, `reading "/etc/hosts" on local`). */
  resources: string[];
}

export interface AuditEvents {
  // ── daemon ──
  "config.loaded": {
    source: string;
    path: string;
    agents: string[];
    dev_mode: boolean;
    policies: string[];
  };
  "daemon.recovered": {
    orphaned_jobs: string[];
    closed_sessions: string[];
    expired_approvals: string[];
    denied_jobs: string[];
    /** Admitted actions whose outcome nobody can know now (termada reconcile). */
    unknown_actions?: string[];
  };
  "daemon.stopped": { reason: string };
  "audit.resumed": { after: string; verified_records: number };
  "agent.connected": { via: string };
  "agent.gone": { agent: string; via: string; sessions: string[]; grace_ms: number };
  "agent.returned": { agent: string; sessions: string[] };
  // ── sessions ──
  "session.created": {
    session_id: string;
    /** The server, for a session on one (absent: local). */
    target?: string;
    shell: string;
    cwd: string;
    workspace?: string;
  };
  "session.closed": { session_id: string; reason: string };
  "session.takeover": { session_id: string };
  "session.release": { session_id: string };
  "session.output_paused": { session_id: string };
  "session.output_resumed": { session_id: string };
  "session.resized": { session_id: string; cols: number; rows: number };
  "operator.input": { session_id: string; bytes: number };
  // ── admission and jobs (one job's trail: src/control/trail.ts and the gateway) ──
  "admission.refused": (JobRequest | InputRef | { session_id?: string }) & { reason: string };
  "policy.denied": (JobRequest | InputRef) & { decision: DecisionRecord };
  "approval.requested": JobRequest & { approval_id: string; decision: DecisionRecord };
  "approval.resolved": {
    approval_id: string;
    job_id: string;
    owner: string;
    session_id?: string;
    command?: string[];
    approved: boolean;
    reason?: string;
    /** Who approved it (each a distinct principal) when a quorum decided. */
    approvers?: string[];
  };
  // ── governance (docs/GOVERNANCE.md) ──
  /** One approver's vote, with how they proved who they are. */
  "approval.vote": {
    approval_id: string;
    job_id: string;
    approve: boolean;
    principal: string;
    via: string;
    roles: string[];
    amr: string[];
    delegation?: string[];
    votes: number;
    quorum: number;
    reason?: string;
  };
  /** An approved action was refused when it was about to run (policy changed, grant replayed). */
  "approval.consume_refused": { approval_id: string; job_id: string; reason: string };
  /** A caller was refused before it got an identity (never the credential). */
  "auth.refused": { transport: string; reason: string; agent?: string; suppressed?: number };
  "policy.reloaded": {
    path: string;
    policies: string[];
    agents: string[];
    restart_needed: string[];
  };
  /** An operator settled an action whose outcome the daemon could not know. */
  "action.reconciled": { action_id: string; state: string; note: string };
  "job.requested": JobRequest & { decision: DecisionRecord };
  // ── the exec gate (a program of a session, at its execve) ──
  "exec.denied": {
    job_id?: string;
    session_id: string;
    pid: number;
    path: string;
    argv: string[];
    sha256?: string;
    interpreter?: string;
    decision: DecisionRecord;
  };
  "exec.approval_requested": JobRef & {
    approval_id: string;
    pid: number;
    path: string;
    argv: string[];
    decision: DecisionRecord;
  };
  "job.started_by_operator": JobRef & { command: string[] };
  "job.finished": JobRef & {
    status: string;
    exit_code?: number;
    signal?: string;
    reason?: string;
    duration_ms: number;
    output_bytes: number;
  };
  "job.killed_by_operator": JobRef & { owner: string; status: string; grace_ms?: number };
  "input.written": InputRef & { decision?: DecisionRecord };
  "input.auto_answered": JobRef & { owner: string; prompt: string; answer: string };
  // ── actions that are not jobs: remote sessions, fleet runs, forwards, files (Gateway.admitAction) ──
  "action.requested": ActionRef & { decision: DecisionRecord };
  "action.refused": ActionRef & { reason: string };
  "action.denied": ActionRef & { decision: DecisionRecord };
  "action.approval_requested": {
    action_id: string;
    kind: string;
    session_id?: string;
    summary: string[];
    approval_id: string;
    decision: DecisionRecord;
  };
  /** What the action did (sizes, hashes, exit codes, ports — never file content or secrets). */
  "action.done": {
    action_id: string;
    kind: string;
    ok: boolean;
    error?: string;
    facts?: Record<string, string | number | boolean | null>;
  };
  /** One server of a fleet run finished. */
  "fleet.target": {
    action_id: string;
    server: string;
    status: string;
    exit_code?: number;
    duration_ms: number;
    output_bytes: number;
    error?: string;
  };
  "forward.closed": { action_id: string; forward_id: string; reason: string; connections: number };
  "forward.closed_by_operator": { forward_id: string };
  // ── servers and host keys (src/remote) ──
  "host_key.recorded": {
    server: string;
    host: string;
    port: number;
    key_type: string;
    fingerprint: string;
  };
  "server.added": { server: string; host: string; port: number; user: string; tags: string[] };
  "server.removed": { server: string };
  "host_key.forgotten": { server: string; host: string; port: number };
  "session.link_lost": { session_id: string; server: string; reason: string; job_id?: string };
  "session.reconnected": { session_id: string; server: string; attempt: number };
  // ── the vault (src/control/vault.ts): names and uses, never values ──
  "vault.unlocked": { protection: string; entries: number };
  "vault.unlock_failed": { reason: string };
  "vault.locked": { reason: string };
  "vault.entry_set": { entry: string; kind: string; bytes: number; replaced: boolean };
  "vault.entry_removed": { entry: string };
  "vault.used": {
    entry: string;
    use: "env" | "input" | "server_auth";
    /** `local` or the server's name. */
    target: string;
    variable?: string;
    job_id?: string;
    session_id?: string;
  };
  "vault.denied": {
    entry: string;
    use: "env" | "input" | "server_auth";
    target: string;
    reason: string;
    job_id?: string;
  };
  // ── snapshots (src/control/snapshots.ts; docs/SNAPSHOTS.md) ──
  /** Durable before a restore changes a file: what is restored where, by whom. */
  "snapshot.restore_requested": { snapshot_id: string; target: string; delete_extra: boolean };
  "snapshot.created": {
    snapshot_id: string;
    dir: string;
    files: number;
    bytes: number;
    skipped: number;
    /** `operator`, `agent` (snapshot_create), `policy` (before a command), `restore` (undo). */
    reason: string;
    job_id?: string;
    session_id?: string;
    pruned?: string[];
  };
  "snapshot.failed": {
    dir: string;
    error: string;
    reason: string;
    job_id?: string;
    /** A policy snapshot that failed under `on_failure: run`: the command ran anyway. */
    ran_anyway?: boolean;
  };
  "snapshot.restored": {
    snapshot_id: string;
    target: string;
    undo_snapshot_id: string;
    restored: number;
    created: number;
    unchanged: number;
    deleted: number;
    failed: number;
    /** The first failed paths with their errors (at most 20). */
    failures: string[];
  };
  "snapshot.removed": { snapshot_id: string; removed_objects: number; freed_bytes: number };
  // ── kill switch ──
  "stop_all": { barrier_ms: number };
  "stop_all.done": { stopped_jobs: string[]; cancelled_approvals: string[] };
  "stop_all.lifted": Record<string, never>;
  // ── missions (src/mission) ──
  "mission.created": {
    mission_id: string;
    session_id: string;
    title: string;
    goal: string;
    plan: string[];
    target: string;
    workspace: string;
  };
  "mission.updated": {
    mission_id: string;
    step_id?: string;
    step_status?: string;
    job_id?: string;
    adapter_run_id?: string;
    evidence?:
      | { status: string; exit_code?: number; output_sha256: string | null }
      | { adapter: string; phase: string; receipt_sha256: string | null };
    note?: string;
    summary?: string;
    status?: string;
  };
  "mission.status": { mission_id: string; from: string; to: string; reason: string };
  "mission.resumed": { mission_id: string; session_id: string; attempt: number };
  "mission.reported": {
    mission_id: string;
    sha256: string;
    evidence_sha256: string;
    bytes: number;
  };
}

export type AuditEventName = keyof AuditEvents;
