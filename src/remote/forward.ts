/**
 * Local port forwards (`ssh -L` without the ssh): a listener on 127.0.0.1 whose connections are
 * piped, one SSH `direct-tcpip` channel each, to `remote_host:remote_port` as seen from a server.
 *
 * This module owns the mechanism only: the listener, the accept loop, the byte pumps, the limits
 * and the owner scoping of ids. It never decides whether a forward may exist (policy) and never
 * writes audit records; the caller does both between `bind` (port and slot reserved, nothing
 * accepted) and `PendingForward.start` (connections served). It does not own the SSH connection
 * either: every accepted connection asks the caller's `OpenStream` for a channel, so the caller
 * may share, reconnect or refuse (`SERVER_UNREACHABLE`).
 */
import { type Clock, delay, newId, systemClock, TermadaError } from "../shared/mod.ts";
import type { ClientChannel } from "./ssh2.ts";

export const FORWARD_LIMITS = { connectionsPerForward: 64, perOwner: 16, total: 64 } as const;

/** The only address a forward listens on. */
export const FORWARD_ADDRESS = "127.0.0.1";

/**
 * Opens one TCP stream to `remoteHost:remotePort` through the server (ssh2 `forwardOut` on a
 * connection the caller manages). The returned channel is owned by the forward from then on: it
 * ends or destroys it. Rejecting closes the local connection that asked (the forward stays).
 */
export type OpenStream = (
  remoteHost: string,
  remotePort: number,
  origin: { address: string; port: number },
) => Promise<ClientChannel>;

export interface ForwardSpec {
  /** Inventory name of the server (recorded; used by `closeServer`). */
  server: string;
  remote_host: string;
  remote_port: number;
  /** 0 or absent: a free port chosen by the kernel. */
  local_port?: number;
}

export interface ForwardInfo {
  forward_id: string;
  owner: string;
  server: string;
  remote_host: string;
  remote_port: number;
  local_port: number;
  local_address: "127.0.0.1";
  created_at: string;
  /** Connections being served now. */
  connections: number;
  /** Connections served since the forward opened (refused ones not included). */
  total_connections: number;
  /** Connections closed at once because `connectionsPerForward` were open. */
  refused_connections: number;
  /** Bytes from the remote side to local clients. */
  bytes_in: number;
  /** Bytes from local clients to the remote side. */
  bytes_out: number;
  state: "open" | "closed";
  closed_reason?: string;
  /** The latest failure of one connection (the forward itself stays open). */
  last_error?: string;
}

/** A bound forward that does not accept yet: the caller audits, then starts or abandons it. */
export interface PendingForward {
  /** A snapshot taken when read (`local_port` is the bound one). */
  readonly info: ForwardInfo;
  /**
   * Starts accepting (call once the audit record is durable). Idempotent; throws `STOPPED` when
   * the forward was closed meanwhile (stop-all, server removed, `abandon`).
   */
  start(): void;
  /** Gives the port and the owner's slot back (audit failed, policy said no); no `onClosed`. */
  abandon(reason: string): Promise<void>;
}

export interface ForwardsOptions {
  limits?: Partial<typeof FORWARD_LIMITS>;
  /** One connection of forward `id` failed (open refused, reset, SSH connection lost). */
  onConnectionError?(id: string, err: Error): void;
  /** A forward closed (by `close`, `closeAll` or `closeServer`; not by `abandon`). */
  onClosed?(info: ForwardInfo): void;
  clock?: Clock;
}

type Limits = { -readonly [K in keyof typeof FORWARD_LIMITS]: number };

/** Bytes read from a local connection at a time. */
const READ_CHUNK = 64 * 1024;
/** Remote→local bytes queued before the channel is paused (ssh2 then withholds window). */
const QUEUE_HIGH = 256 * 1024;
/** Closed forwards kept so a repeated `close` answers with the same info, not NOT_FOUND. */
const KEEP_CLOSED = 256;
/** Wait after an accept error (e.g. out of file descriptors) before accepting again. */
const ACCEPT_BACKOFF_MS = 100;

/** Every forward of the daemon: limits, owner scoping, stop-all. */
export class Forwards implements AsyncDisposable {
  readonly #limits: Limits;
  readonly #options: ForwardsOptions;
  readonly #live = new Map<string, Forward>();
  readonly #closed = new Map<string, Forward>();

  constructor(options: ForwardsOptions = {}) {
    this.#limits = { ...FORWARD_LIMITS, ...options.limits };
    this.#options = options;
  }

  /**
   * Binds 127.0.0.1:`local_port` and reserves the owner's slot; accepts nothing until `start`.
   * Busy or forbidden port → `INVALID_ARGUMENT` naming it; over a limit → `QUOTA_EXCEEDED`.
   */
  bind(owner: string, spec: ForwardSpec, open: OpenStream): Promise<PendingForward> {
    // Synchronous inside, so the quota check and the reservation cannot interleave with another
    // bind; every failure still arrives as a rejection.
    try {
      return Promise.resolve(this.#bind(owner, spec, open));
    } catch (err) {
      return Promise.reject(err);
    }
  }

  #bind(owner: string, spec: ForwardSpec, open: OpenStream): PendingForward {
    checkSpec(owner, spec);
    const mine = [...this.#live.values()].filter((f) => f.owner === owner).length;
    if (mine >= this.#limits.perOwner) {
      throw new TermadaError(
        "QUOTA_EXCEEDED",
        `Cannot open a forward: "${owner}" already has ${mine} open (the limit per owner)`,
        { hint: "Close one with port_forward_close" },
      );
    }
    if (this.#live.size >= this.#limits.total) {
      throw new TermadaError(
        "QUOTA_EXCEEDED",
        `Cannot open a forward: ${this.#live.size} are open (the limit for all owners)`,
        { hint: "Close one with port_forward_close or try again later" },
      );
    }
    const listener = listen(spec.local_port ?? 0);
    const fwd = new Forward({
      id: newId("fwd"),
      owner,
      spec,
      open,
      listener,
      createdAt: new Date(this.#options.clock?.now() ?? systemClock.now()).toISOString(),
      maxConnections: this.#limits.connectionsPerForward,
      onConnectionError: (err) => this.#options.onConnectionError?.(fwd.id, err),
    });
    this.#live.set(fwd.id, fwd);
    return {
      get info() {
        return fwd.info();
      },
      start: () => fwd.start(),
      abandon: async (reason) => {
        await this.#finish(fwd, reason, false);
      },
    };
  }

  /** The owner's open forwards. */
  list(owner: string): ForwardInfo[] {
    return [...this.#live.values()].filter((f) => f.started && f.owner === owner).map((f) =>
      f.info()
    );
  }

  /** Every open forward (operator views). */
  all(): ForwardInfo[] {
    return [...this.#live.values()].filter((f) => f.started).map((f) => f.info());
  }

  /**
   * Closes one of the owner's forwards: listener stopped, every connection ended, slot freed.
   * Idempotent (a recently closed one answers with its closed info). Another owner's id answers
   * exactly as an unknown one: `NOT_FOUND`.
   */
  async close(owner: string, id: string, reason = "closed by its owner"): Promise<ForwardInfo> {
    const fwd = this.#live.get(id) ?? this.#closed.get(id);
    if (!fwd || fwd.owner !== owner || !fwd.started) {
      throw new TermadaError("NOT_FOUND", `No forward "${id}"`, {
        hint: "List yours with port_forward_list",
      });
    }
    return await this.#finish(fwd, reason, true);
  }

  /** Closes every forward, pending ones included (stop-all, shutdown). */
  closeAll(reason: string): Promise<ForwardInfo[]> {
    return this.#finishAll([...this.#live.values()], reason);
  }

  /** Closes every forward through `server`, pending ones included (server removed). */
  closeServer(server: string, reason: string): Promise<ForwardInfo[]> {
    return this.#finishAll([...this.#live.values()].filter((f) => f.server === server), reason);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.closeAll("Termada is shutting down");
  }

  #finishAll(forwards: Forward[], reason: string): Promise<ForwardInfo[]> {
    return Promise.all(forwards.map((f) => this.#finish(f, reason, true)));
  }

  async #finish(fwd: Forward, reason: string, notify: boolean): Promise<ForwardInfo> {
    const first = !fwd.closing;
    const info = await fwd.close(reason);
    if (!first) return info;
    this.#live.delete(fwd.id);
    // Abandoned forwards were never visible: nothing to answer a later close with.
    if (fwd.started) {
      this.#closed.set(fwd.id, fwd);
      for (const old of this.#closed.keys()) {
        if (this.#closed.size <= KEEP_CLOSED) break;
        this.#closed.delete(old);
      }
    }
    if (notify) {
      try {
        this.#options.onClosed?.(info);
      } catch {
        // The caller's hook must not turn a finished close into a failure.
      }
    }
    return info;
  }
}

function checkSpec(owner: string, spec: ForwardSpec): void {
  // The edge schema bounds these; reaching here with bad values is a programming error.
  if (owner === "") throw new TypeError("owner must not be empty");
  if (spec.remote_host === "" || spec.remote_host.length > 255) {
    throw new RangeError(`remote_host must be 1 to 255 characters`);
  }
  if (!Number.isInteger(spec.remote_port) || spec.remote_port < 1 || spec.remote_port > 65535) {
    throw new RangeError(`remote_port must be an integer from 1 to 65535`);
  }
  const lp = spec.local_port ?? 0;
  if (!Number.isInteger(lp) || lp < 0 || lp > 65535) {
    throw new RangeError(`local_port must be an integer from 0 to 65535`);
  }
}

function listen(port: number): Deno.TcpListener {
  try {
    return Deno.listen({ hostname: FORWARD_ADDRESS, port, transport: "tcp" });
  } catch (err) {
    if (err instanceof Deno.errors.AddrInUse) {
      throw new TermadaError(
        "INVALID_ARGUMENT",
        `Cannot forward from local port "${port}": it is already in use`,
        {
          hint: "Choose another local_port, or omit it for a free one",
          details: { key: "local_port" },
        },
      );
    }
    if (err instanceof Deno.errors.PermissionDenied) {
      throw new TermadaError(
        "INVALID_ARGUMENT",
        `Cannot forward from local port "${port}": binding it is not permitted`,
        {
          hint: "Choose a port above 1023, or omit local_port for a free one",
          details: { key: "local_port" },
        },
      );
    }
    throw new TermadaError(
      "INTERNAL",
      `Cannot forward from local port "${port}": ${errorMessage(err)}`,
      { cause: err },
    );
  }
}

interface ForwardInit {
  id: string;
  owner: string;
  spec: ForwardSpec;
  open: OpenStream;
  listener: Deno.TcpListener;
  createdAt: string;
  maxConnections: number;
  onConnectionError(err: Error): void;
}

/** One forward: its listener, its accept loop and its connections. */
class Forward {
  readonly id: string;
  readonly owner: string;
  readonly server: string;
  started = false;
  closing: Promise<ForwardInfo> | undefined;
  readonly #init: ForwardInit;
  readonly #localPort: number;
  readonly #stop = new AbortController();
  readonly #links = new Set<Link>();
  #acceptLoop: Promise<void> | undefined;
  #closedReason: string | undefined;
  #lastError: string | undefined;
  #served = 0;
  #refused = 0;
  /** Updated by links as bytes pass. */
  bytesIn = 0;
  bytesOut = 0;

  constructor(init: ForwardInit) {
    this.#init = init;
    this.id = init.id;
    this.owner = init.owner;
    this.server = init.spec.server;
    this.#localPort = (init.listener.addr as Deno.NetAddr).port;
  }

  info(): ForwardInfo {
    const s = this.#init.spec;
    return {
      forward_id: this.id,
      owner: this.owner,
      server: s.server,
      remote_host: s.remote_host,
      remote_port: s.remote_port,
      local_port: this.#localPort,
      local_address: FORWARD_ADDRESS,
      created_at: this.#init.createdAt,
      connections: this.#links.size,
      total_connections: this.#served,
      refused_connections: this.#refused,
      bytes_in: this.bytesIn,
      bytes_out: this.bytesOut,
      state: this.#closedReason === undefined ? "open" : "closed",
      ...(this.#closedReason === undefined ? {} : { closed_reason: this.#closedReason }),
      ...(this.#lastError === undefined ? {} : { last_error: this.#lastError }),
    };
  }

  start(): void {
    if (this.#closedReason !== undefined) {
      throw new TermadaError(
        "STOPPED",
        `Cannot start forward "${this.id}": it was closed (${this.#closedReason})`,
      );
    }
    if (this.started) return;
    this.started = true;
    this.#acceptLoop = this.#accept();
  }

  close(reason: string): Promise<ForwardInfo> {
    this.closing ??= this.#close(reason);
    return this.closing;
  }

  async #close(reason: string): Promise<ForwardInfo> {
    this.#closedReason = reason;
    this.#stop.abort();
    try {
      this.#init.listener.close();
    } catch {
      // Already closed: nothing else holds it.
    }
    for (const link of this.#links) link.close();
    await this.#acceptLoop;
    await Promise.all([...this.#links].map((l) => l.done));
    return this.info();
  }

  /** Records one connection's failure; the forward itself carries on. */
  fail(err: unknown, context: string): void {
    const error = err instanceof Error ? err : new Error(String(err));
    this.#lastError = `${context}: ${error.message}`;
    try {
      this.#init.onConnectionError(error);
    } catch {
      // The caller's hook must not break the accept loop or a pump.
    }
  }

  async #accept(): Promise<void> {
    const listener = this.#init.listener;
    const signal = this.#stop.signal;
    while (!signal.aborted) {
      let conn: Deno.TcpConn;
      try {
        conn = await listener.accept();
      } catch (err) {
        if (signal.aborted) return; // the listener was closed by `close`
        this.fail(err, "Cannot accept a connection");
        await delay(ACCEPT_BACKOFF_MS, signal);
        continue;
      }
      if (signal.aborted || this.#links.size >= this.#init.maxConnections) {
        closeQuietly(conn);
        if (!signal.aborted) {
          this.#refused++;
          this.fail(
            new Error(`${this.#init.maxConnections} connections are already open`),
            "Refused a connection",
          );
        }
        continue;
      }
      this.#served++;
      const link = new Link(this, conn, this.#init.spec, this.#init.open);
      this.#links.add(link);
      link.done.then(() => this.#links.delete(link));
    }
  }
}

/** One local connection and its channel. */
class Link {
  readonly done: Promise<void>;
  readonly #fwd: Forward;
  readonly #conn: Deno.TcpConn;
  readonly #stopped = Promise.withResolvers<void>();
  #closed = false;
  #channel: ClientChannel | undefined;

  constructor(fwd: Forward, conn: Deno.TcpConn, spec: ForwardSpec, open: OpenStream) {
    this.#fwd = fwd;
    this.#conn = conn;
    this.done = this.#run(spec, open).catch((err) => this.#fail(err, "Connection failed")).finally(
      () => this.close(),
    );
  }

  /** Ends both sides now; idempotent. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#stopped.resolve();
    closeQuietly(this.#conn);
    const ch = this.#channel;
    // ssh2's destroy() ends and sends CHANNEL_CLOSE; harmless when the connection is gone.
    if (ch) destroyQuietly(ch);
  }

  #fail(err: unknown, context: string): void {
    if (this.#closed) return; // our own teardown interrupting a read or write
    this.#fwd.fail(err, context);
    this.close();
  }

  async #run(spec: ForwardSpec, open: OpenStream): Promise<void> {
    try {
      this.#conn.setNoDelay(true);
    } catch {
      // Only latency depends on it.
    }
    const addr = this.#conn.remoteAddr as Deno.NetAddr;
    const target = `${spec.remote_host}:${spec.remote_port}`;
    let opening: Promise<ClientChannel>;
    try {
      opening = open(spec.remote_host, spec.remote_port, {
        address: addr.hostname,
        port: addr.port,
      });
    } catch (err) {
      opening = Promise.reject(err);
    }
    const ch = await Promise.race([opening, this.#stopped.promise]).catch((err) => {
      this.#fail(err, `Cannot open a stream to "${target}"`);
      return undefined;
    });
    if (!ch) {
      // Closed while opening: a channel arriving later is ours to destroy.
      opening.then(destroyQuietly, () => {});
      this.close();
      return;
    }
    if (this.#closed) {
      destroyQuietly(ch);
      return;
    }
    this.#channel = ch;
    // Without a listener an 'error' would be thrown out of the event emitter: fatal to the daemon.
    ch.on("error", (err: Error) => this.#fail(err, `Stream to "${target}" failed`));
    const remoteClosed = new Promise<void>((r) => ch.once("close", () => r()));
    const up = this.#up(ch);
    const down = this.#down(ch, remoteClosed);
    // Done when both directions ended, or the remote side closed (after its data was written).
    await Promise.race([
      Promise.all([up, down]),
      remoteClosed.then(() => down),
      this.#stopped.promise,
    ]);
    this.close();
    await Promise.all([up, down]);
  }

  /** Local → remote: Deno reads into channel writes, pausing while ssh2 buffers a window's worth. */
  async #up(ch: ClientChannel): Promise<void> {
    try {
      while (!this.#closed) {
        const buf = new Uint8Array(READ_CHUNK); // fresh: ssh2 may keep a chunk until window opens
        const n = await this.#conn.read(buf);
        if (n === null) break;
        this.#fwd.bytesOut += n;
        if (!ch.write(buf.subarray(0, n))) await this.#drained(ch);
      }
      // Half-close: the remote side sees EOF and may still answer.
      if (!this.#closed) ch.end();
    } catch (err) {
      this.#fail(err, "Local connection failed");
    }
  }

  #drained(ch: ClientChannel): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        ch.off("drain", done);
        ch.off("close", done);
        resolve();
      };
      ch.on("drain", done);
      ch.on("close", done);
      this.#stopped.promise.then(done);
    });
  }

  /** Remote → local: channel data queued and written in order; paused while the queue is full. */
  async #down(ch: ClientChannel, remoteClosed: Promise<void>): Promise<void> {
    const queue: Uint8Array[] = [];
    let queued = 0;
    let ended = false;
    let wake: (() => void) | undefined;
    const poke = () => {
      const w = wake;
      wake = undefined;
      w?.();
    };
    ch.on("data", (chunk: Uint8Array) => {
      queue.push(chunk);
      queued += chunk.length;
      this.#fwd.bytesIn += chunk.length;
      if (queued >= QUEUE_HIGH) ch.pause();
      poke();
    });
    ch.once("end", () => {
      ended = true;
      poke();
    });
    remoteClosed.then(() => {
      ended = true;
      poke();
    });
    this.#stopped.promise.then(poke);
    try {
      while (!this.#closed) {
        const chunk = queue.shift();
        if (chunk) {
          queued -= chunk.length;
          await writeAll(this.#conn, chunk);
          if (queued < QUEUE_HIGH && ch.isPaused()) ch.resume();
          continue;
        }
        if (ended) break;
        await new Promise<void>((r) => wake = r);
      }
      if (!this.#closed) await this.#conn.closeWrite();
    } catch (err) {
      this.#fail(err, "Local connection failed");
    }
  }
}

async function writeAll(conn: Deno.Conn, data: Uint8Array): Promise<void> {
  let off = 0;
  while (off < data.length) off += await conn.write(data.subarray(off));
}

function closeQuietly(conn: Deno.Conn): void {
  try {
    conn.close();
  } catch {
    // Already closed by the peer's reset or an earlier teardown.
  }
}

function destroyQuietly(ch: ClientChannel): void {
  try {
    ch.destroy();
  } catch {
    // ssh2 throws when its connection is already gone; the channel is dead either way.
  }
}

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
