/**
 * What an agent can do, as the edges call it (MCP tools today; anything that speaks for an
 * agent later): sessions and commands. Every operation takes the caller's identity and parsed
 * input (src/wire), passes the gateway where it has a side effect, then drives the engine. An
 * agent only ever sees its own sessions and jobs (others' ids are NOT_FOUND).
 */
import type { AdapterOps } from "./adapters.ts";
import {
  type CallOptions,
  DEFAULT_RUN_WAIT_MS,
  encodeKeys,
  type Engine,
  type Job,
  type LaunchSpec,
  type Reservation,
  secretsToServerJob,
  type Session,
  sessionInfo,
} from "../engine/mod.ts";
import { notFound, TermadaError, toTermadaError } from "../shared/mod.ts";
import { PARSE_LIMITS, parseOutput, parserEnv } from "../parse/mod.ts";
import { decodeCursor, encodeCursor, MAX_PAGE_BYTES } from "../output/mod.ts";
import type {
  Boundary,
  ExecKillInput,
  ExecListInput,
  ExecPollInput,
  ExecRunInput,
  ExecSignalInput,
  ExecStartInput,
  ExecWaitInput,
  ExecWriteInput,
  JobAck,
  JobList,
  JobResult,
  JobStarted,
  ParsedJobResult,
  Screen,
  SessionClosed,
  SessionCreateInput,
  SessionIdInput,
  SessionInfo,
  SessionScreenInput,
} from "../wire/mod.ts";
import { splitEnv } from "../wire/mod.ts";
import type { ApprovalBook } from "./approvals.ts";
import type { Gateway } from "./gateway.ts";
import { noRemote, type RemoteOps } from "./remote.ts";
import { FileOps } from "./files.ts";
import { HUMAN_INPUT_MAX_BYTES, HumanInputs } from "./human_input.ts";
import { SnapshotOps, type SnapshotPolicy } from "./snapshots.ts";
import type { Trail } from "./trail.ts";
import { type AgentVaultEntry, assertDataVariables, type VaultOps } from "./vault.ts";
import { type RecordingCast, RecordingOps, type RecordingsOptions } from "./recordings.ts";

/** Programs whose stdin lines are commands: a line typed into them is checked like a command. */

function notAtPrompt(jobId: string, why: string): TermadaError {
  return new TermadaError(
    "NOT_AWAITING_INPUT",
    `Cannot write to job "${jobId}" while it runs: ${why}`,
    {
      details: { job_id: jobId },
      hint: "Wait for its prompt with exec_wait until.prompt, then exec_write",
    },
  );
}

/**
 * The text of encoded keys. Where the reader runs what it reads (a shell, an interpreter, a
 * program on a server), only text, Tab, Enter, Ctrl-C and Ctrl-D: editing keys (arrows, Ctrl-U,
 * Escape sequences) would make another line than the one the policy checks.
 */
function keysText(bytes: Uint8Array, jobId: string, commands: boolean): string {
  const text = new TextDecoder().decode(bytes);
  // deno-lint-ignore no-control-regex
  if (commands && /[\x00-\x02\x05-\x08\x0b-\x0c\x0e-\x1f\x7f]/.test(text)) {
    throw new TermadaError(
      "INVALID_ARGUMENT",
      `Cannot send editing keys to job "${jobId}": what reads them runs commands, and keys ` +
        "that edit the line would run another line than the policy checked",
      { details: { job_id: jobId }, hint: 'Send text and "Enter" (or "C-c"), or use "input"' },
    );
  }
  return text;
}

export interface AgentOpsOptions {
  engine: Engine;
  gateway: Gateway;
  approvals: ApprovalBook;
  trail: Trail;
  /** Servers (src/remote); absent: only local sessions. */
  remote?: RemoteOps;
  /** What the file tools never touch (see FileOpsOptions.forbidden). */
  forbiddenPaths?: { all: readonly string[]; write: readonly string[] };
  /** The vault (values used by reference); absent: every reference is VAULT_LOCKED. */
  vault?: VaultOps;
  /** The daemon's loopback base URL (`http://127.0.0.1:PORT`) for one-time answer pages. */
  publicUrl?: () => string | undefined;
  /** Snapshots (the store's root, the policy's rules); absent: the snapshot tools are off. */
  snapshots?: { root: string; rules?: (agent: string) => SnapshotPolicy | undefined };
  /** Typed adapter runs (their journal, the config's adapters); absent: the tools say so. */
  adapters?: AdapterOps;
}

/** A session to open: its environment holds plain values (vault references resolved). */
type OpenSpec = Omit<SessionCreateInput, "target" | "env"> & { env?: Record<string, string> };

export class AgentOps {
  readonly #engine: Engine;
  readonly #gateway: Gateway;
  readonly #approvals: ApprovalBook;
  readonly #trail: Trail;
  readonly #remote: RemoteOps | undefined;
  readonly #files: FileOps;
  readonly #vault: VaultOps | undefined;
  readonly #humans = new HumanInputs();
  readonly #publicUrl: (() => string | undefined) | undefined;
  /** snapshot_create / snapshot_list and the policy's snapshots before commands. */
  readonly snapshotOps: SnapshotOps | undefined;
  /** Each agent's default session (created on first use), by owner. */
  readonly #defaults = new Map<string, Promise<Session>>();
  readonly #adapters: AdapterOps | undefined;

  constructor(o: AgentOpsOptions) {
    this.#adapters = o.adapters;
    this.#engine = o.engine;
    this.#gateway = o.gateway;
    this.#approvals = o.approvals;
    this.#trail = o.trail;
    this.#remote = o.remote;
    this.#vault = o.vault;
    this.#publicUrl = o.publicUrl;
    this.#files = new FileOps({
      engine: o.engine,
      gateway: o.gateway,
      approvals: o.approvals,
      remote: o.remote,
      forbidden: o.forbiddenPaths,
    });
    this.snapshotOps = o.snapshots
      ? new SnapshotOps({
        root: o.snapshots.root,
        engine: o.engine,
        gateway: o.gateway,
        approvals: o.approvals,
        files: this.#files,
        recorder: o.trail.recorder,
        ...(o.snapshots.rules ? { rules: o.snapshots.rules } : {}),
      })
      : undefined;
  }

  /** The snapshot tools; NOT_SUPPORTED when this daemon keeps no snapshots. */
  snapshots(): SnapshotOps {
    if (this.snapshotOps) return this.snapshotOps;
    throw new TermadaError("NOT_SUPPORTED", "This server keeps no snapshots");
  }

  /** The adapters this daemon offers (capabilities). */
  get adapterNames(): string[] {
    return this.#adapters?.adapters() ?? [];
  }

  /** The adapter tools; NOT_SUPPORTED when this daemon has no adapter journal. */
  adapters(): AdapterOps {
    if (this.#adapters) return this.#adapters;
    throw new TermadaError("NOT_SUPPORTED", "This server runs no adapters");
  }

  /** file_read / file_write, local or in a session's server. */
  files(): FileOps {
    return this.#files;
  }

  /** Remote work (servers, fleet, forwards, files); NOT_SUPPORTED without an inventory. */
  get remote(): RemoteOps | undefined {
    return this.#remote;
  }

  /** What the kernel boundary around sessions holds on this machine (no paths: agents' view). */
  boundary(): Boundary {
    return this.#engine.boundary();
  }

  // ── the vault ─────────────────────────────────────────────────────────────

  /** Whether vault references can be served now (capabilities). */
  get vaultUnlocked(): boolean {
    return this.#vault?.unlocked === true;
  }

  /** vault_list: names and kinds of the entries the caller's policy lets it use somewhere. */
  vaultList(owner: string): { entries: AgentVaultEntry[] } {
    const targets = ["local", ...(this.#remote?.serverNames() ?? [])];
    return { entries: this.#vaultOps().listFor(owner, targets) };
  }

  #vaultOps(): VaultOps {
    if (this.#vault) return this.#vault;
    throw new TermadaError("VAULT_LOCKED", "This daemon has no vault", {
      retriable: false,
      hint: "An operator must create one: `termada vault init`",
    });
  }

  /** Fails fast (before anything is reserved) when references cannot be served. */
  #assertVaultUsable(refs: readonly unknown[]): void {
    if (refs.length > 0) this.#vaultOps().assertUnlocked();
  }

  // ── sessions ──────────────────────────────────────────────────────────────

  async createSession(owner: string, req: SessionCreateInput): Promise<SessionInfo> {
    const { target, env, ...rest } = req;
    const { plain, refs } = splitEnv(env);
    const spec = { ...rest, ...(env ? { env: plain } : {}) };
    if (target !== undefined && target !== "local") {
      if (!this.#remote) throw noRemote(target);
      if (refs.length > 0) {
        // A server's session starts with `env K=V … bash` on the SSH exec line, which other
        // users of that server can read in `ps`.
        throw new TermadaError(
          "NOT_SUPPORTED",
          "Cannot give a session on a server vault values in its environment",
          {
            hint:
              "Pass them to exec_run in that session (env: {NAME: {vault: …}}): staged, never typed",
          },
        );
      }
      return sessionInfo(await this.#openRemote(owner, spec, target));
    }
    assertDataVariables(refs);
    this.#assertVaultUsable(refs);
    if (refs.length === 0) return sessionInfo(await this.#open(owner, spec));
    const vault = this.#vaultOps();
    const where = { target: "local", use: "env" as const };
    vault.check(owner, refs, where);
    // Taken once the session passed the gate (barrier, audit health), right before its shell
    // starts with them in its environment.
    return sessionInfo(
      await this.#open(owner, spec, () => vault.resolveEnv(owner, refs, where)),
    );
  }

  listSessions(owner: string): SessionInfo[] {
    return this.#engine.registry.sessionsOf(owner).map(sessionInfo);
  }

  async closeSession(owner: string, req: SessionIdInput): Promise<SessionClosed> {
    const s = this.#engine.registry.ownSession(owner, req.session_id);
    await s.close("closed by its owner");
    return { ok: true, session_id: req.session_id };
  }

  /** session_screen: the whole screen, or with `since` the rows changed after that read. */
  async screen(owner: string, req: SessionScreenInput): Promise<Screen> {
    const s = this.#engine.registry.ownSession(owner, req.session_id);
    const c = await s.screenSince(req.since);
    const all = c.full ? c.lines.map((l) => l.text) : [];
    return {
      session_id: s.id,
      lines: all,
      cursor: c.cursor,
      cols: c.cols,
      rows: c.rows,
      title: c.title,
      alternate: c.alternate,
      full: c.full,
      ...(c.full ? {} : { changes: c.lines }),
      next_cursor: c.nextCursor,
      modes: {
        application_cursor: c.modes.applicationCursor,
        bracketed_paste: c.modes.bracketedPaste,
      },
    };
  }

  /** Opens a session through the gate; stored and audited, or closed again and refused. */
  async #open(
    owner: string,
    spec: OpenSpec,
    secretEnv?: () => Record<string, string>,
  ): Promise<Session> {
    this.#gateway.admitSession();
    const s = await this.#engine.openSession(
      owner,
      secretEnv ? { ...spec, env: { ...spec.env, ...secretEnv() } } : spec,
    );
    try {
      this.#trail.sessionOpened(s);
    } catch (err) {
      await s.close("could not be recorded");
      const e = toTermadaError(err);
      throw new TermadaError(
        e.code === "AUDIT_UNAVAILABLE" ? "AUDIT_UNAVAILABLE" : "INTERNAL",
        `Cannot open a session: ${e.message}`,
        { cause: err, hint: e.hint },
      );
    }
    return s;
  }

  /** A session on a server: the gate decides the server (a `session` action), then it opens. */
  async #openRemote(
    owner: string,
    spec: OpenSpec,
    target: string,
  ): Promise<Session> {
    const remote = this.#remote!;
    this.#gateway.admitSession();
    const { action, launcher, binding } = await remote.sessionLauncher(owner, target, spec.env);
    let s: Session;
    try {
      s = await this.#engine.openSession(owner, spec, launcher);
    } catch (err) {
      const e = toTermadaError(err);
      remote.done(action, { ok: false, error: e.message });
      throw e;
    }
    try {
      this.#trail.sessionOpened(s);
    } catch (err) {
      await s.close("could not be recorded");
      remote.done(action, { ok: false, error: "the session could not be recorded" });
      const e = toTermadaError(err);
      throw new TermadaError(
        e.code === "AUDIT_UNAVAILABLE" ? "AUDIT_UNAVAILABLE" : "INTERNAL",
        `Cannot open a session: ${e.message}`,
        { cause: err, hint: e.hint },
      );
    }
    remote.done(action, {
      ok: true,
      facts: { session_id: s.id, server: binding.name, host: binding.host, port: binding.port },
    });
    return s;
  }

  async #defaultSession(owner: string): Promise<Session> {
    const existing = this.#defaults.get(owner);
    if (existing) {
      const s = await existing.catch(() => undefined);
      if (s && s.state !== "closed") return s;
    }
    const p = this.#open(owner, {});
    this.#defaults.set(owner, p);
    p.then(
      // Closed (session_close, its shell exited, the reaper): a closed session is not kept
      // for an agent that may never call again.
      (s) => s.onClose(() => this.#defaults.get(owner) === p && this.#defaults.delete(owner)),
      () => this.#defaults.get(owner) === p && this.#defaults.delete(owner),
    );
    return await p;
  }

  /** The owner's default session, if it is open (for the reaper). */
  forgetDefault(owner: string): void {
    this.#defaults.delete(owner);
  }

  // ── approvals asked in the agent's own client (MCP elicitation) ───────────

  /**
   * The approval of one of `owner`'s jobs its MCP client may ask its human about (the daemon
   * enables it with `approvals.elicitation`; only the default one-approval requirement).
   */
  elicitable(
    owner: string,
    approvalId: string,
  ): { command: string[]; expiresAt: number } | undefined {
    return this.#approvals.elicitable(owner, approvalId);
  }

  /**
   * The answer the human gave in the agent's client: one approval by principal
   * `client:<agent>`, audited as such (`via: elicitation`); the first answer wins — one that
   * comes after an operator decided is refused by the book.
   */
  async elicitedDecision(
    owner: string,
    approvalId: string,
    approve: boolean,
    reason?: string,
  ): Promise<void> {
    if (!this.#approvals.elicitable(owner, approvalId)) throw notFound("approval", approvalId);
    const principal = `client:${owner}`;
    await this.#approvals.decide(approvalId, approve, {
      kind: "operator",
      id: principal,
      auth: { via: "elicitation", principal, roles: [], amr: [] },
    }, reason ?? `answered in the client of agent "${owner}"`);
  }

  // ── commands ──────────────────────────────────────────────────────────────

  async start(owner: string, req: ExecStartInput): Promise<JobStarted> {
    const job = await this.#launch(owner, req);
    const notice = this.#takeNotice(job);
    return {
      job_id: job.id,
      session_id: job.sessionId,
      status: job.status,
      mode: job.mode,
      ...(job.approvalId && job.status === "pending_approval"
        ? { approval_id: job.approvalId }
        : {}),
      ...(notice ? { notice } : {}),
    };
  }

  /** Starts a job and waits (bounded) for it to end or need input. A deadline never kills. */
  async run(owner: string, req: ExecRunInput, call: CallOptions = {}): Promise<ParsedJobResult> {
    const t0 = this.#engine.clock.mono();
    // A parsed run gets the locale its parser reads (LC_ALL=C for ls, ps, df…) unless the
    // caller set one; the result says so.
    const parseEnv = req.parse ? parserEnv(req.parse, req.command) : {};
    const setEnv = Object.keys(parseEnv).length > 0 && req.env?.LC_ALL === undefined;
    const job = await this.#launch(
      owner,
      setEnv ? { ...req, env: { ...req.env, ...parseEnv } } : req,
    );
    const notice = this.#takeNotice(job);
    const r = await this.#engine.reads.runResult(
      job,
      req.timeout_ms ?? DEFAULT_RUN_WAIT_MS,
      t0,
      call,
    );
    const withNotice = notice ? { ...r, notice } : r;
    if (!req.parse) return withNotice;
    return {
      ...withNotice,
      ...this.#parsed(job, req.parse),
      ...(setEnv ? { parse_env: { LC_ALL: parseEnv.LC_ALL ?? "C" } } : {}),
    };
  }

  /** `parse` on a job's whole output, once it has ended (bounded: the parsers read ≤ 4 MiB). */
  #parsed(
    job: Job,
    parser: string,
  ): Pick<ParsedJobResult, "parser" | "parsed" | "warnings" | "parse_error"> {
    if (!job.final) {
      return {
        parse_error: {
          message: `Job "${job.id}" is still ${job.status}: its output is parsed once it has ended`,
        },
      };
    }
    const text = this.#engine.reads.fullText(job, PARSE_LIMITS.maxInputChars);
    const r = parseOutput(parser, job.command, text.text);
    if (text.dropped > 0 && "parsed" in r) {
      const warning = {
        message: `The first ${text.dropped} bytes of the output were dropped by retention: ` +
          "they are not in the result",
      };
      return {
        ...r,
        warnings: [warning, ...(r.warnings ?? [])].slice(0, PARSE_LIMITS.maxWarnings),
      };
    }
    return r;
  }

  /** A reconnect notice of the job's session, said once. */
  #takeNotice(job: Job): string | undefined {
    const s = this.#engine.registry.sessionById(job.sessionId);
    const n = s?.notice;
    if (s && n) s.notice = undefined;
    return n;
  }

  async poll(owner: string, req: ExecPollInput, call: CallOptions = {}): Promise<ParsedJobResult> {
    const job = this.job(owner, req.job_id);
    const r = await this.#engine.reads.poll(job, req, call);
    return req.parse ? { ...r, ...this.#parsed(job, req.parse) } : r;
  }

  wait(owner: string, req: ExecWaitInput, call: CallOptions = {}): Promise<JobResult> {
    return this.#engine.reads.wait(this.job(owner, req.job_id), req, call);
  }

  /** Types input for a job that waits for it; a line into a shell passes the gate first. */
  async write(owner: string, req: ExecWriteInput): Promise<JobAck> {
    const job = this.job(owner, req.job_id);
    const running = job.status === "running";
    if (job.status !== "awaiting_input" && !running) {
      throw new TermadaError(
        "NOT_AWAITING_INPUT",
        `Cannot write to job "${job.id}": it is ${job.status}, not running`,
        {
          details: { job_id: job.id },
          hint: "exec_write types into a job that runs; exec_list shows its status",
        },
      );
    }
    if (req.vault !== undefined) {
      if (running) throw notAtPrompt(job.id, "a vault value is typed only at a prompt");
      return await this.#writeVault(owner, job, req, req.vault);
    }
    if (req.human !== undefined) {
      if (running) throw notAtPrompt(job.id, "a person answers only a prompt");
      this.#assertPasswordPrompt(job);
      const r = this.#humans.create(
        owner,
        job.id,
        job.command,
        req.human.message ?? "A program asks for a password",
      );
      return {
        ok: true,
        job_id: job.id,
        status: job.status,
        ...(this.#publicUrl?.() ? { url: `${this.#publicUrl()}/secret/${r.token}` } : {}),
        expires_at: new Date(r.expiresAt).toISOString(),
      };
    }
    const target = this.#engine.jobs.inputTarget(job);
    const onServer = this.#engine.registry.sessionById(job.sessionId)?.remote === true;
    if (running && !target.typeAheadSafe) {
      throw notAtPrompt(
        job.id,
        onServer
          ? "on a server, input goes only to a program waiting for it (what it left unread would reach the shell there)"
          : "in a POSIX sh session, what the job left unread would reach the shell as commands",
      );
    }
    let input: string | Uint8Array = req.input ?? "";
    if (req.keys !== undefined) {
      if (req.secret) {
        throw new TermadaError(
          "INVALID_ARGUMENT",
          'Give a secret as "input" (or "vault"), not "keys"',
        );
      }
      const modes = await target.modes();
      input = encodeKeys(req.keys, {
        applicationCursor: modes.applicationCursor,
        bracketedPaste: req.bracketed ?? modes.bracketedPaste,
      });
    }
    // A running job's input may reach any of its programs: one that runs what it reads makes
    // it a command line, as at its prompt.
    const reader = running ? target.commandReader() : job.inputReader;
    // At a prompt the detection judged the reader (by name and content; an interpreter running
    // a script is not a REPL): its verdict stands.
    const readsCommands = reader !== undefined && (running || job.inputReaderRunsCommands);
    if (typeof input !== "string") {
      input = keysText(input, job.id, readsCommands || onServer);
    }
    if (onServer) {
      // On a server nobody can tell which program reads, or whether the terminal echoes: every
      // line is a command for the policy (a prompt's text proves nothing: the agent can print
      // one). Control characters would let the terminal make other lines than the policy saw.
      // deno-lint-ignore no-control-regex
      if (/[\x00-\x08\x0b-\x1f\x7f]/.test(input)) {
        throw new TermadaError(
          "INVALID_ARGUMENT",
          "Cannot type control characters into a program on a server: the terminal would edit " +
            "the line after the policy checked it",
          { details: { job_id: job.id }, hint: "Send plain text lines (tab and newline are fine)" },
        );
      }
      await this.#gateway.admitInput({
        job,
        line: input,
        reader: "a program on a server",
        remote: true,
        target: this.#engine.registry.sessionById(job.sessionId)?.target ?? "local",
        secret: req.secret === true,
        echoOff: false,
      });
    } else if (readsCommands) {
      // The reader runs what it is given: the line is a command and passes the gate as one —
      // unless the terminal does not echo (a password prompt of su, ssh, sudo…).
      await this.#gateway.admitInput({
        job,
        line: input,
        reader: reader!,
        secret: req.secret === true,
        echoOff: !running && target.passwordPrompt(),
      });
    } else {
      // An answer to a program's prompt: not a command, but an action budgets count.
      this.#gateway.countInput(job, req.secret ? "[secret]" : input);
    }
    if (req.secret) {
      // Registered before the bytes leave, so no echo or later output can carry them.
      for (const r of target.redactors) r.addLiteral(input);
    }
    const newline = req.keys !== undefined || req.append_newline === false ? "" : "\r";
    await target.write(input + newline, { typeAhead: running });
    return { ok: true, job_id: job.id, status: job.status };
  }

  /**
   * The terminal reads without echo (a kernel fact): only then may a person's answer go in
   * unseen by the policy — anywhere else the agent, which also holds the page's URL, could type
   * a command through it.
   */
  #assertPasswordPrompt(job: Job): void {
    if (this.#engine.jobs.inputTarget(job).passwordPrompt()) return;
    throw new TermadaError(
      "NOT_AWAITING_INPUT",
      `Cannot ask a person to answer job "${job.id}": its prompt echoes (not a password prompt)`,
      { details: { job_id: job.id }, hint: "Answer it with exec_write {input}" },
    );
  }

  /** The one-time page's request behind `token` (for the page: the command and the message). */
  humanRequest(token: string): { command: readonly string[]; message: string; expiresAt: number } {
    return this.#humans.get(token);
  }

  /**
   * A person's answer from the one-time page: typed into the job's prompt once, registered with
   * the redactors first, audited as `[typed by a person]`. The page is spent either way.
   */
  async submitHuman(token: string, value: string): Promise<void> {
    const r = this.#humans.take(token);
    if (new TextEncoder().encode(value).length > HUMAN_INPUT_MAX_BYTES || value.includes("\0")) {
      throw new TermadaError(
        "INVALID_ARGUMENT",
        `An answer is at most ${HUMAN_INPUT_MAX_BYTES} bytes, no NUL`,
      );
    }
    const job = this.job(r.owner, r.jobId);
    if (job.status !== "awaiting_input") {
      throw notAtPrompt(job.id, "it no longer waits at its prompt");
    }
    this.#assertPasswordPrompt(job);
    const target = this.#engine.jobs.inputTarget(job);
    await this.#gateway.admitInput({
      job,
      line: "",
      reader: job.inputReader ?? "a program",
      secret: true,
      echoOff: true,
      human: true,
    });
    const line = value.replace(/\r?\n$/, "");
    for (const red of target.redactors) red.addLiteral(line);
    await target.write(line + "\r");
  }

  /**
   * Types a vault entry's value (a password prompt). The vault rules decide the entry on the
   * job's target; the value was registered with the daemon-wide redactor at unlock, so neither
   * an echo nor later output shows it; the audit records `[vault:<entry>]`.
   */
  async #writeVault(owner: string, job: Job, req: ExecWriteInput, entry: string): Promise<JobAck> {
    const target = this.#engine.jobs.inputTarget(job);
    const session = this.#engine.registry.sessionById(job.sessionId);
    const where = session?.target ?? "local";
    const vault = this.#vaultOps();
    const use = { target: where, use: "input" as const, job_id: job.id };
    vault.check(owner, [{ entry }], use); // decided first: nothing said about others' entries
    const info = vault.info(entry);
    if (info && info.lines > 1) {
      throw new TermadaError(
        "INVALID_ARGUMENT",
        `Cannot type vault entry "${entry}": it holds several lines`,
        { hint: "Only a one-line value (a password, a token) can answer a prompt" },
      );
    }
    const value = vault.resolve(owner, [{ entry }], { ...use, session_id: job.sessionId })
      .get(entry)!;
    const text = new TextDecoder().decode(value);
    await this.#gateway.admitInput({
      job,
      line: "",
      reader: job.inputReader ?? (where === "local" ? "a program" : "a program on a server"),
      secret: true,
      echoOff: false,
      vault: entry,
    });
    const line = text.replace(/\r?\n$/, "");
    await target.write(line + (req.append_newline === false ? "" : "\r"));
    return { ok: true, job_id: job.id, status: job.status };
  }

  signal(owner: string, req: ExecSignalInput): JobAck {
    const job = this.job(owner, req.job_id);
    const ok = this.#engine.jobs.signal(job, req.signal);
    return { ok, job_id: job.id, status: job.status };
  }

  /** INT → TERM → KILL with `grace_ms` between; resolves with the final status. */
  async kill(owner: string, req: ExecKillInput): Promise<JobResult> {
    const job = this.job(owner, req.job_id);
    if (job.status === "pending_approval" && job.approvalId) {
      // Nothing runs yet: withdrawing the request is all a kill means.
      await this.#approvals.decide(
        job.approvalId,
        false,
        { kind: "agent", id: owner },
        "withdrawn before an operator decided",
      ).catch(() => {/* decided meanwhile: the stop below is a no-op */});
    }
    await this.#engine.jobs.stop(job, req.grace_ms, "killed");
    return this.#engine.reads.headResult(job);
  }

  listJobs(owner: string, req: ExecListInput): JobList {
    const filter = req.filter ?? "recent";
    const limit = req.limit ?? (filter === "all" ? 200 : 50);
    return { jobs: this.#engine.registry.listJobs(owner, filter, limit) };
  }

  /** One of the caller's open sessions; NOT_FOUND otherwise. */
  session(owner: string, sessionId: string): Session {
    return this.#engine.registry.ownSession(owner, sessionId);
  }

  /** One of the caller's jobs (live, or archived in the store); NOT_FOUND otherwise. */
  job(owner: string, jobId: string): Job {
    return this.#engine.registry.ownJob(owner, jobId);
  }

  async #launch(owner: string, req: ExecStartInput): Promise<Job> {
    this.#engine.assertOpen();
    const engine = this.#engine;
    const { plain, refs, shown } = splitEnv(req.env);
    assertDataVariables(refs);
    this.#assertVaultUsable(refs);
    const spec: LaunchSpec = { command: req.command, cwd: req.cwd, env: plain };
    let res: Reservation;
    if (req.mode === "background") {
      const base = req.session === undefined
        ? undefined
        : engine.registry.ownSession(owner, req.session);
      if (refs.length > 0 && base?.remote) throw secretsToServerJob();
      res = engine.jobs.reserveBackground(owner, base, spec);
    } else {
      const session = req.session === undefined
        ? await this.#defaultSession(owner)
        : engine.registry.ownSession(owner, req.session);
      res = await engine.jobs.reserveForeground(owner, session, spec);
    }
    try {
      this.#trail.opened(res.job);
    } catch (err) {
      engine.jobs.abandon(res, "failed", "its record could not be stored");
      throw err;
    }
    // A policy's snapshot of the command's directory, taken when it starts (after an approval).
    const snapshot = this.snapshotOps?.before(res);
    if (snapshot) res.spec.prepare = snapshot;
    let verdict;
    try {
      const remote = res.session?.remote === true;
      // On a server the env rule refuses variables no exec gate can follow; a reference's
      // value is the operator's data (its name was checked above): the vault rules decide it.
      const env = remote ? (Object.keys(plain).length > 0 ? plain : undefined) : shown;
      verdict = await this.#gateway.admitExec(res.job, req.env ? env : undefined, {
        remote,
        posix: res.session?.shell === "sh",
        target: res.session?.target ?? "local",
      });
      if (refs.length > 0) {
        // Once the command itself passed: the vault rules decide each entry on the job's
        // target now (a refusal ends it before an operator is asked), and the values are taken
        // when it starts — after an approval, if one is needed — each use audited, into the
        // staged script or the one-shot's environment only (LaunchSpec.secretEnv).
        const vault = this.#vaultOps();
        const where = {
          target: res.session?.target ?? "local",
          use: "env" as const,
          job_id: res.job.id,
          ...(res.session ? { session_id: res.session.id } : {}),
        };
        vault.check(owner, refs, where);
        res.spec.secretSource = () => vault.resolveEnv(owner, refs, where);
      }
      if (verdict.verdict === "confirm") {
        await this.#approvals.park(res, verdict);
        return res.job;
      }
    } catch (err) {
      const e = toTermadaError(err);
      // Refused before it ran (the policy, the kill switch, a budget): denied, not failed.
      const refused = e.code === "DENIED_BY_POLICY" || e.code === "STOPPED" ||
        e.code === "BUDGET_EXCEEDED";
      engine.jobs.abandon(res, refused ? "denied" : "failed", e.message);
      throw new TermadaError(e.code, e.message, {
        cause: e,
        hint: e.hint,
        retriable: e.retriable,
        details: { ...e.details, job_id: res.job.id },
      });
    }
    await engine.jobs.start(res);
    return res.job;
  }

  // ── resources ─────────────────────────────────────────────────────────────
  // What the MCP resources (src/mcp/resources.ts) read and watch: the caller's own jobs and
  // sessions only, like every operation above (another agent's id is NOT_FOUND).

  /** Recorded bytes one agent read of a recording joins at most (one MCP message). */
  static readonly RECORDING_MAX_BYTES = 1024 * 1024;

  #recordings: RecordingOps | undefined;

  /**
   * Lets agents read their own sessions' recordings: `options` are the operator's (control.ts
   * builds both from the same object), joined with the agents' smaller bound (the newest bytes).
   */
  useRecordings(options: RecordingsOptions): void {
    this.#recordings = new RecordingOps({ ...options, maxBytes: AgentOps.RECORDING_MAX_BYTES });
  }

  /** Whether sessions' recordings can be read (wired and `sessions.record` on). */
  get recordingsEnabled(): boolean {
    return this.#recordings?.enabled === true;
  }

  /** Most bytes of a job's output one `outputPage` returns. */
  static readonly OUTPUT_PAGE_BYTES = 256 * 1024;

  /**
   * Up to `maxBytes` (≤ OUTPUT_PAGE_BYTES) of a job's cleaned output from `cursor`, with the
   * job's facts: `next_cursor` continues it; `has_more` is false once the job ended and all was
   * read. A gap (bytes retention let go) is only ever at the start of a page: a page stops
   * before the next one.
   */
  outputPage(owner: string, jobId: string, cursor?: string, maxBytes?: number): JobResult {
    const job = this.job(owner, jobId);
    const reads = this.#engine.reads;
    const limit = Math.max(
      1,
      Math.min(AgentOps.OUTPUT_PAGE_BYTES, Math.floor(maxBytes ?? AgentOps.OUTPUT_PAGE_BYTES)),
    );
    const from = cursor ?? encodeCursor(0);
    const first = reads.page(job, from, Math.min(MAX_PAGE_BYTES, limit));
    const parts = [first.output];
    let next = first.nextCursor;
    let hasMore = first.hasMore;
    let bytes = decodeCursor(next) - decodeCursor(from) - (first.gap?.droppedBytes ?? 0);
    while (bytes < limit && hasMore) {
      const p = job.buffer.read(next, Math.min(MAX_PAGE_BYTES, limit - bytes));
      if (p.gap || p.output === "") break;
      parts.push(p.output);
      bytes += decodeCursor(p.nextCursor) - decodeCursor(next);
      next = p.nextCursor;
      hasMore = p.hasMore;
    }
    return reads.view(job, { ...first, output: parts.join(""), nextCursor: next, hasMore });
  }

  /**
   * Calls `onChange` after each change of the job (output, status); returns the unsubscribe
   * function, which the caller must call (the job holds the listener until then).
   */
  watchJob(owner: string, jobId: string, onChange: (ended: boolean) => void): () => void {
    const job = this.job(owner, jobId);
    if (job.final) return () => {};
    let off: (() => void) | undefined = job.onChange(() => {
      const ended = job.final;
      if (ended) {
        off?.();
        off = undefined;
      }
      onChange(ended);
    });
    return () => {
      off?.();
      off = undefined;
    };
  }

  /**
   * Calls `onChange` when the session's terminal gets output, and once with `closed` when it
   * closes; returns the unsubscribe function, which the caller must call.
   */
  watchSession(owner: string, sessionId: string, onChange: (closed: boolean) => void): () => void {
    const s = this.session(owner, sessionId);
    let live = true;
    const off = s.onRaw(() => {
      if (live) onChange(false);
    });
    const offClose = s.onClose(() => {
      if (!live) return;
      live = false;
      off();
      onChange(true);
    });
    return () => {
      live = false;
      off();
      offClose();
    };
  }

  /**
   * The recording of one of the caller's sessions (open or closed) as one asciicast v2 stream,
   * the newest RECORDING_MAX_BYTES of it; the caller must consume or cancel `body`. Another
   * agent's session, or one nobody knows, is NOT_FOUND alike.
   */
  async recording(owner: string, sessionId: string): Promise<RecordingCast> {
    const recordings = this.#recordings;
    if (!recordings) {
      throw new TermadaError("NOT_SUPPORTED", "This daemon keeps no session recordings");
    }
    const live = this.#engine.registry.sessionById(sessionId);
    if (live && live.owner !== owner) throw notFound("session", sessionId);
    let cast: RecordingCast;
    try {
      cast = await recordings.open(sessionId);
    } catch (err) {
      // Why there is none is said only for a session known to be the caller's.
      if (live) throw err;
      throw notFound("session", sessionId);
    }
    if (cast.info.owner !== owner) {
      await cast.body.cancel();
      throw notFound("session", sessionId);
    }
    return cast;
  }
}
