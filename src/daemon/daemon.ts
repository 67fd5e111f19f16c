/**
 * The daemon's lifecycle: one process per state directory owns all state. Start = resolve paths,
 * load the config, make every directory it writes (0700) before anything else, take the lock
 * (a second daemon refuses), open the store and recover (running jobs from before become
 * `orphaned`), open the audit log (a broken chain stops the start), build the control layer,
 * then listen: loopback TCP (the default port is a preference, an explicit one a requirement),
 * the HTTP Unix socket and the MCP socket (0600), and record what was bound in `daemon.json`.
 * Stop = close MCP sessions and listeners, end every session, close the store and the log,
 * remove the sockets and release the lock.
 */
import { configuredAdapters } from "./adapters.ts";
import { type HostKeyEvent, Inventory, KnownHosts, SshPool } from "../remote/mod.ts";
import { join } from "node:path";
import { AuditLog, verifyAudit } from "../audit/mod.ts";
import { createApp, reportedLimits, type TermadaApp } from "../api/mod.ts";
import {
  type Config,
  effectivePaths,
  engineOptionsFrom,
  ensureStateDirs,
  loadConfig,
  policyFor,
  resolvePaths,
  type TermadaPaths,
} from "../config/mod.ts";
import { Control, SYSTEM } from "../control/mod.ts";
import { type Feature, runAsForDaemon } from "../sandbox/mod.ts";
import { ensureSharedDir, runAsSessionsDir } from "../paths/mod.ts";
import type { Boundary } from "../wire/mod.ts";
import { type Reclaimer, startReclaimer } from "./reclaim.ts";
import { MissionService } from "../mission/mod.ts";
import { Redactor, SecretSet } from "../output/mod.ts";
import { VaultFile } from "../vault/mod.ts";
import { createNotifier, notificationsFromBus } from "../notify/mod.ts";
import { type OutputProgress, startOutputProgress } from "./progress.ts";
import {
  compileRegex,
  EventBus,
  logger,
  randomHex,
  setLogFile,
  setLogLevel,
} from "../shared/mod.ts";
import { Store } from "../store/mod.ts";
import { agentDirectory } from "./agents.ts";
import { AnchorService } from "../governance/mod.ts";
import { jwtVerifiers, operatorIdentity, refusalAuditor, reloadPolicy } from "./governance.ts";
import { listenTcp, listenUnix, tcpBind } from "./listeners.ts";
import { acquireLock, releaseLock, removeDaemonInfo, writeDaemonInfo } from "./lock.ts";
import { listenMcpSocket, type McpSocket } from "./mcp_socket.ts";
import { loadShellParser } from "../policy/mod.ts";
import { policyPort } from "./policy_port.ts";

const log = logger("daemon");
const encoder = new TextEncoder();
const decoder = new TextDecoder();

export interface DaemonOptions {
  env: Record<string, string | undefined>;
  version: string;
  /** TERMADA_HOME override (tests); empty means unset. */
  home?: string;
  /** --config */
  configFile?: string;
  /** --bind HOST:PORT (port 0 picks a free one): exactly that, or the start fails. */
  bind?: string;
  /** The log level was set on the command line: the config's `log.level` does not apply. */
  logLevelSet?: boolean;
  /** --log-file: opened once the state directory exists. */
  logFile?: string;
}

export interface SetupInfo {
  socketPath: string;
  mcpSocketPath: string;
  url: string;
  dashboardUrl: string;
  pid: number;
  /** One line: what the kernel boundary around sessions holds here (and what it lacks). */
  boundary: string;
}

/** What only the daemon's stop releases. */
interface Resources {
  lock: Deno.FsFile;
  abort: AbortController;
  servers: Deno.HttpServer[];
  mcpSocket: McpSocket;
  reclaimer: Reclaimer;
  anchors: AnchorService;
  progress: OutputProgress;
  /** The notifier's bus subscription, queues and timers. */
  notifications: { close(): Promise<void> };
}

export class Daemon {
  readonly paths: TermadaPaths;
  readonly config: Config;
  readonly control: Control;
  readonly store: Store;
  readonly port: number;
  readonly dashboardToken: string;
  readonly audit: AuditLog;
  readonly missions: MissionService;
  #res: Resources;
  #host: string;
  #app: TermadaApp;
  #stopping: Promise<void> | undefined;
  #done = Promise.withResolvers<void>();

  private constructor(init: {
    paths: TermadaPaths;
    config: Config;
    control: Control;
    store: Store;
    port: number;
    token: string;
    app: TermadaApp;
    host: string;
    audit: AuditLog;
    missions: MissionService;
    resources: Resources;
  }) {
    this.paths = init.paths;
    this.config = init.config;
    this.control = init.control;
    this.store = init.store;
    this.port = init.port;
    this.dashboardToken = init.token;
    this.#app = init.app;
    this.#host = init.host;
    this.audit = init.audit;
    this.missions = init.missions;
    this.#res = init.resources;
  }

  static async start(options: DaemonOptions): Promise<Daemon> {
    const basePaths = resolvePaths({
      env: options.env,
      home: options.home,
      configFile: options.configFile,
    });
    const loaded = await loadConfig(basePaths.configFile, options.env, {
      required: options.configFile !== undefined,
    });
    const config = loaded.config;
    if (!options.logLevelSet) setLogLevel(config.log.level);
    const paths = effectivePaths(basePaths, config);
    const bind = tcpBind(options.bind ?? config.server.bind, options.env);
    // security.run_as: an unknown user, or a daemon that cannot become it, stops the start here.
    const runAs = config.security.run_as
      ? runAsForDaemon(config.security.run_as, { where: `Config "${loaded.path}"` })
      : undefined;
    // Every directory the daemon writes exists (0700) before the first file is opened.
    ensureStateDirs(paths);
    if (options.logFile) setLogFile(options.logFile);
    const cleanups: (() => void | Promise<void>)[] = [];
    const undo = async () => {
      for (const f of cleanups.reverse()) await f();
    };
    // The bash parser only matters to a policy with rules (without rules everything is allowed).
    const rules =
      Object.values(config.policies).some((p) =>
        p.allow.length + p.deny.length + p.confirm.length + (p.rules?.length ?? 0) > 0
      ) || config.security.identity_mode === "strict";
    if (rules) await loadShellParser();
    const lock = acquireLock(paths.lockPath);
    cleanups.push(() => releaseLock(lock));
    try {
      const store = Store.open(paths.dbPath);
      cleanups.push(() => store.close());
      const recovered = store.recover("the daemon stopped while it ran");
      if (
        recovered.orphanedJobs.length + recovered.closedSessions.length +
            recovered.unknownActions.length > 0
      ) {
        log.warn("recovered after an unclean stop", {
          orphaned_jobs: recovered.orphanedJobs.length,
          closed_sessions: recovered.closedSessions.length,
          unknown_actions: recovered.unknownActions.length,
          ...(recovered.unknownActions.length > 0
            ? { fix: "termada reconcile lists them; settle each with what really happened" }
            : {}),
        });
      }
      // The audit log opens before anything can run; a broken chain stops the start here.
      const auditDir = join(paths.stateDir, "audit");
      // Vault values the daemon learns (at unlock, at set) are masked everywhere from then on:
      // in sessions, jobs, screens, recordings, events and this audit log.
      const secrets = new SecretSet();
      const redactor = new Redactor({
        extraPatterns: config.redaction.patterns.map((p) =>
          compileRegex(p, { label: "redaction.patterns" })
        ),
        secrets,
      });
      const redact = (text: string) => decoder.decode(redactor.redact(encoder.encode(text)));
      const audit = AuditLog.open(auditDir, { redact });
      cleanups.push(() => audit.close());
      // Signed anchors of the fsynced chain head, kept locally and sent to receivers (the key
      // is made here at first start, 0600).
      const anchors = await AnchorService.open({
        stateDir: paths.stateDir,
        log: audit,
        everyMs: config.audit.anchors.every_s === null ? null : config.audit.anchors.every_s * 1000,
        receivers: config.audit.anchors.receivers.map((r) => ({
          name: r.name,
          url: r.url,
          ...(r.ca_file ? { caFile: r.ca_file } : {}),
          timeoutMs: r.timeout_ms,
        })),
      });
      cleanups.push(() => anchors.close());
      const bus = new EventBus(1000);
      const settings = engineOptionsFrom(config, paths);
      // Under run_as, session scratch directories leave the state dir (that user cannot enter
      // it) for a root-owned 0711 one, hidden from sessions like the state dir but for each
      // session's own directory (docs/SECURITY.md, run_as).
      // Pinned JWT keys decide who may act: no session may read or replace them.
      for (const t of [config.security.agent_jwt, config.security.operator_jwt]) {
        if (t?.jwks_file) settings.sandbox.hide.push(t.jwks_file);
      }
      // The notification bot's token: a credential no session may read.
      const botTokenFile = config.notifications.telegram.bot_token_file;
      if (botTokenFile) settings.sandbox.hide.push(botTokenFile);
      const runAsDirs = runAs ? runAsSessionsDir(paths.stateDir) : undefined;
      if (runAsDirs) {
        ensureSharedDir(runAsDirs);
        settings.sandbox.hide.push(runAsDirs);
      }
      // Scratch directories of sessions of a daemon that did not stop cleanly (sessions never
      // outlive their daemon, and this one holds the lock): their staged commands may hold
      // vault values.
      for (const dir of [join(paths.runtimeDir, "sessions"), ...(runAsDirs ? [runAsDirs] : [])]) {
        sweepStaleSessionDirs(dir);
      }
      // Known once the engine detected the kernel's features (the policy asks per decision).
      const gate = { active: false };
      // Who callers are (tokens, agent JWTs, dev-mode names): before control, whose policy and
      // approvals ask who is behind an agent. Refusals are audited once the recorder exists.
      let verifiers = await jwtVerifiers(config);
      const recorderRef: { current?: Control["recorder"] } = {};
      const refused = refusalAuditor(() => recorderRef.current);
      // A fresh socket key per start, beside the MCP socket (0600, in a directory sessions
      // cannot reach): development-mode naming needs it (see AgentDirectory.devKey).
      const socketKey = writeSocketKey(`${paths.mcpSocketPath}.key`);
      cleanups.push(() => removeQuietly(`${paths.mcpSocketPath}.key`));
      const directory = agentDirectory(config, socketKey, {
        ...(verifiers.agent ? { jwt: verifiers.agent } : {}),
        refused,
      });
      const port = policyPort(config, {
        PATH: options.env.PATH,
        execGate: () => gate.active,
        whoIs: (agent) => directory.principalOf(agent),
      });
      let liveConfig = config;
      // Host keys recorded on first contact are audited (the recorder exists once control does).
      let hostKeyRecorded: (e: HostKeyEvent) => Promise<void> = () => Promise.resolve();
      let serverCredential = (_server: string, _entry: string): {
        kind: string;
        value: Uint8Array;
      } => {
        throw new Error("the vault is not ready yet");
      };
      const knownHosts = new KnownHosts({
        path: join(paths.stateDir, "known_hosts"),
        onRecorded: (e) => hostKeyRecorded(e),
      });
      const inventory = new Inventory({
        config: config.servers,
        file: join(paths.stateDir, "servers.json"),
      });
      const pool = new SshPool({
        knownHosts,
        credentials: {
          home: options.env.HOME,
          agentSocket: options.env.SSH_AUTH_SOCK,
          // Bound once control (which owns the vault) exists.
          vault: (server, entry) => serverCredential(server, entry),
        },
        connectTimeoutMs: config.remote.connect_timeout_ms,
        keepaliveMs: config.remote.keepalive_ms,
        onStatus: (name, ok, error) => inventory.noteStatus(name, ok, error),
      });
      // Known once TCP listens (below): one-time answer pages live there.
      const listening: { port?: number } = {};
      const control = new Control({
        engine: {
          ...settings,
          ...(runAs ? { runAs, sessionsDir: runAsDirs } : {}),
          // What the config took from the environment (agent tokens…) never reaches a session.
          scrubEnv: loaded.envNames,
          sandbox: {
            ...settings.sandbox,
            subreaper: true,
            missing: injectedMissing(options.env),
          },
        },
        store,
        audit,
        bus,
        policy: port,
        whoIs: (agent) => directory.principalOf(agent),
        version: options.version,
        // Adapter runs journal their phases beside the state database (hidden from sessions).
        adapters: {
          dbPath: join(paths.stateDir, "adapters.db"),
          adapters: configuredAdapters(config.adapters),
        },
        approvalQuotas: {
          perOwner: config.security.quotas.pending_per_owner,
          total: config.security.quotas.pending_total,
        },
        spoolDir: paths.spoolDir,
        spoolMaxBytes: config.jobs.spool_max_bytes,
        finishedPerAgent: config.jobs.finished_per_agent,
        confirmTimeoutMs: config.approvals.confirm_timeout_ms,
        reapAfterMs: config.sessions.reap_after_ms,
        remote: {
          inventory,
          pool,
          knownHosts,
          reconnectAttempts: config.remote.reconnect_attempts,
        },
        vault: { file: new VaultFile(join(paths.stateDir, "vault.age")), secrets },
        // Snapshots live in the state directory (hidden from sessions with it); a policy's
        // `snapshot` rules are read from the live config, so `policy reload` applies them.
        publicUrl: () =>
          listening.port === undefined ? undefined : `http://127.0.0.1:${listening.port}`,
        snapshots: {
          root: join(paths.stateDir, "snapshots"),
          rules: (agent) => policyFor(liveConfig, agent).snapshot,
        },
        forbiddenPaths: {
          // What sessions have hidden, and the credentials the daemon logs in to servers with.
          all: [
            ...settings.sandbox.hide,
            ...(options.env.HOME ? [join(options.env.HOME, ".ssh")] : []),
          ],
          // What runs as the boundary of every session: this program's own code.
          write: ownCode(),
        },
      });
      serverCredential = (server, entry) => control.vault!.serverCredential(server, entry);
      // The config's plugins start in the background (a slow one only shows in its status).
      void control.plugins.configure(config.plugins);
      // Adapter runs a crash interrupted are finished now (this daemon holds the lock).
      void control.adapters?.resume().catch((err) =>
        log.error("adapter runs could not be resumed", { error: err })
      );
      // Approvals waiting, input needed, failures and stop-all, to a person's desktop or
      // Telegram: from the bus, redacted, never blocking the daemon (docs/NOTIFICATIONS.md).
      const notifier = createNotifier(config.notifications, {
        redact,
        vaultToken: (entry) => Promise.resolve(control.vault!.notificationToken(entry)),
      });
      // No sink enabled (the default): nothing listens, so no bus event pays for the mapping.
      const offNotify = notifier.sinks.length === 0
        ? () => {}
        : notificationsFromBus(bus, notifier, {
          failureStatuses: config.notifications.failures.statuses,
          nonzeroExit: config.notifications.failures.nonzero_exit,
        });
      const notifications = {
        async close() {
          offNotify();
          await notifier.close();
        },
      };
      cleanups.push(() => notifications.close());
      hostKeyRecorded = async (e) => {
        await control.recorder.intent(SYSTEM, "host_key.recorded", { ...e });
      };
      cleanups.push(() => control.shutdown());
      gate.active = control.agents.boundary().exec_gate.active;
      const recorder = control.recorder;
      recorderRef.current = recorder;
      recorder.record(SYSTEM, "config.loaded", {
        source: loaded.source,
        path: loaded.path,
        agents: Object.keys(config.agents),
        dev_mode: config.auth.dev_mode,
        policies: Object.keys(config.policies),
      });
      if (
        recovered.orphanedJobs.length + recovered.expiredApprovals.length +
            recovered.unknownActions.length > 0
      ) {
        recorder.record(SYSTEM, "daemon.recovered", {
          orphaned_jobs: recovered.orphanedJobs,
          closed_sessions: recovered.closedSessions,
          expired_approvals: recovered.expiredApprovals,
          denied_jobs: recovered.deniedJobs,
          // Bounded in the record: the list is in the actions table (termada reconcile).
          unknown_actions: recovered.unknownActions.slice(0, 1000),
        });
      }
      const agents = control.agents;
      const missions = new MissionService({
        runtime: {
          createSession: (a, req) => agents.createSession(a, req),
          closeSession: (a, req) => agents.closeSession(a, req),
          job: (a, id) => agents.job(a, id),
          listJobs: (a, req) => agents.listJobs(a, req),
          pendingApprovals: () => control.pendingApprovals(),
          ...(control.adapters
            ? { adapterRun: (a: string, id: string) => control.adapters!.get(a, id) }
            : {}),
        },
        store,
        audit: recorder,
        bus,
        redact,
      });
      cleanups.push(() => missions.close());
      const reclaimer = startReclaimer(bus);
      cleanups.push(() => reclaimer.stop());
      const progress = startOutputProgress(bus, () => control.outputTotals());
      cleanups.push(() => progress.stop());
      const interrupted = missions.recover("the daemon restarted: the mission's terminal is gone");
      if (interrupted.length > 0) log.warn("missions interrupted", { missions: interrupted });

      const token = loadOrCreateToken(paths.tokenFile);
      const abort = new AbortController();
      const servers: Deno.HttpServer[] = [];
      cleanups.push(async () => {
        abort.abort();
        await Promise.all(servers.map((s) => s.finished.catch(() => {})));
      });
      const ref: { app?: TermadaApp; daemon?: Daemon } = {};
      // TCP first: its port is needed by the Host check.
      const tcp = await listenTcp(
        bind,
        abort.signal,
        (req) => ref.app!.app.fetch(req, { listener: "tcp" }),
      );
      servers.push(tcp.server);
      listening.port = tcp.port;
      const onAgent = (id: string, via: string) => {
        try {
          store.agents.upsert({ id, via });
          recorder.note({ kind: "agent", id }, "agent.connected", { via });
        } catch (err) {
          log.error("could not record a connecting agent", { error: err });
        }
      };
      const app = createApp({
        control,
        elicitApprovals: config.approvals.elicitation,
        missions,
        version: options.version,
        agents: directory,
        port: tcp.port,
        operatorToken: token,
        operatorAuth: {
          get roles() {
            return liveConfig.security.operator_token_roles;
          },
          jwt: (t) => {
            const v = verifiers.operator;
            if (!v) {
              return Promise.reject(Object.assign(new Error("no"), { reason: "not configured" }));
            }
            return operatorIdentity(v, t);
          },
          refused: (reason) => refused({ transport: "operator", reason }),
        },
        operator: {
          reloadPolicy: () =>
            reloadPolicy({
              path: loaded.path,
              env: options.env,
              current: () => liveConfig,
              recorder,
              apply: (next, v) => {
                liveConfig = next;
                verifiers = v;
                port.reload(next);
                directory.reload(next, v.agent);
                void control.plugins.configure(next.plugins);
              },
            }),
          auditTail: (n) => audit.tail(n),
          anchors,
          auditVerify: () => verifyAudit(auditDir),
          bus,
          port: tcp.port,
          stopDaemon: () => void ref.daemon?.stop("stopped by an operator"),
          policy: () => ({
            default_policy: liveConfig.default_policy,
            policies: liveConfig.policies,
            agents: Object.fromEntries(
              Object.entries(liveConfig.agents).map((
                [id, a],
              ) => [id, { name: a.name ?? null, policy: a.policy ?? liveConfig.default_policy }]),
            ),
            dev_mode: liveConfig.auth.dev_mode,
            identity_mode: liveConfig.security.identity_mode,
          }),
        },
        onAgent,
      });
      ref.app = app;
      cleanups.push(() => app.close());
      servers.push(
        await listenUnix(
          paths.socketPath,
          abort.signal,
          (req) => app.app.fetch(req, { listener: "unix" }),
        ),
      );
      cleanups.push(() => removeQuietly(paths.socketPath));
      const mcpSocket: McpSocket = listenMcpSocket({
        path: paths.mcpSocketPath,
        agents: directory,
        server: {
          agents: control.agents,
          plugins: control.plugins,
          missions,
          version: options.version,
          limits: reportedLimits(control),
          elicitApprovals: config.approvals.elicitation,
        },
        attach: (agent, via) => control.presence.attach(agent, via),
        onAgent,
      });
      // Closed first on stop (before the engine), so no agent call races the shutdown.
      cleanups.push(() => mcpSocket.close());
      // In a container's own network namespace the published port is reached as 127.0.0.1.
      const shown = bind.hostname === "0.0.0.0" ? "127.0.0.1" : bind.hostname;
      const host = shown.includes(":") ? `[${shown}]` : shown;
      if (shown !== bind.hostname) {
        log.warn("listening on every interface of this container's network namespace", {
          bind: `${bind.hostname}:${tcp.port}`,
          publish: `-p 127.0.0.1:${tcp.port}:${tcp.port}`,
        });
      }
      writeDaemonInfo(paths.infoFile, {
        pid: Deno.pid,
        version: options.version,
        socket: paths.socketPath,
        port: tcp.port,
        url: `http://${host}:${tcp.port}`,
        started_at: new Date().toISOString(),
      });
      cleanups.push(() => removeDaemonInfo(paths.infoFile));
      const d = new Daemon({
        paths,
        config,
        control,
        store,
        port: tcp.port,
        token,
        app,
        host: shown,
        audit,
        missions,
        resources: {
          lock,
          abort,
          servers,
          mcpSocket,
          reclaimer,
          progress,
          anchors,
          notifications,
        },
      });
      ref.daemon = d;
      if (runAs) {
        log.info("local sessions and jobs run as another user (security.run_as)", {
          user: runAs.user,
          uid: runAs.uid,
          gid: runAs.gid,
        });
      }
      anchors.start();
      log.info("daemon ready", {
        pid: Deno.pid,
        socket: paths.socketPath,
        tcp: `${bind.hostname}:${tcp.port}`,
        config: loaded.source === "file" ? loaded.path : "embedded defaults",
      });
      return d;
    } catch (err) {
      await undo();
      throw err;
    }
  }

  get setup(): SetupInfo {
    const host = this.#host.includes(":") ? `[${this.#host}]` : this.#host;
    const url = `http://${host}:${this.port}`;
    return {
      socketPath: this.paths.socketPath,
      mcpSocketPath: this.paths.mcpSocketPath,
      url,
      dashboardUrl: `${url}/?token=${this.dashboardToken}`,
      pid: Deno.pid,
      boundary: boundaryLine(this.control.agents.boundary()) + runAsNote(this.config),
    };
  }

  get app(): TermadaApp {
    return this.#app;
  }

  /** Resolves when the daemon has stopped. */
  get done(): Promise<void> {
    return this.#done.promise;
  }

  /**
   * Graceful stop; idempotent. Order: no new connections or calls (MCP socket, MCP sessions,
   * listeners), then every session and job ends (their outcomes recorded), then the stop record,
   * then the log and the store close, and the lock goes last.
   */
  stop(reason = "stopped"): Promise<void> {
    return this.#stopping ??= (async () => {
      log.info("daemon stopping", { reason });
      const r = this.#res;
      const step = async (what: string, f: () => unknown) => {
        try {
          await f();
        } catch (err) {
          log.error(`stop: ${what} failed`, { error: err });
        }
      };
      r.reclaimer.stop();
      r.progress.stop();
      await step("MCP socket", () => r.mcpSocket.close());
      await step("MCP sessions", () => this.#app.close());
      await step("listeners", async () => {
        r.abort.abort();
        await Promise.all(r.servers.map((s) => s.finished.catch(() => {})));
      });
      await step("engine", () => this.control.shutdown());
      await step("missions", () => this.missions.close());
      await step("notifications", () => r.notifications.close());
      await step(
        "stop record",
        () => this.control.recorder.record(SYSTEM, "daemon.stopped", { reason }),
      );
      // The last head, signed (delivered now if a receiver is up, else at the next start).
      await step("anchor", async () => {
        await r.anchors.anchorNow();
        let timer: ReturnType<typeof setTimeout> | undefined;
        await Promise.race([
          r.anchors.flush(),
          new Promise((ok) => timer = setTimeout(ok, 2000)),
        ]).finally(() => clearTimeout(timer)); // a pending timer would hold the exit 2 s
      });
      await step("anchors", () => r.anchors.close());
      await step("audit log", () => this.audit.close());
      await step("store", () => this.store.close());
      removeQuietly(this.paths.socketPath);
      removeDaemonInfo(this.paths.infoFile);
      // The run_as sessions directory, once empty (every session removed its own).
      if (this.config.security.run_as) removeQuietly(runAsSessionsDir(this.paths.stateDir));
      releaseLock(r.lock);
      this.#done.resolve();
      log.info("daemon stopped");
    })();
  }
}

/** Removes every session scratch directory below `dir` (left by a daemon that died). */
function sweepStaleSessionDirs(dir: string): void {
  let entries: Deno.DirEntry[];
  try {
    entries = [...Deno.readDirSync(dir)];
  } catch {
    return; // not there yet
  }
  for (const e of entries) {
    if (!/^ses_[A-Za-z0-9]+$/.test(e.name) || e.isSymlink) continue;
    try {
      Deno.removeSync(join(dir, e.name), { recursive: true });
    } catch (err) {
      log.warn("could not remove a stale session directory", { dir: e.name, error: err });
    }
  }
}

function removeQuietly(path: string): void {
  try {
    Deno.removeSync(path);
  } catch {
    // already gone
  }
}

/** The banner's summary of the session boundary. */
export function boundaryLine(b: Boundary): string {
  if (b.mode === "off") return "off (security.exec_gate: off): sessions run without a boundary";
  const on = (f: { active: boolean }, name: string) => `${name} ${f.active ? "on" : "OFF"}`;
  const parts = [
    on(b.exec_gate, "exec gate"),
    b.hiding.active ? `control plane hidden (${b.hiding.how})` : "control plane NOT hidden",
    on(b.landlock, `landlock${b.landlock.abi ? ` v${b.landlock.abi}` : ""}`),
    b.terminals.active ? "private terminals" : "terminals SHARED",
    on(b.cgroup, "cgroups"),
  ];
  const missing =
    [b.exec_gate, b.hiding, b.landlock, b.terminals, b.cgroup].filter((f) => !f.active).length;
  return `${b.mode}: ${parts.join(" · ")}${missing ? " — see `capabilities` for why" : ""}`;
}

/** The banner's note on `security.run_as` (empty without it). */
function runAsNote(config: Config): string {
  const r = config.security.run_as;
  if (!r) return "";
  return ` · sessions run as "${r.user}"${r.group === undefined ? "" : `:"${r.group}"`}`;
}

/**
 * Kernel features to treat as absent, from `TERMADA_SIMULATE_MISSING=seccomp,landlock,cgroup,
 * mounts,terminals` (tests check the degraded paths this way). It can only weaken the
 * boundary, it is logged, and capabilities say so.
 */
function injectedMissing(env: Record<string, string | undefined>): Feature[] {
  const raw = env.TERMADA_SIMULATE_MISSING;
  if (!raw) return [];
  const known: Feature[] = ["seccomp", "landlock", "cgroup", "mounts", "terminals"];
  const out = raw.split(",").map((s) => s.trim()).filter((s): s is Feature =>
    (known as string[]).includes(s)
  );
  log.warn("kernel features simulated missing (TERMADA_SIMULATE_MISSING)", { features: out });
  return out;
}

function writeSocketKey(path: string): string {
  const key = randomHex(32);
  const tmp = `${path}.${Deno.pid}.tmp`;
  Deno.writeTextFileSync(tmp, key + "\n", { mode: 0o600 });
  Deno.chmodSync(tmp, 0o600);
  Deno.renameSync(tmp, path);
  return key;
}

function loadOrCreateToken(path: string): string {
  try {
    const t = Deno.readTextFileSync(path).trim();
    if (/^[0-9a-f]{64}$/.test(t)) return t;
  } catch {
    // first start: create it below
  }
  const token = randomHex(32);
  Deno.writeTextFileSync(path, token + "\n", { mode: 0o600 });
  Deno.chmodSync(path, 0o600);
  return token;
}

/**
 * This program's own code, which every session's launcher runs: the compiled binary, or from
 * source the checkout's entry point, sources and lock (agents may not rewrite their boundary).
 */
function ownCode(): string[] {
  const root = new URL("../..", import.meta.url);
  if (root.protocol !== "file:") return [Deno.execPath()];
  const dir = root.pathname.replace(/\/$/, "");
  return [
    Deno.execPath(),
    ...["mod.ts", "src", "ffi", "deno.json", "deno.lock"].map((p) => `${dir}/${p}`),
  ];
}
