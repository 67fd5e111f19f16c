/**
 * The daemon's lifecycle: one process per user owns all state. Start = resolve paths, load the
 * config, take the lock (a second daemon refuses), open the store and recover (running jobs from
 * before become `orphaned`, open sessions closed), start the engine, then listen on the Unix
 * socket (0600) and on loopback TCP with the same app (a failed bind is fatal). Stop = close
 * MCP sessions and listeners, end every session (its job recorded as killed), close the store,
 * remove the socket and release the lock.
 */
import { timingSafeEqual } from "node:crypto";
import { join } from "node:path";
import { AuditLog, verifyAudit } from "../audit/mod.ts";
import { Gateway } from "../control/mod.ts";
import { Redactor } from "../output/mod.ts";
import { createApp, type TermadaApp } from "../api/mod.ts";
import {
  type Config,
  effectivePaths,
  engineOptionsFrom,
  ensureStateDirs,
  loadConfig,
  parseBind,
  resolvePaths,
  type TermadaPaths,
} from "../config/mod.ts";
import { Engine } from "../engine/mod.ts";
import { MissionService } from "../mission/mod.ts";
import {
  EventBus,
  logger,
  randomHex,
  setLogLevel,
  systemClock,
  TermadaError,
} from "../shared/mod.ts";
import { pruneSpools, Store } from "../store/mod.ts";
import { auditHooks, combineHooks, storeHooks } from "./persist.ts";
import { policyPort } from "./policy_port.ts";

const log = logger("daemon");
const encoder = new TextEncoder();
const decoder = new TextDecoder();

export interface DaemonOptions {
  env: Record<string, string | undefined>;
  version: string;
  /** TERMADA_HOME override (tests). */
  home?: string;
  /** --config */
  configFile?: string;
  /** --bind HOST:PORT (port 0 picks a free one). */
  bind?: string;
  /** The log level was set on the command line: the config's `log.level` does not apply. */
  logLevelSet?: boolean;
}

export interface SetupInfo {
  socketPath: string;
  url: string;
  dashboardUrl: string;
  pid: number;
}

export class Daemon {
  readonly paths: TermadaPaths;
  readonly config: Config;
  readonly engine: Engine;
  readonly store: Store;
  readonly port: number;
  readonly dashboardToken: string;
  readonly gateway: Gateway;
  readonly audit: AuditLog;
  readonly missions: MissionService;
  #lock: Deno.FsFile;
  #host: string;
  #app: TermadaApp;
  #servers: Deno.HttpServer[];
  #abort: AbortController;
  #stopping: Promise<void> | undefined;
  #done = Promise.withResolvers<void>();

  private constructor(init: {
    paths: TermadaPaths;
    config: Config;
    engine: Engine;
    store: Store;
    port: number;
    token: string;
    lock: Deno.FsFile;
    app: TermadaApp;
    servers: Deno.HttpServer[];
    abort: AbortController;
    host: string;
    gateway: Gateway;
    audit: AuditLog;
    missions: MissionService;
  }) {
    this.paths = init.paths;
    this.config = init.config;
    this.engine = init.engine;
    this.store = init.store;
    this.port = init.port;
    this.dashboardToken = init.token;
    this.#lock = init.lock;
    this.#app = init.app;
    this.#servers = init.servers;
    this.#abort = init.abort;
    this.#host = init.host;
    this.gateway = init.gateway;
    this.audit = init.audit;
    this.missions = init.missions;
  }

  static async start(options: DaemonOptions): Promise<Daemon> {
    const home = options.home ?? options.env.TERMADA_HOME;
    const basePaths = resolvePaths({ env: options.env, home, configFile: options.configFile });
    const loaded = await loadConfig(basePaths.configFile, options.env, {
      required: options.configFile !== undefined,
    });
    const config = loaded.config;
    if (!options.logLevelSet) setLogLevel(config.log.level);
    const paths = effectivePaths(basePaths, config);
    const bind = parseBind(options.bind ?? config.server.bind);
    if (!bind) {
      throw new TermadaError(
        "INVALID_ARGUMENT",
        `Cannot listen on "${options.bind}": not a loopback HOST:PORT`,
        {
          hint: "Use 127.0.0.1:PORT (or [::1]:PORT); Termada never listens beyond this machine",
        },
      );
    }
    ensureStateDirs(paths);
    const lock = acquireLock(paths.lockPath);
    const cleanups: (() => void | Promise<void>)[] = [() => releaseLock(lock, paths.lockPath)];
    const undo = async () => {
      for (const f of cleanups.reverse()) await f();
    };
    try {
      const store = Store.open(paths.dbPath);
      cleanups.push(() => store.close());
      const recovered = store.recover("the daemon stopped while it ran");
      if (recovered.orphanedJobs.length + recovered.closedSessions.length > 0) {
        log.warn("recovered after an unclean stop", {
          orphaned_jobs: recovered.orphanedJobs.length,
          closed_sessions: recovered.closedSessions.length,
        });
      }
      // The audit log opens before anything can run; a broken chain stops the start here.
      const auditDir = join(paths.stateDir, "audit");
      const redactor = new Redactor({
        extraPatterns: config.redaction.patterns.map((p) => new RegExp(p, "g")),
      });
      const audit = AuditLog.open(auditDir, {
        redact: (text) => decoder.decode(redactor.redact(encoder.encode(text))),
      });
      cleanups.push(() => audit.close());
      const system = { kind: "system" as const, id: "termada" };
      audit.append(system, "config.loaded", {
        source: loaded.source,
        path: loaded.path,
        agents: Object.keys(config.agents),
        dev_mode: config.auth.dev_mode,
        policies: Object.keys(config.policies),
      });
      if (recovered.orphanedJobs.length + recovered.expiredApprovals.length > 0) {
        audit.append(system, "daemon.recovered", {
          orphaned_jobs: recovered.orphanedJobs,
          closed_sessions: recovered.closedSessions,
          expired_approvals: recovered.expiredApprovals,
          denied_jobs: recovered.deniedJobs,
        });
      }
      const bus = new EventBus(1000);
      const gateway = new Gateway({
        bus,
        policy: policyPort(config),
        audit,
        approvals: store,
        confirmTimeoutMs: config.approvals.confirm_timeout_ms,
      });
      cleanups.push(() => gateway.close());
      const engineSettings = engineOptionsFrom(config, paths);
      const engine = new Engine({
        ...engineSettings,
        admission: gateway,
        hooks: combineHooks(
          storeHooks(store, {
            spoolDir: paths.spoolDir,
            spoolMaxBytes: config.jobs.spool_max_bytes,
            finishedPerAgent: config.jobs.finished_per_agent,
            clock: systemClock,
          }),
          auditHooks(gateway),
        ),
      });
      gateway.attach(engine);
      cleanups.push(() => engine.shutdown());
      const missions = new MissionService({
        engine,
        store,
        audit: gateway,
        bus,
        redact: (text) => decoder.decode(redactor.redact(encoder.encode(text))),
      });
      cleanups.push(() => missions.close());
      const interrupted = missions.recover("the daemon restarted: the mission's terminal is gone");
      if (interrupted.length > 0) log.warn("missions interrupted", { missions: interrupted });
      pruneOrphanSpools(store, paths.spoolDir);

      const token = loadOrCreateToken(paths.tokenFile);
      const abort = new AbortController();
      const servers: Deno.HttpServer[] = [];
      const tcpReady = Promise.withResolvers<number>();
      // TCP first: its port is needed by the Host check.
      let tcp: Deno.HttpServer;
      const ref: { app?: TermadaApp } = {};
      try {
        tcp = Deno.serve({
          hostname: bind.hostname,
          port: bind.port,
          signal: abort.signal,
          onListen: ({ port }) => tcpReady.resolve(port),
        }, (req) => ref.app!.app.fetch(req, { listener: "tcp" }));
      } catch (err) {
        throw new TermadaError(
          "INTERNAL",
          `Cannot listen on ${bind.hostname}:${bind.port}: ${(err as Error).message}`,
          {
            cause: err,
            hint: "Another program uses that port: pick another with --bind or server.bind",
          },
        );
      }
      servers.push(tcp);
      cleanups.push(async () => {
        abort.abort();
        await Promise.all(servers.map((s) => s.finished.catch(() => {})));
      });
      const port = await tcpReady.promise;
      const agents = agentDirectory(config);
      const app = createApp({
        engine,
        missions,
        version: options.version,
        agents,
        port,
        operatorToken: token,
        operator: {
          gateway,
          auditTail: (n) => audit.tail(n),
          auditVerify: () => verifyAudit(auditDir),
          bus,
          policy: () => ({
            default_policy: config.default_policy,
            policies: config.policies,
            agents: Object.fromEntries(
              Object.entries(config.agents).map((
                [id, a],
              ) => [id, { name: a.name ?? null, policy: a.policy ?? config.default_policy }]),
            ),
            dev_mode: config.auth.dev_mode,
          }),
        },
        onAgent: (id, via) => {
          try {
            store.upsertAgent({ id, via });
            gateway.record({ kind: "agent", id }, "agent.connected", { via });
          } catch (err) {
            log.error("could not record a connecting agent", { error: err });
          }
        },
      });
      ref.app = app;
      cleanups.push(() => app.close());

      try {
        Deno.removeSync(paths.socketPath); // stale from a crash: we hold the lock
      } catch {
        // no stale socket
      }
      const unixReady = Promise.withResolvers<void>();
      try {
        const unix = Deno.serve({
          path: paths.socketPath,
          signal: abort.signal,
          onListen: () => unixReady.resolve(),
        }, (req) => app.app.fetch(req, { listener: "unix" }));
        servers.push(unix);
      } catch (err) {
        throw new TermadaError(
          "INTERNAL",
          `Cannot listen on socket "${paths.socketPath}": ${(err as Error).message}`,
          { cause: err },
        );
      }
      await unixReady.promise;
      Deno.chmodSync(paths.socketPath, 0o600);
      cleanups.push(() => {
        try {
          Deno.removeSync(paths.socketPath);
        } catch {
          // already gone
        }
      });
      const d = new Daemon({
        paths,
        config,
        engine,
        store,
        port,
        token,
        lock,
        app,
        servers,
        abort,
        host: bind.hostname,
        gateway,
        audit,
        missions,
      });
      log.info("daemon ready", {
        pid: Deno.pid,
        socket: paths.socketPath,
        tcp: `${bind.hostname}:${port}`,
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
      url,
      dashboardUrl: `${url}/?token=${this.dashboardToken}`,
      pid: Deno.pid,
    };
  }

  get app(): TermadaApp {
    return this.#app;
  }

  /** Resolves when the daemon has stopped. */
  get done(): Promise<void> {
    return this.#done.promise;
  }

  /** Graceful stop; idempotent. */
  stop(reason = "stopped"): Promise<void> {
    return this.#stopping ??= (async () => {
      log.info("daemon stopping", { reason });
      await this.#app.close();
      this.#abort.abort();
      await this.engine.shutdown();
      await Promise.all(this.#servers.map((s) => s.finished.catch(() => {})));
      this.gateway.close();
      this.missions.close();
      try {
        this.audit.append({ kind: "system", id: "termada" }, "daemon.stopped", { reason });
      } catch (err) {
        log.error("could not audit the stop", { error: err });
      }
      this.audit.close();
      this.store.close();
      try {
        Deno.removeSync(this.paths.socketPath);
      } catch {
        // already gone
      }
      releaseLock(this.#lock, this.paths.lockPath);
      this.#done.resolve();
      log.info("daemon stopped");
    })();
  }
}

function acquireLock(path: string): Deno.FsFile {
  const f = Deno.openSync(path, { read: true, write: true, create: true, mode: 0o600 });
  let locked = false;
  try {
    locked = f.tryLockSync(true);
  } catch (err) {
    f.close();
    throw err;
  }
  if (!locked) {
    let pid = "";
    try {
      pid = Deno.readTextFileSync(path).trim();
    } catch {
      // unreadable: say nothing about the pid
    }
    f.close();
    throw new TermadaError(
      "INVALID_ARGUMENT",
      `Another Termada daemon is already running${pid ? ` (pid ${pid})` : ""}`,
      {
        hint: "Stop it first (termada stop, or kill that pid), or use another TERMADA_HOME",
      },
    );
  }
  f.truncateSync(0);
  f.writeSync(new TextEncoder().encode(`${Deno.pid}\n`));
  return f;
}

function releaseLock(f: Deno.FsFile, path: string): void {
  try {
    f.truncateSync(0);
    f.unlockSync();
    f.close();
  } catch {
    // already released
  }
  void path;
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

function agentDirectory(config: Config) {
  const byToken = new Map<string, string>();
  for (const [id, a] of Object.entries(config.agents)) byToken.set(a.token, id);
  const enc = new TextEncoder();
  return {
    devMode: config.auth.dev_mode,
    isConfigured: (id: string) => Object.hasOwn(config.agents, id),
    agentForToken(token: string): string | undefined {
      const t = enc.encode(token);
      let found: string | undefined;
      for (const [known, id] of byToken) {
        const k = enc.encode(known);
        if (k.length === t.length && timingSafeEqual(k, t)) found = id;
      }
      return found;
    },
  };
}

function pruneOrphanSpools(store: Store, spoolDir: string): void {
  try {
    pruneSpools(spoolDir, (id) => store.getJob(id) !== undefined);
  } catch (err) {
    log.warn("could not prune old spools", { error: err });
  }
}
