/**
 * What agents do on servers, as the edges call it: list servers, open sessions there (then the
 * usual exec tools drive them), run one command on a fleet, forward ports, read and write
 * files. Each passes the gateway as a typed action (`session`, `fleet`, `forward`, `file.read`,
 * `file.write`) with the resources it touches, and acts only on a binding pinned at admission:
 * editing the inventory later never redirects work already admitted or approved.
 */
import type { Engine, RemoteLauncher, Session } from "../engine/mod.ts";
import type { CallOptions } from "../engine/mod.ts";
import type { ForwardInfo, Inventory, KnownHosts, SshPool } from "../remote/mod.ts";
import {
  canonicalHost,
  fleetCommandLine,
  FleetLimiter,
  Forwards,
  isLoopbackHost,
  remoteLauncher,
  runFleet,
} from "../remote/mod.ts";
import type { ServerBinding, SFTPWrapper, SshLease } from "../remote/mod.ts";
import { TermadaError } from "../shared/mod.ts";
import type {
  FleetResult,
  FleetRunInput,
  ForwardView,
  PortForwardInput,
  ServerList,
} from "../wire/mod.ts";
import { REMOTE_LIMITS } from "../wire/mod.ts";
import type { ApprovalBook } from "./approvals.ts";
import type { ActionRequest, AdmittedAction, Gateway } from "./gateway.ts";
import type { Recorder } from "./recorder.ts";
import { SYSTEM } from "./recorder.ts";

/** The remote machinery the daemon builds (src/remote), handed to control. */
export interface RemoteSetup {
  inventory: Inventory;
  pool: SshPool;
  knownHosts: KnownHosts;
  reconnectAttempts: number;
}

export interface RemoteOpsOptions {
  engine: Engine;
  gateway: Gateway;
  approvals: ApprovalBook;
  recorder: Recorder;
  setup: RemoteSetup;
}

export class RemoteOps {
  readonly #o: RemoteOpsOptions;
  /** The binding each open remote session was created with (pinned), by session id. */
  readonly #bindings = new Map<string, ServerBinding>();
  /** At most 5 fleet targets at once, daemon-wide. */
  readonly #limiter = new FleetLimiter(REMOTE_LIMITS.fleetConcurrency);
  readonly #forwards: Forwards;
  /** Aborted by stop-all: running fleet targets are cancelled. */
  #stop = new AbortController();

  constructor(o: RemoteOpsOptions) {
    this.#o = o;
    this.#forwards = new Forwards({
      onClosed: (f) => {
        try {
          o.recorder.note({ kind: "agent", id: f.owner }, "forward.closed", {
            action_id: this.#forwardActions.get(f.forward_id) ?? "",
            forward_id: f.forward_id,
            reason: f.closed_reason ?? "closed",
            connections: f.total_connections,
          });
        } catch {
          // audit latched: the next admission says so
        }
        this.#forwardActions.delete(f.forward_id);
      },
    });
  }

  readonly #forwardActions = new Map<string, string>();

  // ── fleet ─────────────────────────────────────────────────────────────────

  /**
   * One argv on every server named or tagged: one gateway decision for the whole call (every
   * server and the command; a confirm rule asks once, naming them), then at most 5 targets at
   * a time daemon-wide, each audited as it ends.
   */
  async fleetRun(owner: string, req: FleetRunInput, call: CallOptions = {}): Promise<FleetResult> {
    if ((req.servers?.length ?? 0) + (req.tags?.length ?? 0) === 0) {
      throw new TermadaError("INVALID_ARGUMENT", 'Name the targets: "servers" and/or "tags"');
    }
    const targets = this.inventory.select(req.servers, req.tags);
    if (targets.length === 0) {
      throw new TermadaError(
        "INVALID_ARGUMENT",
        `No server has the tags ${JSON.stringify(req.tags)}`,
        {
          hint: "server_list shows the servers and their tags",
        },
      );
    }
    if (targets.length > REMOTE_LIMITS.fleetTargets) {
      throw new TermadaError(
        "INVALID_ARGUMENT",
        `${targets.length} servers match: at most ${REMOTE_LIMITS.fleetTargets} per fleet_run`,
      );
    }
    const names = targets.map((t) => t.name);
    // As in exec_run, one word is a shell command line (and the policy reads it as one).
    // bash, the shell the policy parses lines as (dash would read some differently).
    const argv = req.command.length === 1 ? ["bash", "-c", req.command[0]!] : req.command;
    fleetCommandLine(argv); // what cannot be carried exactly is refused before anyone is asked
    const action = await this.admit({
      owner,
      kind: "fleet",
      subjects: targets.map((t) => ({ kind: "server" as const, name: t.name, tags: t.tags })),
      command: req.command,
      // The servers first (all of them), then the exact argv: an approval shows what runs where.
      summary: [
        `on ${names.length} server${names.length === 1 ? "" : "s"}:`,
        ...names,
        "run:",
        ...req.command,
      ],
    }, call.signal);
    const t0 = Date.now();
    const redactor = this.#o.engine.newRedactor();
    const enc = new TextEncoder(), dec = new TextDecoder();
    const signal = call.signal
      ? AbortSignal.any([call.signal, this.#stop.signal])
      : this.#stop.signal;
    const rec = this.#o.recorder;
    let results;
    try {
      results = await runFleet(argv, targets, this.#limiter, {
        concurrency: req.concurrency,
        timeoutMs: req.timeout_ms,
        signal,
        connect: async (b, sig) => {
          const l = await this.pool.acquire(b, { signal: sig });
          return { client: l.client, release: () => l.release() };
        },
        redact: (t) => dec.decode(redactor.redact(enc.encode(t))),
        onTargetDone: (r) => {
          rec.note({ kind: "agent", id: owner }, "fleet.target", {
            action_id: action.id,
            server: r.server,
            status: r.status,
            ...(r.exit_code === undefined ? {} : { exit_code: r.exit_code }),
            duration_ms: r.duration_ms,
            output_bytes: r.output_bytes,
            ...(r.error ? { error: r.error } : {}),
          });
        },
      });
    } catch (err) {
      this.done(action, { ok: false, error: (err as Error).message });
      throw err;
    }
    const ok = results.filter((r) => r.status === "exited" && r.exit_code === 0).length;
    const unreachable = results.filter((r) => r.status === "unreachable").length;
    this.done(action, { ok: true, facts: { targets: results.length, ok, unreachable } });
    return {
      action_id: action.id,
      command: [...req.command],
      targets: results.map((r) => ({
        server: r.server,
        status: r.status,
        ...(r.exit_code === undefined ? {} : { exit_code: r.exit_code }),
        ...(r.signal ? { signal: r.signal } : {}),
        output: r.output,
        truncated: r.truncated,
        output_bytes: r.output_bytes,
        duration_ms: r.duration_ms,
        ...(r.error ? { error: r.error } : {}),
      })),
      summary: {
        total: results.length,
        ok,
        failed: results.length - ok - unreachable,
        unreachable,
      },
      duration_ms: Date.now() - t0,
      ...(action.approvalId ? { approval_id: action.approvalId } : {}),
    };
  }

  // ── forwards ──────────────────────────────────────────────────────────────

  /**
   * A listener on 127.0.0.1 whose connections reach remote_host:remote_port from the server:
   * bound first (a busy port fails at once), decided (`forward` action), recorded durably, and
   * only then accepting. Its connections use the binding pinned now.
   */
  async forwardOpen(owner: string, req: PortForwardInput): Promise<ForwardView> {
    const binding = this.inventory.bind(req.server);
    // Decided and connected as one spelling; loopback aliases are decided as 127.0.0.1 too.
    const host = canonicalHost(req.remote_host);
    const hosts = isLoopbackHost(host) && host !== "127.0.0.1" ? [host, "127.0.0.1"] : [host];
    const pending = await this.#forwards.bind(owner, {
      server: binding.name,
      remote_host: host,
      remote_port: req.remote_port,
      local_port: req.local_port,
    }, async (host, port, origin) => {
      const lease = await this.pool.acquire(binding);
      try {
        return await new Promise((resolve, reject) => {
          lease.client.forwardOut(origin.address, origin.port, host, port, (err, ch) => {
            if (err) return reject(err);
            ch.once("close", () => lease.release());
            resolve(ch);
          });
        });
      } catch (err) {
        lease.release();
        throw err;
      }
    });
    let action;
    try {
      action = await this.admit({
        owner,
        kind: "forward",
        subjects: hosts.map((h) => ({
          kind: "forward" as const,
          server: binding.name,
          host: h,
          port: req.remote_port,
        })),
        summary: [
          `127.0.0.1:${pending.info.local_port}`,
          "→",
          `${host}:${req.remote_port}`,
          "via",
          binding.name,
        ],
      });
    } catch (err) {
      await pending.abandon((err as Error).message);
      throw err;
    }
    this.#forwardActions.set(pending.info.forward_id, action.id);
    pending.start();
    this.done(action, {
      ok: true,
      facts: { forward_id: pending.info.forward_id, local_port: pending.info.local_port },
    });
    return view(pending.info);
  }

  forwardList(owner: string): ForwardView[] {
    return this.#forwards.list(owner).map(view);
  }

  /** Every open forward (operator views), with its owner. */
  forwardViews(): (ForwardView & { owner: string })[] {
    return this.#forwards.all().map((f) => ({ ...view(f), owner: f.owner }));
  }

  get knownHosts(): KnownHosts {
    return this.#o.setup.knownHosts;
  }

  /**
   * An operator removed a server: forwards through it close. Sessions already open there keep
   * running on their pinned binding (close them to end them); idle connections time out.
   */
  async removeServer(name: string): Promise<void> {
    await this.inventory.remove(name);
    await this.#forwards.closeServer(name, `server "${name}" was removed`);
  }

  /** An operator closes any agent's forward (NOT_FOUND when no open one has that id). */
  async closeForwardAsOperator(id: string, reason: string): Promise<ForwardView> {
    const f = this.#forwards.all().find((x) => x.forward_id === id);
    if (!f) throw new TermadaError("NOT_FOUND", `No forward "${id}"`);
    return view(await this.#forwards.close(f.owner, id, reason));
  }

  /** Closes every forward of `owner` (its agent went away). */
  async closeForwardsOf(owner: string, reason: string): Promise<void> {
    for (const f of this.#forwards.list(owner)) {
      await this.#forwards.close(owner, f.forward_id, reason).catch(() => {/* closed meanwhile */});
    }
  }

  async forwardClose(owner: string, id: string): Promise<ForwardView> {
    return view(await this.#forwards.close(owner, id, "closed by its owner"));
  }

  /** Stop-all: running fleet targets cancelled, every forward closed. */
  async stopAll(reason: string): Promise<void> {
    this.#stop.abort(new TermadaError("STOPPED", reason));
    this.#stop = new AbortController();
    await this.#forwards.closeAll(reason);
  }

  get inventory(): Inventory {
    return this.#o.setup.inventory;
  }

  get pool(): SshPool {
    return this.#o.setup.pool;
  }

  /** The inventory's server names (vault_list asks the policy about each). */
  serverNames(): string[] {
    return this.inventory.list().map(({ entry }) => entry.name);
  }

  /** Servers an agent may name (never keys or credentials). */
  servers(_owner: string): ServerList {
    return {
      servers: this.inventory.list().map(({ entry, status }) => ({
        name: entry.name,
        tags: [...entry.tags],
        ...(status.reachable === undefined ? {} : { reachable: status.reachable }),
        ...(status.last_error ? { last_error: status.last_error } : {}),
        ...(status.checked_at ? { checked_at: status.checked_at } : {}),
      })),
    };
  }

  /** The gate for an action, with the approval book asking a person on confirm. */
  admit(req: ActionRequest, signal?: AbortSignal): Promise<AdmittedAction> {
    return this.#o.gateway.admitAction(req, (a, c) => this.#o.approvals.askAction(a, c, signal));
  }

  /**
   * Binds `target` now (pinned), passes the gate as a `session` action on that server, and
   * returns the launcher for the engine; `done` reports the outcome.
   */
  async sessionLauncher(
    owner: string,
    target: string,
    env?: Record<string, string>,
  ): Promise<{
    binding: ServerBinding;
    action: AdmittedAction;
    launcher: (id: string) => Promise<RemoteLauncher>;
  }> {
    const binding = this.inventory.bind(target);
    const action = await this.admit({
      owner,
      kind: "session",
      subjects: [{ kind: "server", name: binding.name, tags: binding.tags }],
      summary: [
        "session on",
        binding.name,
        `${binding.user}@${binding.host}:${binding.port}`,
        ...Object.keys(env ?? {}).map((k) => `env ${k}`),
      ],
      ...(env ? { env } : {}),
    });
    const rec = this.#o.recorder;
    const launcher = remoteLauncher({
      pool: this.pool,
      binding,
      reconnectAttempts: this.#o.setup.reconnectAttempts,
      onLinkLost: (s: Session, reason: string, jobId: string | undefined) => {
        try {
          rec.note(SYSTEM, "session.link_lost", {
            session_id: s.id,
            server: binding.name,
            reason,
            ...(jobId ? { job_id: jobId } : {}),
          });
        } catch {
          // audit latched: the next admission reports it
        }
      },
      onReconnected: (s: Session, attempt: number) => {
        try {
          rec.note(SYSTEM, "session.reconnected", {
            session_id: s.id,
            server: binding.name,
            attempt,
          });
        } catch {
          // as above
        }
      },
    });
    const bindings = this.#bindings;
    const engine = this.#o.engine;
    return {
      binding,
      action,
      launcher: (id: string) => {
        // Forget bindings of sessions that closed (bounded by the sessions ever opened here).
        for (const sid of bindings.keys()) {
          if (!engine.registry.sessionById(sid)) bindings.delete(sid);
        }
        bindings.set(id, binding);
        return launcher(id);
      },
    };
  }

  /** The binding a remote session was opened with. */
  bindingOf(sessionId: string): ServerBinding | undefined {
    return this.#bindings.get(sessionId);
  }

  /** An SFTP channel on a leased connection (the caller ends it, then releases the lease). */
  sftp(lease: SshLease): Promise<SFTPWrapper> {
    return new Promise((resolve, reject) => {
      lease.client.sftp((err, sftp) => {
        if (err) {
          reject(
            new TermadaError(
              "SERVER_UNREACHABLE",
              `Cannot open SFTP on "${lease.binding.name}": ${err.message}`,
              { details: { server: lease.binding.name } },
            ),
          );
        } else resolve(sftp);
      });
    });
  }

  done(action: AdmittedAction, outcome: Parameters<Gateway["actionDone"]>[1]): void {
    this.#o.gateway.actionDone(action, outcome);
  }

  /** Shutdown: every connection closed (sessions on servers are closed by the engine). */
  async close(): Promise<void> {
    this.#stop.abort(new TermadaError("STOPPED", "the daemon is shutting down"));
    await this.#forwards.closeAll("the daemon is shutting down");
    await this.pool.close();
  }
}

/** NOT_SUPPORTED for a daemon built without remote support (tests, embedded use). */
export function noRemote(target: string): TermadaError {
  return new TermadaError("NOT_SUPPORTED", `Remote target "${target}" is not available`, {
    hint: "This daemon has no server inventory",
  });
}

function view(f: ForwardInfo): ForwardView {
  return {
    forward_id: f.forward_id,
    server: f.server,
    remote_host: f.remote_host,
    remote_port: f.remote_port,
    local_address: "127.0.0.1",
    local_port: f.local_port,
    created_at: f.created_at,
    connections: f.connections,
    total_connections: f.total_connections,
    bytes_in: f.bytes_in,
    bytes_out: f.bytes_out,
    state: f.state,
    ...(f.closed_reason ? { closed_reason: f.closed_reason } : {}),
    ...(f.last_error ? { last_error: f.last_error } : {}),
  };
}
