/**
 * SSH connections, shared: one TCP connection to a server carries the channels of several users
 * (sessions, fleet commands, forwards, SFTP), like OpenSSH's ControlMaster. A connection takes
 * at most `leasesPerConnection` leases (sshd's MaxSessions is 10 by default); beyond, another
 * connection opens. An idle connection closes after `idleMs`. A connection that drops (TCP
 * reset, keepalive missed, sshd killed) ends every lease on it with the reason (`lost`).
 *
 * Every failure to connect is SERVER_UNREACHABLE naming the server and why: refused, timed out,
 * host key refused (the KnownHosts error as is), no credential accepted.
 */
import { logger, TermadaError } from "../shared/mod.ts";
import { bindingKey, type ServerBinding } from "./binding.ts";
import { credentials, type CredentialSource } from "./auth.ts";
import type { KnownHosts } from "./known_hosts.ts";
import { loadSsh2, type SshClient } from "./ssh2.ts";

const log = logger("remote");

export const POOL_LIMITS = {
  leasesPerConnection: 8,
  /** Connections open at once, all servers together. */
  connections: 256,
  idleMs: 15_000,
} as const;

export interface PoolOptions {
  knownHosts: KnownHosts;
  credentials: CredentialSource;
  connectTimeoutMs?: number;
  keepaliveMs?: number;
  idleMs?: number;
  /** The outcome of each connection attempt (the inventory's reachability). */
  onStatus?(server: string, ok: boolean, error?: string): void;
}

/** One user's hold on a connection: `release()` when done (idempotent). */
export interface SshLease {
  readonly client: SshClient;
  readonly binding: ServerBinding;
  /**
   * Resolves with the reason when the connection drops while this lease is held (never rejects).
   * After `release()` it never settles, and what was chained to it can be collected: one
   * lease's listeners do not stay with a connection that outlives it.
   */
  readonly lost: Promise<string>;
  release(): void;
}

interface Conn {
  key: string;
  client: SshClient;
  leases: number;
  dead: boolean;
  lost: Promise<string>;
  /** The held leases' own `lost` (resolved with the connection's, dropped on release). */
  lostWaiters: Set<(why: string) => void>;
  idleTimer?: ReturnType<typeof setTimeout>;
}

export class SshPool {
  readonly #o: PoolOptions;
  readonly #conns = new Map<string, Conn[]>();
  readonly #opening = new Map<string, Promise<Conn>>();
  #closed = false;

  constructor(o: PoolOptions) {
    this.#o = o;
  }

  /** A lease on a live connection to `b` (shared unless `fresh`). */
  async acquire(
    b: ServerBinding,
    o: { fresh?: boolean; signal?: AbortSignal } = {},
  ): Promise<SshLease> {
    if (this.#closed) throw new TermadaError("STOPPED", "Remote connections are shutting down");
    const key = bindingKey(b);
    let conn = o.fresh ? undefined : this.#pick(key);
    if (!conn) {
      // Concurrent acquires for one server share one handshake.
      let p = o.fresh ? undefined : this.#opening.get(key);
      if (!p) {
        p = this.#open(b, key, o.signal);
        if (!o.fresh) {
          this.#opening.set(key, p);
          p.finally(() => this.#opening.delete(key)).catch(() => {});
        }
      }
      conn = await p;
      if (conn.dead) return this.acquire(b, o);
      if (conn.leases >= POOL_LIMITS.leasesPerConnection) {
        return this.acquire(b, { ...o, fresh: true });
      }
    }
    return this.#lease(conn, b);
  }

  /** Open connections per server name (operator views, tests). */
  stats(): { connections: number; leases: number } {
    let connections = 0, leases = 0;
    for (const list of this.#conns.values()) {
      for (const c of list) {
        connections++;
        leases += c.leases;
      }
    }
    return { connections, leases };
  }

  /** Drops every connection to servers whose name is `name` (server removed). */
  dropServer(name: string): void {
    for (const [key, list] of this.#conns) {
      if (JSON.parse(key)[0] !== name) continue;
      for (const c of list) this.#kill(c);
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
    const all = [...this.#conns.values()].flat();
    for (const c of all) this.#kill(c);
    await Promise.all(all.map((c) => c.lost));
  }

  #pick(key: string): Conn | undefined {
    return this.#conns.get(key)?.find((c) => !c.dead && c.leases < POOL_LIMITS.leasesPerConnection);
  }

  #lease(conn: Conn, b: ServerBinding): SshLease {
    conn.leases++;
    clearTimeout(conn.idleTimer);
    conn.idleTimer = undefined;
    let released = false;
    const { promise: lost, resolve: setLost } = Promise.withResolvers<string>();
    conn.lostWaiters.add(setLost);
    return {
      client: conn.client,
      binding: b,
      lost,
      release: () => {
        if (released) return;
        released = true;
        conn.lostWaiters.delete(setLost);
        conn.leases--;
        if (conn.leases === 0 && !conn.dead) {
          conn.idleTimer = setTimeout(() => this.#kill(conn), this.#o.idleMs ?? POOL_LIMITS.idleMs);
        }
      },
    };
  }

  #kill(c: Conn): void {
    clearTimeout(c.idleTimer);
    c.idleTimer = undefined;
    if (c.dead) return;
    c.dead = true;
    try {
      c.client.end();
    } catch {
      // already closing
    }
    // A peer that never answers the close: cut the socket.
    setTimeout(() => {
      try {
        c.client.destroy();
      } catch {
        // gone
      }
    }, 1000).unref?.();
  }

  async #open(b: ServerBinding, key: string, signal?: AbortSignal): Promise<Conn> {
    const total = [...this.#conns.values()].reduce((n, l) => n + l.length, 0);
    if (total >= POOL_LIMITS.connections) {
      throw new TermadaError(
        "QUOTA_EXCEEDED",
        `Too many SSH connections are open (${POOL_LIMITS.connections})`,
        { retriable: true },
      );
    }
    let creds;
    try {
      creds = await credentials(b, this.#o.credentials);
    } catch (err) {
      this.#o.onStatus?.(b.name, false, (err as Error).message);
      throw err;
    }
    const timeoutMs = this.#o.connectTimeoutMs ?? 8000;
    const { Client } = await loadSsh2();
    const client = new Client();
    let hostKeyError: unknown;
    const where = `${b.host}:${b.port}`;
    const { promise: lost, resolve: setLost } = Promise.withResolvers<string>();
    const conn: Conn = { key, client, leases: 0, dead: false, lost, lostWaiters: new Set() };
    void lost.then((why) => {
      for (const w of conn.lostWaiters) w(why);
      conn.lostWaiters.clear();
    });
    try {
      await new Promise<void>((resolve, reject) => {
        let settled = false;
        const fail = (err: unknown) => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          signal?.removeEventListener("abort", onAbort);
          try {
            client.destroy();
          } catch {
            // not connected
          }
          reject(err);
        };
        const onAbort = () => fail(new TermadaError("STOPPED", "The call was cancelled"));
        signal?.addEventListener("abort", onAbort, { once: true });
        const timer = setTimeout(
          () =>
            fail(
              new TermadaError(
                "SERVER_UNREACHABLE",
                `Cannot reach server "${b.name}" (${where}): no answer in ${timeoutMs} ms`,
                { details: { server: b.name }, hint: "Check that the host is up and sshd listens" },
              ),
            ),
          timeoutMs,
        );
        client.once("ready", () => {
          // Small writes (a command line, a keystroke) must not wait ~40 ms for a delayed ACK.
          client.setNoDelay(true);
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          signal?.removeEventListener("abort", onAbort);
          resolve();
        });
        client.on("error", (err: Error & { level?: string; code?: string }) => {
          if (!settled) return fail(mapConnectError(b, err, hostKeyError, creds.tried));
          log.debug("ssh connection error", { server: b.name, error: err.message });
        });
        client.connect({
          host: b.host,
          port: b.port,
          username: b.user,
          readyTimeout: timeoutMs,
          keepaliveInterval: this.#o.keepaliveMs ?? 15_000,
          keepaliveCountMax: 3,
          authHandler: creds.methods,
          hostVerifier: (keyBlob: Uint8Array, verify: (ok: boolean) => void) => {
            this.#o.knownHosts.verify(b, keyBlob).then(
              () => verify(true),
              (err) => {
                hostKeyError = err;
                verify(false);
              },
            );
          },
        });
      });
    } catch (err) {
      const e = err instanceof TermadaError
        ? err
        : mapConnectError(b, err as Error, hostKeyError, creds.tried);
      this.#o.onStatus?.(b.name, false, e.message);
      throw e;
    }
    this.#o.onStatus?.(b.name, true);
    client.on("close", () => {
      conn.dead = true;
      clearTimeout(conn.idleTimer);
      const list = this.#conns.get(key)?.filter((c) => c !== conn) ?? [];
      if (list.length === 0) this.#conns.delete(key);
      else this.#conns.set(key, list);
      setLost(`the connection to "${b.name}" (${where}) closed`);
    });
    if (this.#closed) {
      this.#kill(conn);
      throw new TermadaError("STOPPED", "Remote connections are shutting down");
    }
    const list = this.#conns.get(key) ?? [];
    list.push(conn);
    this.#conns.set(key, list);
    return conn;
  }
}

function mapConnectError(
  b: ServerBinding,
  err: Error & { level?: string; code?: string },
  hostKeyError: unknown,
  tried: string[],
): TermadaError {
  if (hostKeyError instanceof TermadaError) return hostKeyError;
  const where = `${b.host}:${b.port}`;
  const details = { server: b.name };
  if (err.level === "client-authentication") {
    return new TermadaError(
      "SERVER_UNREACHABLE",
      `Server "${b.name}" (${where}) refused every credential for user "${b.user}" (tried ${
        tried.join(", ")
      })`,
      {
        retriable: false,
        details,
        hint: "Authorize the daemon's key for that user on the server, or fix `user`",
      },
    );
  }
  const code = err.code ?? "";
  const why = code === "ECONNREFUSED"
    ? "connection refused"
    : code === "ENOTFOUND" || code === "EAI_AGAIN"
    ? "unknown host"
    : code === "ETIMEDOUT" || /timed out/i.test(err.message)
    ? "timed out"
    : err.message;
  return new TermadaError(
    "SERVER_UNREACHABLE",
    `Cannot reach server "${b.name}" (${where}): ${why}`,
    {
      cause: err,
      details,
      hint: "Check that the host is up and sshd listens on that port",
    },
  );
}
