/**
 * Port forwards against real parts: a real OpenSSH sshd on 127.0.0.1, a real ssh2 client
 * connected to it, and a real HTTP server (Deno.serve) as the remote target.
 */
import assert from "node:assert/strict";
import { TermadaError, within } from "../shared/mod.ts";
import { FORWARD_LIMITS, type ForwardInfo, Forwards, type OpenStream } from "./forward.ts";
import { type ClientChannel, loadSsh2, type SshClient } from "./ssh2.ts";
import { freePort, sshdAvailable, TestSshd } from "./_test_sshd.ts";

const { Client } = await loadSsh2();

const ignore = !sshdAvailable();
const enc = new TextEncoder();
const dec = new TextDecoder();
const MIB = 1024 * 1024;

/** A real ssh2 client to the test sshd that reconnects when its connection is gone. */
class SshLink implements AsyncDisposable {
  readonly #sshd: TestSshd;
  #current: Promise<SshClient> | undefined;
  readonly #clients: { client: SshClient; closed: Promise<void> }[] = [];
  opens = 0;

  constructor(sshd: TestSshd) {
    this.#sshd = sshd;
  }

  readonly open: OpenStream = async (host, port, origin) => {
    this.opens++;
    const client = await (this.#current ??= this.#connect());
    return await new Promise<ClientChannel>((resolve, reject) => {
      try {
        client.forwardOut(
          origin.address,
          origin.port,
          host,
          port,
          (err, ch) => err ? reject(err) : resolve(ch),
        );
      } catch (err) {
        reject(err); // "Not connected": the connection died between two opens
      }
    });
  };

  #connect(): Promise<SshClient> {
    const client = new Client();
    const closed = new Promise<void>((r) => client.once("close", () => r()));
    this.#clients.push({ client, closed });
    const ready = new Promise<SshClient>((resolve, reject) => {
      client.once("ready", () => resolve(client));
      client.once("error", reject);
    });
    // A dropped connection emits 'error' too; unhandled it would throw.
    client.on("error", () => {});
    closed.then(() => {
      if (this.#current && this.#clients.at(-1)?.client === client) this.#current = undefined;
    });
    // Test only: the test sshd's host key is generated per run.
    client.connect({ ...this.#sshd.connectOptions, hostVerifier: () => true });
    return ready;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    for (const { client } of this.#clients) client.end();
    await Promise.all(this.#clients.map((c) => c.closed));
  }
}

/** The remote target: a real HTTP server on 127.0.0.1. */
class Target implements AsyncDisposable {
  readonly server: Deno.HttpServer<Deno.NetAddr>;
  readonly download = randomBytes(20 * MIB);
  held = 0;
  readonly #heldWaiters: { n: number; resolve(): void }[] = [];
  readonly #release = Promise.withResolvers<void>();

  constructor(port = 0) {
    this.server = Deno.serve(
      { hostname: "127.0.0.1", port, onListen() {} },
      (req) => this.#handle(req),
    );
  }

  get port(): number {
    return this.server.addr.port;
  }

  /** Resolves once `n` requests wait in /hold. */
  whenHeld(n: number): Promise<void> {
    if (this.held >= n) return Promise.resolve();
    const { promise, resolve } = Promise.withResolvers<void>();
    this.#heldWaiters.push({ n, resolve });
    return promise;
  }

  release(): void {
    this.#release.resolve();
  }

  async #handle(req: Request): Promise<Response> {
    const url = new URL(req.url);
    switch (url.pathname) {
      case "/hello":
        return new Response("hello through the forward");
      case "/download":
        return new Response(this.download);
      case "/sha256": {
        const body = new Uint8Array(await req.arrayBuffer());
        return Response.json({ length: body.length, sha256: await sha256(body) });
      }
      case "/hold": {
        this.held++;
        for (const w of this.#heldWaiters) if (this.held >= w.n) w.resolve();
        await this.#release.promise;
        return new Response("held");
      }
      case "/endless": {
        const chunk = new Uint8Array(64 * 1024);
        return new Response(new ReadableStream({ pull: (c) => c.enqueue(chunk) }));
      }
      default:
        return new Response("no such path", { status: 404 });
    }
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.release();
    await this.server.shutdown();
  }
}

/** sshd + ssh2 client + HTTP target + the forwards under test, torn down in order. */
class Rig implements AsyncDisposable {
  readonly closed: ForwardInfo[] = [];
  readonly connectionErrors: Error[] = [];
  readonly forwards = new Forwards({
    onClosed: (info) => this.closed.push(info),
    onConnectionError: (_id, err) => this.connectionErrors.push(err),
  });
  readonly target = new Target();
  readonly sshd: TestSshd;
  readonly ssh: SshLink;

  private constructor(sshd: TestSshd) {
    this.sshd = sshd;
    this.ssh = new SshLink(sshd);
  }

  static async start(): Promise<Rig> {
    return new Rig(await TestSshd.start());
  }

  /** A started forward of `owner` to the HTTP target. */
  async forward(owner = "agent-a", remotePort = this.target.port): Promise<ForwardInfo> {
    const p = await this.forwards.bind(
      owner,
      { server: "test", remote_host: "127.0.0.1", remote_port: remotePort },
      this.ssh.open,
    );
    p.start();
    return p.info;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    try {
      await this.forwards.closeAll("test finished");
      await this.ssh[Symbol.asyncDispose]();
      await this.target[Symbol.asyncDispose]();
    } finally {
      await this.sshd[Symbol.asyncDispose]();
    }
  }
}

Deno.test({
  name: "port forward serves an HTTP GET through the SSH server on 127.0.0.1 only",
  ignore,
  async fn() {
    await using rig = await Rig.start();
    const info = await rig.forward();
    assert.equal(info.local_address, "127.0.0.1");
    assert.equal(info.state, "open");
    assert.match(info.forward_id, /^fwd_[0-9a-z]{12}$/);

    const res = await http(info.local_port, "GET", "/hello");
    assert.equal(res.status, 200);
    assert.equal(dec.decode(res.body), "hello through the forward");

    // Another loopback address is not listened on.
    await assert.rejects(
      Deno.connect({ hostname: "127.0.0.2", port: info.local_port }),
      Deno.errors.ConnectionRefused,
    );
    await waitFor(() => rig.forwards.list("agent-a")[0]?.connections === 0);
    const after = rig.forwards.list("agent-a")[0];
    assert.equal(after?.total_connections, 1);
    assert.ok((after?.bytes_in ?? 0) > 0 && (after?.bytes_out ?? 0) > 0);
  },
});

Deno.test({
  name: "port forward moves 20 MiB each way byte-exact",
  ignore,
  async fn() {
    await using rig = await Rig.start();
    const info = await rig.forward();

    const down = await http(info.local_port, "GET", "/download");
    assert.equal(down.status, 200);
    assert.equal(down.body.length, 20 * MIB);
    assert.equal(await sha256(down.body), await sha256(rig.target.download));

    const upload = randomBytes(20 * MIB);
    const up = await http(info.local_port, "POST", "/sha256", upload);
    assert.equal(up.status, 200);
    assert.deepEqual(JSON.parse(dec.decode(up.body)), {
      length: upload.length,
      sha256: await sha256(upload),
    });

    await waitFor(() => rig.forwards.list("agent-a")[0]?.connections === 0);
    const after = rig.forwards.list("agent-a")[0];
    assert.ok((after?.bytes_in ?? 0) > 20 * MIB);
    assert.ok((after?.bytes_out ?? 0) > 20 * MIB);
  },
});

Deno.test({
  name: "port forward serves 64 connections at once and closes the 65th",
  ignore,
  async fn() {
    await using rig = await Rig.start();
    const info = await rig.forward();
    const n = FORWARD_LIMITS.connectionsPerForward;
    const conns: Deno.TcpConn[] = [];
    try {
      for (let i = 0; i < n; i++) {
        const c = await Deno.connect({ hostname: "127.0.0.1", port: info.local_port });
        conns.push(c);
        await writeAll(c, requestHead("GET", "/hold"));
      }
      await rig.target.whenHeld(n);

      const extra = await Deno.connect({ hostname: "127.0.0.1", port: info.local_port });
      try {
        await writeAll(extra, requestHead("GET", "/hello")).catch(() => {});
        assert.equal(await readOrReset(extra), "closed");
      } finally {
        extra.close();
      }

      rig.target.release();
      const answers = await Promise.all(conns.map((c) => readAll(c).then(parseResponse)));
      for (const a of answers) {
        assert.equal(a.status, 200);
        assert.equal(dec.decode(a.body), "held");
      }
    } finally {
      rig.target.release();
      for (const c of conns) c.close();
    }
    const after = rig.forwards.list("agent-a")[0];
    assert.equal(after?.total_connections, n);
    assert.equal(after?.refused_connections, 1);
    assert.match(after?.last_error ?? "", /^Refused a connection: 64 connections/);
  },
});

Deno.test("port forward refuses the 17th forward of one owner and the 65th in all", async () => {
  await using forwards = new Forwards();
  const spec = { server: "test", remote_host: "127.0.0.1", remote_port: 80 };
  const open: OpenStream = () => Promise.reject(new Error("not used"));
  const pending = [];
  for (let i = 0; i < FORWARD_LIMITS.perOwner; i++) {
    pending.push(await forwards.bind("agent-a", spec, open));
  }
  await assert.rejects(forwards.bind("agent-a", spec, open), (err) => {
    assert.ok(err instanceof TermadaError);
    assert.equal(err.code, "QUOTA_EXCEEDED");
    assert.equal(
      err.message,
      `Cannot open a forward: "agent-a" already has 16 open (the limit per owner)`,
    );
    return true;
  });
  for (const owner of ["agent-b", "agent-c", "agent-d"]) {
    for (let i = 0; i < FORWARD_LIMITS.perOwner; i++) {
      pending.push(await forwards.bind(owner, spec, open));
    }
  }
  assert.equal(pending.length, FORWARD_LIMITS.total);
  await assert.rejects(forwards.bind("agent-e", spec, open), (err) => {
    assert.ok(err instanceof TermadaError);
    assert.equal(err.code, "QUOTA_EXCEEDED");
    assert.equal(err.message, "Cannot open a forward: 64 are open (the limit for all owners)");
    return true;
  });
  // A slot given back can be taken again.
  await pending[0]?.abandon("test");
  const again = await forwards.bind("agent-e", spec, open);
  await again.abandon("test");
  await Promise.all(pending.map((p) => p.abandon("test")));
});

Deno.test({
  name: "port forward of one owner is invisible to another",
  ignore,
  async fn() {
    await using rig = await Rig.start();
    const info = await rig.forward("agent-a");
    assert.deepEqual(rig.forwards.list("agent-b"), []);
    assert.deepEqual(rig.forwards.list("agent-a").map((f) => f.forward_id), [info.forward_id]);
    assert.deepEqual(rig.forwards.all().map((f) => f.forward_id), [info.forward_id]);

    const notFound = async (id: string) => {
      const err = await rig.forwards.close("agent-b", id).then(() => undefined, (e) => e);
      assert.ok(err instanceof TermadaError);
      return { code: err.code, message: err.message.replace(id, "<id>"), hint: err.hint };
    };
    const theirs = await notFound(info.forward_id);
    assert.deepEqual(theirs, await notFound("fwd_000000000000"));
    assert.deepEqual(theirs, {
      code: "NOT_FOUND",
      message: `No forward "<id>"`,
      hint: "List yours with port_forward_list",
    });
    // Still open and serving for its owner.
    assert.equal((await http(info.local_port, "GET", "/hello")).status, 200);
  },
});

Deno.test("port forward to a busy local port fails at once with INVALID_ARGUMENT", async (t) => {
  const open: OpenStream = () => Promise.reject(new Error("not used"));
  for (const hostname of ["127.0.0.1", "0.0.0.0"]) {
    await t.step(`port held on ${hostname}`, async () => {
      await using forwards = new Forwards();
      using blocker = Deno.listen({ hostname, port: 0 });
      const port = blocker.addr.port;
      const spec = { server: "test", remote_host: "127.0.0.1", remote_port: 80, local_port: port };
      const err = await forwards.bind("agent-a", spec, open).then(() => undefined, (e) => e);
      assert.ok(err instanceof TermadaError);
      assert.equal(err.code, "INVALID_ARGUMENT");
      assert.equal(err.message, `Cannot forward from local port "${port}": it is already in use`);
      assert.equal(err.details?.key, "local_port");
      // The failure took no slot.
      const pending = [];
      for (let i = 0; i < FORWARD_LIMITS.perOwner; i++) {
        pending.push(await forwards.bind("agent-a", { ...spec, local_port: 0 }, open));
      }
      await Promise.all(pending.map((p) => p.abandon("test")));
    });
  }
});

Deno.test({
  name: "pending port forward serves nothing before start and abandon frees the port",
  ignore,
  async fn() {
    await using rig = await Rig.start();
    const pending = await rig.forwards.bind(
      "agent-a",
      { server: "test", remote_host: "127.0.0.1", remote_port: rig.target.port },
      rig.ssh.open,
    );
    const port = pending.info.local_port;
    assert.deepEqual(rig.forwards.list("agent-a"), [], "a pending forward is not listed");

    // The kernel may complete the handshake into the backlog; nothing may be served.
    const early = await Deno.connect({ hostname: "127.0.0.1", port }).catch(() => undefined);
    if (early) {
      try {
        await writeAll(early, requestHead("GET", "/hello"));
        await pending.abandon("audit failed");
        assert.equal(await readOrReset(early), "closed");
      } finally {
        early.close();
      }
    } else {
      await pending.abandon("audit failed");
    }
    assert.equal(rig.ssh.opens, 0, "no stream was opened for the pending forward");
    assert.equal(rig.target.held, 0);
    assert.equal(rig.closed.length, 0, "abandon reports no close");
    assert.throws(
      () => pending.start(),
      (err) => err instanceof TermadaError && err.code === "STOPPED",
    );

    // The port is free again, and so is the slot.
    Deno.listen({ hostname: "127.0.0.1", port }).close();
    const again = await rig.forwards.bind(
      "agent-a",
      { server: "test", remote_host: "127.0.0.1", remote_port: rig.target.port, local_port: port },
      rig.ssh.open,
    );
    again.start();
    assert.equal((await http(port, "GET", "/hello")).status, 200);
  },
});

Deno.test({
  name: "port forward with nothing on the remote port closes that connection and stays usable",
  ignore,
  async fn() {
    await using rig = await Rig.start();
    const remotePort = freePort();
    const info = await rig.forward("agent-a", remotePort);

    const c = await Deno.connect({ hostname: "127.0.0.1", port: info.local_port });
    try {
      await writeAll(c, requestHead("GET", "/hello")).catch(() => {});
      assert.equal(await readOrReset(c), "closed");
    } finally {
      c.close();
    }
    await waitFor(() => rig.forwards.list("agent-a")[0]?.last_error !== undefined);
    const failed = rig.forwards.list("agent-a")[0];
    assert.equal(failed?.state, "open");
    assert.match(
      failed?.last_error ?? "",
      new RegExp(`^Cannot open a stream to "127.0.0.1:${remotePort}": .*refused`, "i"),
    );
    assert.equal(rig.connectionErrors.length, 1);

    // Something starts listening there: the same forward now serves.
    await using late = new Target(remotePort);
    const res = await http(info.local_port, "GET", "/hello");
    assert.equal(res.status, 200);
    assert.equal(late.port, remotePort);
  },
});

Deno.test({
  name: "port forward ends local connections when the SSH connection drops and serves new ones",
  ignore,
  // ssh2 may leave the decipher of a connection cut mid-packet to the garbage collector (its
  // internal resource, not one of ours); every connection and listener of ours is still checked
  // closed by the assertions below and the ops sanitizer.
  sanitizeResources: false,
  async fn() {
    await using rig = await Rig.start();
    const info = await rig.forward();
    const c = await Deno.connect({ hostname: "127.0.0.1", port: info.local_port });
    try {
      await writeAll(c, requestHead("GET", "/endless"));
      const buf = new Uint8Array(64 * 1024);
      let got = 0;
      while (got < 2 * MIB) {
        const n = await c.read(buf);
        assert.ok(n !== null, "the transfer runs");
        got += n;
      }
      assert.equal(await rig.sshd.dropConnections(), 1);
      // Reads go on until the data in flight is drained, then the connection ends.
      const ended = await within(drain(c), 15_000);
      assert.ok(ended !== undefined, "the local connection ended after the drop");
    } finally {
      c.close();
    }
    const listed = rig.forwards.list("agent-a");
    assert.equal(listed.length, 1);
    assert.equal(listed[0]?.state, "open");

    // A new connection gets a fresh open (the test's OpenStream reconnects).
    const res = await http(info.local_port, "GET", "/hello");
    assert.equal(res.status, 200);
    assert.equal(dec.decode(res.body), "hello through the forward");
  },
});

Deno.test({
  name: "closeAll closes every forward, ends their connections and frees their ports",
  ignore,
  async fn() {
    await using rig = await Rig.start();
    const a = await rig.forward("agent-a");
    const b = await rig.forward("agent-b");
    const pending = await rig.forwards.bind(
      "agent-c",
      { server: "test", remote_host: "127.0.0.1", remote_port: rig.target.port },
      rig.ssh.open,
    );
    const c = await Deno.connect({ hostname: "127.0.0.1", port: a.local_port });
    try {
      await writeAll(c, requestHead("GET", "/hold"));
      await rig.target.whenHeld(1);
      const closed = await rig.forwards.closeAll("stop-all by the operator");
      assert.deepEqual(
        closed.map((f) => [f.forward_id, f.state, f.closed_reason]).sort(),
        [a, b, pending.info].map((f) => [f.forward_id, "closed", "stop-all by the operator"])
          .sort(),
      );
      assert.equal(await readOrReset(c), "closed");
    } finally {
      c.close();
    }
    assert.deepEqual(rig.forwards.all(), []);
    assert.equal(rig.closed.length, 3);
    for (const port of [a.local_port, b.local_port, pending.info.local_port]) {
      Deno.listen({ hostname: "127.0.0.1", port }).close();
    }
    assert.throws(
      () => pending.start(),
      (err) => err instanceof TermadaError && err.code === "STOPPED",
    );
    // Closing again answers with the closed forward, not an error.
    const again = await rig.forwards.close("agent-a", a.forward_id);
    assert.equal(again.state, "closed");
    assert.equal(again.closed_reason, "stop-all by the operator");
    assert.equal(rig.closed.length, 3, "a repeated close reports nothing new");
  },
});

Deno.test({
  name: "closeServer closes only the forwards through that server",
  ignore,
  async fn() {
    await using rig = await Rig.start();
    const keep = await rig.forward();
    const p = await rig.forwards.bind(
      "agent-a",
      { server: "other", remote_host: "127.0.0.1", remote_port: rig.target.port },
      rig.ssh.open,
    );
    p.start();
    const closed = await rig.forwards.closeServer("other", "server removed");
    assert.deepEqual(closed.map((f) => f.forward_id), [p.info.forward_id]);
    assert.deepEqual(rig.forwards.list("agent-a").map((f) => f.forward_id), [keep.forward_id]);
    assert.equal((await http(keep.local_port, "GET", "/hello")).status, 200);
  },
});

// --- helpers ---

function randomBytes(n: number): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i += 65536) crypto.getRandomValues(out.subarray(i, i + 65536));
  return out;
}

async function sha256(data: Uint8Array): Promise<string> {
  const d = new Uint8Array(await crypto.subtle.digest("SHA-256", data as Uint8Array<ArrayBuffer>));
  return Array.from(d, (b) => b.toString(16).padStart(2, "0")).join("");
}

function requestHead(method: string, path: string, length?: number): Uint8Array {
  return enc.encode(
    `${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n` +
      (length === undefined ? "" : `Content-Length: ${length}\r\n`) + "\r\n",
  );
}

/** One HTTP/1.1 request on its own connection (Connection: close, so the body ends at EOF). */
async function http(
  port: number,
  method: string,
  path: string,
  body?: Uint8Array,
): Promise<{ status: number; body: Uint8Array }> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  try {
    const send = async () => {
      await writeAll(conn, requestHead(method, path, body?.length));
      if (body) await writeAll(conn, body);
    };
    const [, raw] = await Promise.all([send(), readAll(conn)]);
    return parseResponse(raw);
  } finally {
    conn.close();
  }
}

function parseResponse(raw: Uint8Array): { status: number; body: Uint8Array } {
  let end = -1;
  for (let i = 0; i + 3 < raw.length; i++) {
    if (raw[i] === 13 && raw[i + 1] === 10 && raw[i + 2] === 13 && raw[i + 3] === 10) {
      end = i;
      break;
    }
  }
  assert.ok(end > 0, "a complete response head");
  const head = dec.decode(raw.subarray(0, end));
  const status = Number(head.split(" ")[1]);
  const body = raw.subarray(end + 4);
  const length = /\r\ncontent-length: *(\d+)/i.exec(head)?.[1];
  if (length !== undefined) assert.equal(body.length, Number(length), "the whole body");
  return { status, body };
}

async function writeAll(conn: Deno.Conn, data: Uint8Array): Promise<void> {
  let off = 0;
  while (off < data.length) off += await conn.write(data.subarray(off));
}

async function readAll(conn: Deno.Conn): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  let total = 0;
  while (true) {
    const buf = new Uint8Array(64 * 1024);
    const n = await conn.read(buf);
    if (n === null) break;
    chunks.push(buf.subarray(0, n));
    total += n;
  }
  const out = new Uint8Array(total);
  let off = 0;
  for (const c of chunks) {
    out.set(c, off);
    off += c.length;
  }
  return out;
}

/** Reads to the end; true when it ended (EOF or reset). */
async function drain(conn: Deno.Conn): Promise<true> {
  const buf = new Uint8Array(64 * 1024);
  try {
    while ((await conn.read(buf)) !== null) { /* discard */ }
  } catch (err) {
    if (!(err instanceof Deno.errors.ConnectionReset)) throw err;
  }
  return true;
}

/** What a connection that must not be served does: "closed" when it ends with no data. */
async function readOrReset(conn: Deno.Conn): Promise<"closed" | "data"> {
  try {
    const n = await conn.read(new Uint8Array(1024));
    return n === null ? "closed" : "data";
  } catch (err) {
    if (err instanceof Deno.errors.ConnectionReset) return "closed";
    throw err;
  }
}

/** Polls `cond` until true (10 s deadline): for counters updated after a peer closed. */
async function waitFor(cond: () => boolean, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error("condition not met within the deadline");
    await new Promise((r) => setTimeout(r, 10));
  }
}
