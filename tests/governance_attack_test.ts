/**
 * Attack probes against the governance layer (docs/GOVERNANCE.md, docs/SECURITY.md "Identity and
 * approvals"), from the outside, as hostile agents would: real daemons in strict identity mode,
 * the official MCP SDK client over HTTP, raw lines on the MCP socket, JWTs minted here with jose
 * (and hand-built ones jose would never make), the operator API for what only people do, and
 * commands inside the agents' own sessions. Nothing here reaches into the daemon's code.
 *
 * Each step is one attempt, named by what it shows:
 * - `HELD: …` the attack fails; the step asserts the safe outcome.
 * - `LIMIT: …` a limitation the docs state and this layer cannot close; the step asserts what
 *   really happens (so a change, for better or worse, is noticed), with a comment saying why.
 * The tests named `HELD (was a finding): …` are attacks that worked when this review began
 * (renaming an ancestor of a hidden path, a renamed copy of a shell); each is fixed and kept.
 *
 * The letter in brackets is the class of attack: [A] an agent approving its own request,
 * [B] JWTs, [C] quorum, [D] strict mode and socket identity, [E] policy reload and the files it
 * reads, [F] budgets, [G] anchors.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { mint, type MintedKeys, mintKeys, writeJwks } from "../src/governance/_jwt_testing.ts";
import {
  DENO_ARGS,
  operatorFetch,
  type RunningDaemon,
  startDaemon,
  termada,
  termadaEnv,
} from "./_daemon.ts";
import { pollUntil, runWithDeadline } from "./_clients.ts";

const ISS = "https://idp.attack.example";
const AGENT_AUD = "termada-agents";
const OP_AUD = "termada-operators";

type Obj = Record<string, unknown>;
interface ToolErr {
  code: string;
  message: string;
  details?: Obj;
}
const shown = (v: unknown) => JSON.stringify(v)?.slice(0, 1500);
const nowS = () => Math.floor(Date.now() / 1000);
/**
 * A strong static token (strict mode: ≥ 32 characters, ≥ 16 distinct, several classes). The fixed
 * run of 16 distinct letters guarantees the distinct count (random hex alone fell short now and
 * then, a CI flake); the UUID keeps tokens unique.
 */
const strongToken = (name: string) => `${name}-Tk7-GHIJKLMNOPQRSTUV-${crypto.randomUUID()}`;
const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");
const fileHash = async (path: string) => sha256(await Deno.readFile(path));
/** A word for bash, single-quoted. */
const q = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;
const b64 = (s: string) => btoa(String.fromCharCode(...new TextEncoder().encode(s)));

function b64u(data: string | Uint8Array): string {
  const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
  let s = "";
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s).replace(/=+$/, "").replace(/\+/g, "-").replace(/\//g, "_");
}

function fromB64u(s: string): Uint8Array {
  const bin = atob(s.replace(/-/g, "+").replace(/_/g, "/") + "=".repeat((4 - s.length % 4) % 4));
  return Uint8Array.from(bin, (c) => c.charCodeAt(0));
}

/** A compact JWS whose header and signature are whatever the attacker says. */
const handMade = (header: Obj, payload: Obj, sig = "") =>
  `${b64u(JSON.stringify(header))}.${b64u(JSON.stringify(payload))}.${sig}`;

async function removeAll(...paths: string[]): Promise<void> {
  for (const p of paths) await Deno.remove(p, { recursive: true }).catch(() => {});
}

// ── JWTs ────────────────────────────────────────────────────────────────────

interface Keys {
  /** The agent trust's one key (EdDSA). */
  agent: MintedKeys;
  /** The operator trust's one key (ES256). */
  op: MintedKeys;
  /** A key nobody trusts: the attacker's own. */
  stray: MintedKeys;
}

interface MintOpts {
  key?: MintedKeys;
  /** null: no kid in the header. */
  kid?: string | null;
  header?: Obj;
}

function agentClaims(claims: Obj = {}): Obj {
  const n = nowS();
  return {
    iss: ISS,
    aud: AGENT_AUD,
    sub: "alice",
    agent_id: "ci",
    iat: n,
    exp: n + 300,
    ...claims,
  };
}

function operatorClaims(sub: string, roles: string[], amr: string[], claims: Obj = {}): Obj {
  const n = nowS();
  return { iss: ISS, aud: OP_AUD, sub, roles, amr, iat: n, exp: n + 600, ...claims };
}

async function signed(key: MintedKeys, claims: Obj, o: MintOpts = {}): Promise<string> {
  return await mint(
    key.privateKey,
    key.publicJwk.alg,
    o.kid === null ? undefined : (o.kid ?? key.publicJwk.kid),
    claims,
    o.header ? { header: o.header } : {},
  );
}

const agentJwt = (k: Keys, claims: Obj = {}, o: MintOpts = {}) =>
  signed(o.key ?? k.agent, agentClaims(claims), o);
const operatorJwt = (
  k: Keys,
  sub: string,
  roles: string[],
  amr: string[],
  claims: Obj = {},
  o: MintOpts = {},
) => signed(o.key ?? k.op, operatorClaims(sub, roles, amr, claims), o);

async function freshKeys(): Promise<Keys> {
  return {
    agent: await mintKeys("EdDSA"),
    op: await mintKeys("ES256"),
    stray: await mintKeys("EdDSA"),
  };
}

/** A JWKS file as an operator would keep it: 0600, in a 0700 directory of this user. */
async function pinned(path: string, keys: MintedKeys[]): Promise<void> {
  await writeJwks(path, keys.map((k) => k.publicJwk));
  await Deno.chmod(path, 0o600);
}

// ── HTTP: the operator API and /mcp ─────────────────────────────────────────

interface Reply {
  status: number;
  body: Obj;
}
const errMsg = (r: Reply) => String((r.body.error as { message?: string } | undefined)?.message);

async function api(
  d: RunningDaemon,
  bearer: string | undefined,
  path: string,
  init: { method?: string; body?: unknown; headers?: Record<string, string> } = {},
): Promise<Reply> {
  const method = init.method ?? (init.body !== undefined ? "POST" : "GET");
  const r = await fetch(`http://127.0.0.1:${d.port}/api${path}`, {
    method,
    headers: {
      ...(bearer !== undefined ? { authorization: `Bearer ${bearer}` } : {}),
      "content-type": "application/json",
      ...init.headers,
    },
    ...(method === "GET" ? {} : { body: JSON.stringify(init.body ?? {}) }),
  });
  const text = await r.text();
  let body: Obj;
  try {
    body = JSON.parse(text);
  } catch {
    body = { raw: text };
  }
  return { status: r.status, body };
}

const approve = (d: RunningDaemon, bearer: string | undefined, id: string, h = {}) =>
  api(d, bearer, `/approvals/${id}/approve`, { body: {}, headers: h });
const deny = (d: RunningDaemon, bearer: string | undefined, id: string, h = {}) =>
  api(d, bearer, `/approvals/${id}/deny`, { body: {}, headers: h });
const opToken = (d: RunningDaemon) => Deno.readTextFileSync(`${d.home}/token`).trim();

interface PendingView {
  approval_id: string;
  requester: string;
  approvers: string[];
}
async function pending(d: RunningDaemon): Promise<PendingView[]> {
  const r = await api(d, opToken(d), "/approvals");
  assert.equal(r.status, 200, shown(r));
  return r.body.approvals as PendingView[];
}

async function auditEvents(d: RunningDaemon, event: string): Promise<Obj[]> {
  const r = await operatorFetch(d)("/audit?n=5000");
  const body = await r.json() as { records: { event: string; data: Obj }[] };
  return body.records.filter((x) => x.event === event).map((x) => x.data);
}

interface BudgetLine {
  budget: string;
  scope_key: string;
  used: number;
  reserved: number;
  limit: number;
}
async function budgetLine(d: RunningDaemon, budget: string, key: string): Promise<BudgetLine> {
  const r = await api(d, opToken(d), "/budgets");
  const all = r.body.budgets as BudgetLine[];
  return all.find((b) => b.budget === budget && b.scope_key === key) ??
    { budget, scope_key: key, used: 0, reserved: 0, limit: -1 };
}

function initialize(name = "attacker", id = 1): Obj {
  return {
    jsonrpc: "2.0",
    id,
    method: "initialize",
    params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name, version: "1" } },
  };
}

/** One raw POST to /mcp: status, session id, the JSON-RPC messages of the answer (JSON or SSE). */
async function rawMcp(
  d: RunningDaemon,
  bearer: string | undefined,
  message: Obj,
  sid?: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; sid?: string; messages: Obj[]; text: string }> {
  const r = await fetch(`http://127.0.0.1:${d.port}/mcp`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      ...(bearer !== undefined ? { authorization: `Bearer ${bearer}` } : {}),
      ...(sid ? { "mcp-session-id": sid, "mcp-protocol-version": "2025-06-18" } : {}),
      ...headers,
    },
    body: JSON.stringify(message),
  });
  const text = await r.text();
  const messages: Obj[] = [];
  if ((r.headers.get("content-type") ?? "").includes("text/event-stream")) {
    for (const line of text.split("\n")) {
      if (line.startsWith("data: ")) messages.push(JSON.parse(line.slice(6)));
    }
  } else if (text.trim().startsWith("{")) {
    messages.push(JSON.parse(text));
  }
  return { status: r.status, sid: r.headers.get("mcp-session-id") ?? undefined, messages, text };
}

const mcpStatus = async (d: RunningDaemon, bearer?: string, headers = {}) =>
  (await rawMcp(d, bearer, initialize(), undefined, headers)).status;

/** An MCP SDK client over HTTP with `bearer`, closed on dispose. */
async function agentClient(d: RunningDaemon, bearer: string): Promise<Client & AsyncDisposable> {
  const client = new Client({ name: "attack", version: "1" });
  const transport = new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${d.port}/mcp`), {
    requestInit: { headers: { authorization: `Bearer ${bearer}` } },
  });
  await client.connect(transport);
  return Object.assign(client, {
    async [Symbol.asyncDispose]() {
      await client.close().catch(() => {});
    },
  });
}

interface ToolReply {
  isError: boolean;
  sc: Obj;
  error?: ToolErr;
  thrown?: unknown;
}
async function tool(c: Client, name: string, args: Obj): Promise<ToolReply> {
  try {
    const r = await c.callTool({ name, arguments: args });
    const sc = (r.structuredContent ?? {}) as Obj;
    return { isError: r.isError === true, sc, error: sc.error as ToolErr | undefined };
  } catch (err) {
    return { isError: true, sc: {}, thrown: err };
  }
}

/** One shell line in the agent's default session (strict mode: the policy allows `*`). */
async function sh(c: Client, line: string): Promise<{ code: number; out: string; r: ToolReply }> {
  const r = await tool(c, "exec_run", { command: [line], timeout_ms: 20_000 });
  assert.equal(r.error, undefined, `${line}: ${shown(r)}`);
  return { code: Number(r.sc.exit_code), out: String(r.sc.output ?? ""), r };
}

/** exec_start in the background: the job and its approval id (confirm rules park it). */
async function request(c: Client, command: string[]): Promise<{ job: string; approval: string }> {
  const r = await tool(c, "exec_start", { command, mode: "background" });
  const approval = String(r.sc.approval_id ?? "");
  assert.match(approval, /^apr_/, shown(r));
  return { job: String(r.sc.job_id), approval };
}

/** Types a line once the job waits for input again. */
async function typeLine(
  c: Client,
  job: string,
  input: string,
  extra: Obj = {},
): Promise<ToolReply> {
  return await pollUntil(
    async () => {
      const r = await tool(c, "exec_write", { job_id: job, input, ...extra });
      if (r.error?.code !== "NOT_AWAITING_INPUT") return r;
      await tool(c, "exec_wait", { job_id: job, until: { prompt: true }, timeout_ms: 2000 });
      return undefined;
    },
    `typing ${JSON.stringify(input)}`,
    15_000,
  );
}

// ── the MCP socket: raw newline-delimited JSON-RPC ─────────────────────────

const mcpSocketOf = (d: RunningDaemon) => d.socketPath.replace(/(\.sock)?$/, "-mcp.sock");

class SocketConn implements AsyncDisposable {
  readonly #conn: Deno.UnixConn;
  readonly #lines: Obj[] = [];
  readonly #pump: Promise<void>;
  #wake: (() => void) | undefined;
  closed = false;

  private constructor(conn: Deno.UnixConn) {
    this.#conn = conn;
    this.#pump = this.#read();
  }

  static async open(path: string): Promise<SocketConn> {
    return new SocketConn(await Deno.connect({ transport: "unix", path }));
  }

  async #read(): Promise<void> {
    const dec = new TextDecoder();
    const buf = new Uint8Array(64 * 1024);
    let text = "";
    try {
      for (;;) {
        const n = await this.#conn.read(buf);
        if (n === null) break;
        text += dec.decode(buf.subarray(0, n), { stream: true });
        let i: number;
        while ((i = text.indexOf("\n")) >= 0) {
          const line = text.slice(0, i).trim();
          text = text.slice(i + 1);
          if (line) this.#lines.push(JSON.parse(line));
        }
        this.#wake?.();
      }
    } catch {
      // closed under the read
    } finally {
      this.closed = true;
      this.#wake?.();
    }
  }

  async send(v: Obj): Promise<void> {
    const bytes = new TextEncoder().encode(JSON.stringify(v) + "\n");
    let off = 0;
    while (off < bytes.length) off += await this.#conn.write(bytes.subarray(off));
  }

  /** The next message with `id` (notifications skipped); undefined when the connection ended. */
  async reply(id: number, timeoutMs = 15_000): Promise<Obj | undefined> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const i = this.#lines.findIndex((m) => m.id === id);
      if (i >= 0) return this.#lines.splice(i, 1)[0];
      if (this.closed) return undefined;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no reply ${id} on the MCP socket within ${timeoutMs} ms`);
      await this.#nap(left);
    }
  }

  /** Resolves once the daemon closed the connection; false if it did not within `timeoutMs`. */
  async waitClosed(timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (!this.closed) {
      const left = deadline - Date.now();
      if (left <= 0) return false;
      await this.#nap(left);
    }
    return true;
  }

  async #nap(ms: number): Promise<void> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    await new Promise<void>((r) => {
      this.#wake = r;
      timer = setTimeout(r, ms);
    });
    clearTimeout(timer);
    this.#wake = undefined;
  }

  async close(): Promise<void> {
    try {
      this.#conn.close();
    } catch {
      // already closed
    }
    await this.#pump;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}

/** Hello + initialize on the MCP socket: the open connection and the initialize reply. */
async function socketSession(
  d: RunningDaemon,
  hello: Obj,
  clientName = "attacker",
): Promise<{ conn: SocketConn; init: Obj | undefined }> {
  const conn = await SocketConn.open(mcpSocketOf(d));
  await conn.send({ termada: "hello", v: 1, ...hello });
  await conn.send(initialize(clientName));
  const init = await conn.reply(1);
  if (init?.result) {
    await conn.send({ jsonrpc: "2.0", method: "notifications/initialized" });
  }
  return { conn, init };
}

let socketIds = 100;
async function socketTool(conn: SocketConn, name: string, args: Obj): Promise<Obj | undefined> {
  const id = socketIds++;
  await conn.send({ jsonrpc: "2.0", id, method: "tools/call", params: { name, arguments: args } });
  return await conn.reply(id);
}
const socketError = (
  m: Obj | undefined,
) => (m?.error as { code?: number; message?: string } | undefined);
const structured = (m: Obj | undefined) =>
  ((m?.result as { structuredContent?: Obj } | undefined)?.structuredContent ?? {}) as Obj;

// ── daemons ─────────────────────────────────────────────────────────────────

async function writeConfig(path: string, text: string): Promise<void> {
  await Deno.writeTextFile(path, text, { mode: 0o600 });
}

/** A home (state dir) with `config` as its config.yaml (0600: it holds agent tokens). */
async function homeWith(config: string): Promise<string> {
  const home = await Deno.makeTempDir({ prefix: "termada-home-" });
  await writeConfig(`${home}/config.yaml`, config);
  return home;
}

/** The main daemon: strict, agent and operator JWTs pinned in JWKS files under /tmp. */
function mainConfig(jdir: string, t: Record<string, string>): string {
  return `
security:
  identity_mode: strict
  agent_jwt:
    issuer: ${ISS}
    audience: ${AGENT_AUD}
    jwks_file: ${jdir}/agent-jwks.json
    max_ttl_s: 600
    clock_skew_s: 1
  operator_jwt:
    issuer: ${ISS}
    audience: ${OP_AUD}
    jwks_file: ${jdir}/operator-jwks.json
  operator_token_roles: [sre]
approvals:
  confirm_timeout_ms: 60000
agents:
  bot: { token: "${t.bot}", policy: team, principal: dave }
  ci: { jwt: true, policy: team }
  bud: { token: "${t.bud}", policy: budgeted }
  f1: { token: "${t.f1}", policy: failing }
  f2: { token: "${t.f2}", policy: failing }
  typ: { token: "${t.typ}", policy: typing }
default_policy: team
policies:
  team:
    rules:
      - { effect: allow, action: [exec, input], resource: ["*"] }
      - { effect: allow, action: [file.read, file.write], resource: ["/**"] }
      - effect: confirm
        action: exec
        resource: "touch *"
        approval: { quorum: 2, roles: [sre], mfa: true, exclude_requester: true }
      - effect: confirm
        action: exec
        resource: "cp *"
        approval: { quorum: 2, roles: [sre] }
  budgeted:
    rules:
      - { effect: allow, action: exec, resource: ["*"] }
    budgets:
      - { name: ops, scope: principal, metric: operations, limit: 10, kinds: [exec] }
  failing:
    rules:
      - { effect: allow, action: exec, resource: ["*"] }
    budgets:
      - { name: fails, scope: principal, metric: failures, limit: 2 }
  typing:
    rules:
      - { effect: allow, action: [exec, input], resource: ["*"] }
      - { effect: deny, action: input, resource: "echo forbidden*", reason: not this line }
    budgets:
      - { name: typed, scope: principal, metric: operations, limit: 2, kinds: [input] }
`;
}

Deno.test("governance attacks on a strict daemon: self-approval, JWTs, quorum, reload files, budgets, anchors", async (t) => {
  const keys = await freshKeys();
  const jdir = await Deno.makeTempDir({ prefix: "termada-jwks-" }); // /tmp, 0700: sessions can write it
  const work = await Deno.makeTempDir({ prefix: "termada-attack-" });
  const tokens = Object.fromEntries(
    ["bot", "bud", "f1", "f2", "typ"].map((n) => [n, strongToken(n)]),
  );
  await pinned(`${jdir}/agent-jwks.json`, [keys.agent]);
  await pinned(`${jdir}/operator-jwks.json`, [keys.op]);
  const home = await homeWith(mainConfig(jdir, tokens));
  try {
    await using d = await startDaemon(home);
    const TOKEN = opToken(d);
    await using bot = await agentClient(d, tokens.bot!);
    await using ci = await agentClient(d, await agentJwt(keys));
    const bob = await operatorJwt(keys, "bob", ["sre"], ["hwk"]);
    const carol = await operatorJwt(keys, "carol", ["sre"], ["otp"]);
    const caps = (await tool(bot, "capabilities", {})).sc;
    const boundary = caps.boundary as { hiding: { active: boolean; how?: string } };

    // ── [A] an agent approving its own request ──────────────────────────────

    await t.step("HELD: [A] no MCP tool or method reaches an operator action", async () => {
      const { approval, job } = await request(bot, ["touch", `${work}/a1`]);
      const names: string[] = (await bot.listTools()).tools.map((x: { name: string }) => x.name);
      assert.ok(names.includes("exec_run") && names.includes("exec_kill"), shown(names));
      const operatorish = names.filter((n) =>
        /approv|deny|reload|reconcile|stop_all|^resume|takeover|unlock|anchor|policy/.test(n)
      );
      assert.deepEqual(operatorish, [], "an MCP tool named like an operator action");
      for (const name of ["approve", "approvals_approve", "approval_decide", "policy_reload"]) {
        const r = await tool(bot, name, { approval_id: approval, id: approval });
        assert.equal(r.isError, true, `${name}: ${shown(r)}`);
      }
      // JSON-RPC methods beyond MCP's own, on a session of the agent.
      const init = await rawMcp(d, tokens.bot, initialize("bot"));
      assert.equal(init.status, 200, init.text);
      let id = 2;
      for (const method of ["approvals/approve", "termada/approve", "policy/reload"]) {
        const r = await rawMcp(d, tokens.bot, {
          jsonrpc: "2.0",
          id: id++,
          method,
          params: { approval_id: approval },
        }, init.sid);
        const error = r.messages[0]?.error as { code?: number } | undefined;
        assert.equal(error?.code, -32601, `${method}: ${r.text}`);
      }
      const p = (await pending(d)).find((x) => x.approval_id === approval);
      assert.deepEqual(p?.approvers, [], "nothing voted");
      assert.equal((await tool(bot, "exec_poll", { job_id: job })).sc.status, "pending_approval");
      assert.equal((await deny(d, TOKEN, approval)).status, 200);
    });

    await t.step(
      "HELD: [A] /api refuses the agent's token, its JWT (roles and amr claims included) and forged operator headers; audited",
      async () => {
        const { approval } = await request(bot, ["touch", `${work}/a2`]);
        const richJwt = await agentJwt(keys, {
          roles: ["sre", "admin"],
          amr: ["mfa", "hwk"],
          aud: [AGENT_AUD, OP_AUD],
        });
        const forged = {
          "x-termada-operator": "alice",
          "x-termada-agent": "operator",
          "x-termada-roles": "sre",
          "x-forwarded-user": "root",
        };
        const attempts: [string, string | undefined, Record<string, string>][] = [
          ["static agent token", tokens.bot, {}],
          ["agent JWT with roles/amr", richJwt, {}],
          ["forged headers alone", undefined, forged],
          ["forged headers + agent token", tokens.bot, forged],
          ["forged headers + agent JWT", richJwt, forged],
          ["agent token as basic auth", undefined, {
            authorization: `Basic ${b64(`x:${tokens.bot}`)}`,
          }],
        ];
        for (const [what, bearer, h] of attempts) {
          assert.equal((await approve(d, bearer, approval, h)).status, 401, what);
          assert.equal((await deny(d, bearer, approval, h)).status, 401, what);
          assert.equal(
            (await api(d, bearer, "/policy/reload", { body: {}, headers: h })).status,
            401,
          );
          assert.equal((await api(d, bearer, "/stop", { body: {}, headers: h })).status, 401);
          assert.equal((await api(d, bearer, "/approvals", { headers: h })).status, 401);
        }
        // Over the HTTP Unix socket too.
        const unix = Deno.createHttpClient({ proxy: { transport: "unix", path: d.socketPath } });
        try {
          for (const bearer of [tokens.bot!, richJwt]) {
            const r = await fetch(`http://termada/api/approvals/${approval}/approve`, {
              client: unix,
              method: "POST",
              headers: { authorization: `Bearer ${bearer}`, "content-type": "application/json" },
              body: "{}",
            } as RequestInit);
            assert.equal(r.status, 401);
            await r.body?.cancel();
          }
        } finally {
          unix.close();
        }
        const p = (await pending(d)).find((x) => x.approval_id === approval);
        assert.deepEqual(p?.approvers, []);
        const refused = await pollUntil(
          () =>
            auditEvents(d, "auth.refused").then((r) => {
              const op = r.filter((x) => x.transport === "operator");
              return op.length >= 3 ? op : undefined;
            }),
          "auth.refused records of operator routes",
        );
        const text = JSON.stringify(refused);
        assert.ok(!text.includes(tokens.bot!.slice(0, 16)), "a refusal record holds the token");
        assert.ok(!text.includes(richJwt.slice(0, 40)), "a refusal record holds the JWT");
        assert.equal((await deny(d, TOKEN, approval)).status, 200);
      },
    );

    await t.step("HELD: [A] an operator JWT signed with the agent-JWT key", async () => {
      const { approval } = await request(bot, ["touch", `${work}/a3`]);
      for (
        const kid of [keys.agent.publicJwk.kid, keys.op.publicJwk.kid, null] as (string | null)[]
      ) {
        const jwt = await operatorJwt(keys, "mallory", ["sre"], ["hwk"], {}, {
          key: keys.agent,
          kid,
        });
        const r = await approve(d, jwt, approval);
        assert.equal(r.status, 401, `kid ${kid}: ${shown(r)}`);
        assert.match(errMsg(r), /unknown_key|bad_signature|bad_algorithm/);
      }
      assert.equal((await deny(d, TOKEN, approval)).status, 200);
    });

    await t.step(
      "HELD: [A] the MCP socket: the operator token is no agent credential; no dev-mode naming in strict mode, even with the socket key",
      async () => {
        const key = Deno.readTextFileSync(`${mcpSocketOf(d)}.key`).trim();
        const hellos: [string, Obj][] = [
          ["the operator token", { token: TOKEN }],
          ["a name and the socket key", { agent: "mallory", key }],
          ["a configured agent, no token", { agent: "bot" }],
          ["a configured agent and the socket key", { agent: "bot", key }],
          ["the operator's name", { agent: "operator", key }],
        ];
        for (const [what, hello] of hellos) {
          const { conn, init } = await socketSession(d, hello);
          await using _ = conn;
          assert.equal(socketError(init)?.code, -32001, `${what}: ${shown(init)}`);
          const again = await socketTool(conn, "capabilities", {});
          assert.ok(socketError(again), `${what}: a refused connection answered a tool call`);
        }
        // The operator token on /mcp, and dev-mode naming over the HTTP Unix socket.
        assert.equal(await mcpStatus(d, TOKEN), 401);
        const unix = Deno.createHttpClient({ proxy: { transport: "unix", path: d.socketPath } });
        try {
          const r = await fetch("http://termada/mcp", {
            client: unix,
            method: "POST",
            headers: {
              "content-type": "application/json",
              accept: "application/json, text/event-stream",
              "x-termada-agent": "mallory",
              "x-termada-key": key,
            },
            body: JSON.stringify(initialize()),
          } as RequestInit);
          assert.equal(r.status, 401);
          await r.body?.cancel();
        } finally {
          unix.close();
        }
      },
    );

    await t.step(
      "HELD: [A] one agent cannot withdraw another's request nor ride its MCP session",
      async () => {
        const { approval, job } = await request(bot, ["touch", `${work}/a5`]);
        const k = await tool(ci, "exec_kill", { job_id: job });
        assert.equal(k.error?.code, "NOT_FOUND", shown(k));
        assert.ok((await pending(d)).some((x) => x.approval_id === approval));
        const ciInit = await rawMcp(d, await agentJwt(keys), initialize("ci"));
        assert.equal(ciInit.status, 200);
        const ride = await rawMcp(d, tokens.bot, {
          jsonrpc: "2.0",
          id: 2,
          method: "tools/call",
          params: { name: "capabilities", arguments: {} },
        }, ciInit.sid);
        assert.equal(ride.status, 403, ride.text);
        assert.equal((await deny(d, TOKEN, approval)).status, 200);
      },
    );

    // ── [B] JWTs ────────────────────────────────────────────────────────────

    await t.step("HELD: [B] alg none, and HS256 keyed with the public key", async () => {
      const none = [
        handMade({ alg: "none", typ: "JWT" }, agentClaims()),
        handMade({ alg: "None" }, agentClaims()),
        handMade({ alg: "none", kid: keys.agent.publicJwk.kid }, agentClaims(), "AAAA"),
      ];
      for (const jwt of none) assert.equal(await mcpStatus(d, jwt), 401, jwt);
      const opNone = handMade({ alg: "none" }, operatorClaims("mallory", ["sre"], ["otp"]));
      assert.equal((await api(d, opNone, "/status")).status, 401);
      // The classic confusion: the verifier's public key used as an HMAC secret.
      const secrets = (k: MintedKeys) => [
        new TextEncoder().encode(JSON.stringify(k.publicJwk)),
        new TextEncoder().encode(JSON.stringify({ keys: [k.publicJwk] })),
        fromB64u(String(k.publicJwk.x)),
      ];
      for (const alg of ["HS256", "HS384", "HS512"]) {
        for (const secret of secrets(keys.agent)) {
          const jwt = await mint(secret, alg, keys.agent.publicJwk.kid, agentClaims());
          const r = await rawMcp(d, jwt, initialize());
          assert.equal(r.status, 401, `${alg} on /mcp`);
          assert.match(r.text, /bad_algorithm/);
        }
        for (const secret of secrets(keys.op)) {
          const jwt = await mint(
            secret,
            alg,
            keys.op.publicJwk.kid,
            operatorClaims("m", ["sre"], ["otp"]),
          );
          const r = await api(d, jwt, "/status");
          assert.equal(r.status, 401, `${alg} on /api`);
          assert.match(errMsg(r), /bad_algorithm/);
        }
      }
    });

    await t.step("HELD: [B] a kid naming another key, a path, or not a string", async () => {
      const cases: [string, string][] = [
        // Signed by the operator key, kid of the operator key: not a key of the agent trust.
        ["op key, op kid", await agentJwt(keys, {}, { key: keys.op })],
        // Signed by the attacker, kid of the trusted key: that key's signature check fails.
        [
          "stray key, agent kid",
          await agentJwt(keys, {}, { key: keys.stray, kid: keys.agent.publicJwk.kid }),
        ],
        ["stray key, no kid", await agentJwt(keys, {}, { key: keys.stray, kid: null })],
        [
          "kid is a path",
          await agentJwt(keys, {}, { key: keys.stray, kid: `../../../../${jdir}/agent-jwks.json` }),
        ],
        [
          "kid is a URL",
          await agentJwt(keys, {}, { key: keys.stray, kid: "http://127.0.0.1:1/k" }),
        ],
        [
          "kid is an object",
          await agentJwt(keys, {}, { key: keys.stray, header: { kid: { $ne: "" } } }),
        ],
      ];
      for (const [what, jwt] of cases) {
        const r = await rawMcp(d, jwt, initialize());
        assert.equal(r.status, 401, what);
        assert.match(r.text, /unknown_key|bad_signature|malformed|bad_algorithm/, what);
      }
      // The operator trust, with the agent key's kid and signature.
      const op = await operatorJwt(keys, "m", ["sre"], ["otp"], {}, {
        key: keys.stray,
        kid: keys.op.publicJwk.kid,
      });
      assert.equal((await api(d, op, "/status")).status, 401);
    });

    await t.step(
      "HELD: [B] jku, x5u and jwk header members are never fetched nor trusted",
      async () => {
        let hits = 0;
        const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, () => {
          hits++;
          return Response.json({ keys: [keys.stray.publicJwk] });
        });
        try {
          const url = `http://127.0.0.1:${server.addr.port}/jwks.json`;
          const header = {
            jku: url,
            x5u: url,
            jwk: keys.stray.publicJwk,
            x5c: ["MIIB"],
          };
          const agentTokens = [
            await agentJwt(keys, {}, { key: keys.stray, header }),
            await agentJwt(keys, {}, { key: keys.stray, kid: null, header }),
          ];
          for (const jwt of agentTokens) assert.equal(await mcpStatus(d, jwt), 401);
          const op = await operatorJwt(keys, "mallory", ["sre"], ["otp"], {}, {
            key: keys.stray,
            header,
          });
          assert.equal((await api(d, op, "/status")).status, 401);
          assert.equal(hits, 0, "the daemon fetched a key URL from a token header");
        } finally {
          await server.shutdown();
        }
      },
    );

    await t.step(
      "HELD: [B] nbf in the future, an issuer with a trailing slash, a huge token",
      async () => {
        const n = nowS();
        const future = await agentJwt(keys, { nbf: n + 120, iat: n, exp: n + 300 });
        let r = await rawMcp(d, future, initialize());
        assert.equal(r.status, 401);
        assert.match(r.text, /not_yet_valid/);
        const iatFuture = await agentJwt(keys, { iat: n + 120, exp: n + 300 });
        assert.equal(await mcpStatus(d, iatFuture), 401);
        for (const iss of [`${ISS}/`, ISS.toUpperCase(), `${ISS}.evil`, ` ${ISS}`]) {
          r = await rawMcp(d, await agentJwt(keys, { iss }), initialize());
          assert.equal(r.status, 401, iss);
          assert.match(r.text, /bad_issuer/, iss);
          const op = await operatorJwt(keys, "bob", ["sre"], ["otp"], { iss });
          assert.equal((await api(d, op, "/status")).status, 401, iss);
        }
        const huge = await agentJwt(keys, { pad: "x".repeat(9000) });
        r = await rawMcp(d, huge, initialize());
        assert.equal(r.status, 401);
        const hugeOp = await operatorJwt(keys, "bob", ["sre"], ["otp"], { pad: "x".repeat(9000) });
        assert.equal((await api(d, hugeOp, "/status")).status, 401);
        // A megabyte of header: refused (the server may drop the connection), and the daemon lives.
        const giant = "a." + "b".repeat(1024 * 1024) + ".c";
        const g = await fetch(`http://127.0.0.1:${d.port}/api/status`, {
          headers: { authorization: `Bearer ${giant}` },
        }).then(async (x) => (await x.body?.cancel(), x.status)).catch(() => 0);
        assert.ok(g === 0 || g >= 400, `status ${g}`);
        const health = await fetch(`http://127.0.0.1:${d.port}/healthz`);
        assert.equal(health.status, 200);
        await health.body?.cancel();
      },
    );

    await t.step(
      "LIMIT: [B] aud as an array holding the audience and junk is accepted (RFC 7519; documented)",
      async () => {
        // GOVERNANCE.md: `audience` "must appear in the token's aud (a string or an array)". A
        // multi-audience token is the identity provider's decision, and it is trusted.
        const jwt = await agentJwt(keys, { aud: ["junk", AGENT_AUD, "https://evil.example"] });
        assert.equal(await mcpStatus(d, jwt), 200);
        // What keeps such a token from being an operator credential here: the operator trust
        // pins other keys. (With shared keys, only distinct audiences separate them.)
        const both = await agentJwt(keys, {
          aud: [AGENT_AUD, OP_AUD],
          roles: ["sre"],
          amr: ["otp"],
        });
        assert.equal((await api(d, both, "/status")).status, 401);
        // An array without the audience is refused.
        assert.equal(await mcpStatus(d, await agentJwt(keys, { aud: ["junk", OP_AUD] })), 401);
      },
    );

    await t.step(
      "HELD: [B] a valid operator JWT is no agent credential, and a valid agent JWT no operator one",
      async () => {
        const op = await operatorJwt(keys, "bob", ["sre"], ["otp"], { agent_id: "ci" });
        assert.equal((await api(d, op, "/status")).status, 200, "the operator JWT itself works");
        assert.equal(await mcpStatus(d, op), 401);
        const ag = await agentJwt(keys);
        assert.equal(await mcpStatus(d, ag), 200, "the agent JWT itself works");
        assert.equal((await api(d, ag, "/status")).status, 401);
        // Re-signed for the other audience with its own key: still the wrong trust.
        const opAsAgent = await signed(keys.op, agentClaims());
        assert.equal(await mcpStatus(d, opAsAgent), 401);
        const agAsOp = await signed(keys.agent, operatorClaims("ci", ["sre"], ["otp"]));
        assert.equal((await api(d, agAsOp, "/status")).status, 401);
      },
    );

    await t.step(
      "HELD: [B] an expired agent JWT on an MCP HTTP session opened before its exp",
      async () => {
        const n = nowS();
        const exp = n + 3;
        const short = await agentJwt(keys, { iat: n, exp });
        const init = await rawMcp(d, short, initialize("short"));
        assert.equal(init.status, 200, init.text);
        const sid = init.sid!;
        const done = await rawMcp(
          d,
          short,
          { jsonrpc: "2.0", method: "notifications/initialized" },
          sid,
        );
        assert.ok(done.status < 300, done.text);
        let id = 2;
        const capsCall = (bearer: string) =>
          rawMcp(d, bearer, {
            jsonrpc: "2.0",
            id: id++,
            method: "tools/call",
            params: { name: "capabilities", arguments: {} },
          }, sid);
        const before = await capsCall(short);
        assert.equal(before.status, 200, before.text);
        // Deadline, not a sleep: the first refused call after exp.
        const after = await pollUntil(
          async () => {
            const r = await capsCall(short);
            return r.status === 200 ? undefined : r;
          },
          "the session refused after exp",
          15_000,
        );
        assert.ok(Date.now() >= exp * 1000, "refused before exp");
        assert.equal(after.status, 401, after.text);
        assert.match(after.text, /expired/);
        // A fresh token does not revive the old session.
        const fresh = await agentJwt(keys);
        const revived = await capsCall(fresh);
        assert.ok(revived.status === 401 || revived.status === 404, revived.text);
        assert.ok(!revived.text.includes('"agent"'), revived.text);
      },
    );

    await t.step(
      "HELD: [B] an MCP socket connection opened with an agent JWT ends at its exp",
      async () => {
        const n = nowS();
        const exp = n + 3;
        const { conn, init } = await socketSession(d, {
          token: await agentJwt(keys, { iat: n, exp }),
        });
        await using _ = conn;
        assert.ok(init?.result, shown(init));
        assert.equal(structured(await socketTool(conn, "capabilities", {})).agent, "ci");
        assert.equal(await conn.waitClosed(15_000), true, "still open after exp");
        assert.ok(Date.now() >= exp * 1000 - 50, "closed long before exp");
      },
    );

    // ── [C] quorum ──────────────────────────────────────────────────────────

    await t.step("HELD: [C] two operator JWTs of one subject are one vote", async () => {
      const { approval } = await request(bot, ["touch", `${work}/c1`]);
      let r = await approve(d, bob, approval);
      assert.deepEqual([r.status, r.body.status, r.body.votes], [200, "pending", 1], shown(r));
      const bob2 = await operatorJwt(keys, "bob", ["sre", "admin"], ["otp", "hwk"], {
        jti: crypto.randomUUID(),
        tenant: "other",
        act: { sub: "carol" },
      });
      r = await approve(d, bob2, approval);
      assert.equal(r.status, 403, shown(r));
      assert.match(errMsg(r), /already approved/);
      const p = (await pending(d)).find((x) => x.approval_id === approval);
      assert.deepEqual(p?.approvers, ["bob"]);
      await assert.rejects(Deno.stat(`${work}/c1`));
      assert.equal((await deny(d, TOKEN, approval)).status, 200);
    });

    await t.step(
      "HELD: [C] the static token is one voter whatever name the client gives",
      async () => {
        const { approval, job } = await request(bot, ["cp", "/dev/null", `${work}/c2`]);
        const as = (name: string) => ({ "x-termada-operator": name });
        let r = await approve(d, TOKEN, approval, as("alice"));
        assert.deepEqual([r.status, r.body.votes], [200, 1], shown(r));
        for (const name of ["bob", "carol", "Operator", "cli:root", ""]) {
          r = await approve(d, TOKEN, approval, as(name));
          assert.equal(r.status, 403, `${name}: ${shown(r)}`);
          assert.match(errMsg(r), /operator already approved/);
        }
        // An IdP subject named "operator" is that same principal: it cannot add a second vote.
        const named = await operatorJwt(keys, "operator", ["sre"], ["otp"]);
        assert.equal((await approve(d, named, approval)).status, 403);
        await assert.rejects(Deno.stat(`${work}/c2`), "nothing ran on one principal's votes");
        r = await approve(d, carol, approval);
        assert.equal(r.body.status, "approved", shown(r));
        const end = await tool(bot, "exec_wait", { job_id: job, timeout_ms: 10_000 });
        assert.equal(end.sc.status, "exited", shown(end));
        const resolved = (await auditEvents(d, "approval.resolved")).find((x) =>
          x.approval_id === approval
        );
        assert.deepEqual(resolved?.approvers, ["operator", "carol"]);
      },
    );

    await t.step(
      "HELD (was a limit): [C] one agent id, two JWT subjects: neither may approve the agent's requests when the rule excludes the requester",
      async () => {
        // The principal shown is the agent id's latest authentication (zed), but a request
        // cannot be told apart by which of them made it: `exclude_requester` excludes every
        // principal seen behind the agent id (src/daemon/agents.ts `principals`).
        const { conn, init } = await socketSession(d, {
          token: await agentJwt(keys, { sub: "alice" }),
        });
        await using _ = conn;
        assert.ok(init?.result, shown(init));
        assert.equal(await mcpStatus(d, await agentJwt(keys, { sub: "zed" })), 200);
        const started = structured(
          await socketTool(conn, "exec_start", {
            command: ["touch", `${work}/c3`],
            mode: "background",
          }),
        );
        const approval = String(started.approval_id);
        assert.match(approval, /^apr_/, shown(started));
        const p = (await pending(d)).find((x) => x.approval_id === approval);
        assert.equal(p?.requester, "zed");
        for (const who of ["alice", "zed"]) {
          const r = await approve(d, await operatorJwt(keys, who, ["sre"], ["mfa"]), approval);
          assert.equal(r.status, 403, `${who}: ${shown(r)}`);
        }
        assert.equal((await deny(d, TOKEN, approval)).status, 200);
      },
    );

    await t.step(
      "HELD: [C] any authenticated operator's deny ends a request, eligible or not; an unauthenticated one does nothing",
      async () => {
        // Decided: a deny is the fail-safe direction, so it needs an operator's proven
        // identity but no eligibility (GOVERNANCE.md "The flow", step 3).
        const eve = await operatorJwt(keys, "eve", ["dev"], ["pwd"]);
        const a = await request(bot, ["touch", `${work}/c4a`]);
        assert.equal((await approve(d, bob, a.approval)).body.votes, 1);
        assert.equal((await approve(d, eve, a.approval)).status, 403, "eve is not eligible");
        const r = await deny(d, eve, a.approval);
        assert.equal(r.status, 200, shown(r));
        const end = await tool(bot, "exec_poll", { job_id: a.job, wait_ms: 5000 });
        assert.equal(end.sc.status, "denied", shown(end));
        assert.equal(
          (await approve(d, carol, a.approval)).status,
          400,
          "voting on a denied request",
        );
        const b = await request(bot, ["touch", `${work}/c4b`]);
        for (const bearer of [undefined, tokens.bot, await agentJwt(keys), "x.y.z"]) {
          assert.equal((await deny(d, bearer, b.approval)).status, 401);
        }
        assert.ok((await pending(d)).some((x) => x.approval_id === b.approval));
        assert.equal((await deny(d, TOKEN, b.approval)).status, 200);
        await assert.rejects(Deno.stat(`${work}/c4a`));
      },
    );

    await t.step("HELD: [C] approving an id of another kind of thing", async () => {
      const { approval, job } = await request(bot, ["touch", `${work}/c5`]);
      const other = await request(bot, ["cp", "/dev/null", `${work}/c5b`]);
      const sessions = (await tool(bot, "session_list", {})).sc.sessions as
        | { session_id?: string }[]
        | undefined;
      const session = sessions?.[0]?.session_id ?? "sess_none";
      const ids = [
        job,
        other.job,
        session,
        "act_0000000000ab",
        "apr_000000000000",
        approval.toUpperCase(),
        `${approval}x`,
        `${approval}%00`,
        "apr_..%2F..%2Fetc%2Fpasswd",
        "x".repeat(300),
      ];
      for (const id of ids) {
        const r = await approve(d, bob, id);
        assert.ok(r.status === 404 || r.status === 400, `${id}: ${shown(r)}`);
      }
      // An approval id is no action either.
      const rec = await api(d, TOKEN, `/actions/${approval}/reconcile`, {
        body: { state: "succeeded", note: "x" },
      });
      assert.ok(rec.status === 404 || rec.status === 400, shown(rec));
      const p = await pending(d);
      assert.deepEqual(p.find((x) => x.approval_id === approval)?.approvers, []);
      assert.deepEqual(p.find((x) => x.approval_id === other.approval)?.approvers, []);
      // A vote on one approval is not a vote on another.
      assert.equal((await approve(d, bob, other.approval)).body.votes, 1);
      assert.deepEqual((await pending(d)).find((x) => x.approval_id === approval)?.approvers, []);
      for (const a of [approval, other.approval]) {
        assert.equal((await deny(d, TOKEN, a)).status, 200);
      }
    });

    await t.step("HELD: [C] replaying an approve once the request was approved", async () => {
      const { approval, job } = await request(bot, ["cp", "/dev/null", `${work}/c6`]);
      assert.equal((await approve(d, bob, approval)).body.status, "pending");
      assert.equal((await approve(d, carol, approval)).body.status, "approved");
      for (const bearer of [bob, carol, TOKEN, await operatorJwt(keys, "dan", ["sre"], ["otp"])]) {
        const r = await approve(d, bearer, approval);
        assert.equal(r.status, 400, shown(r));
        assert.match(errMsg(r), /already approved/);
      }
      const end = await tool(bot, "exec_wait", { job_id: job, timeout_ms: 10_000 });
      assert.equal(end.sc.status, "exited");
      const resolved = (await auditEvents(d, "approval.resolved")).filter((x) =>
        x.approval_id === approval
      );
      assert.equal(resolved.length, 1);
      const votes = (await auditEvents(d, "approval.vote")).filter((x) =>
        x.approval_id === approval
      );
      assert.deepEqual(votes.map((v) => v.principal), ["bob", "carol"]);
    });

    // ── [E] the files a reload reads ────────────────────────────────────────

    await t.step(
      "HELD: [E] from inside its session an agent can neither rewrite nor replace the config or a pinned JWKS file in place",
      async () => {
        const files = [
          `${home}/config.yaml`,
          `${jdir}/agent-jwks.json`,
          `${jdir}/operator-jwks.json`,
        ];
        const before = await Promise.all(files.map(fileHash));
        const evil = JSON.stringify({ keys: [keys.stray.publicJwk] });
        for (const f of files) {
          for (
            const line of [
              `cat ${f}`,
              `printf '%s' ${q(evil)} > ${f}`,
              `printf '%s' ${q(evil)} >> ${f}`,
              `rm ${f}`,
              `mv ${f} ${f}.old`,
              `ln -f ${f} ${f}.hard`,
              `truncate -s 0 ${f}`,
            ]
          ) {
            const r = await sh(bot, `${line}; echo "rc=$?"`);
            assert.doesNotMatch(r.out, /rc=0/, `${line}: ${r.out}`);
          }
        }
        assert.deepEqual(await Promise.all(files.map(fileHash)), before);
        // The daemon's own file tools (it writes as itself, outside any sandbox) refuse them.
        const link = `${work}/jwks-link`;
        assert.equal((await sh(bot, `ln -sf ${jdir}/operator-jwks.json ${link}`)).code, 0);
        const spellings = [
          ...files,
          `${jdir}/./operator-jwks.json`,
          `${jdir}//operator-jwks.json`,
          `${work}/../${jdir.split("/").pop()}/operator-jwks.json`,
          `${home}/token`,
          link,
        ];
        // The tools themselves work for this agent: an ordinary file is written.
        const plain = await tool(bot, "file_write", { path: `${work}/plain.json`, content: evil });
        assert.equal(plain.error, undefined, shown(plain));
        for (const path of spellings) {
          const read = await tool(bot, "file_read", { path });
          assert.equal(read.error?.code, "DENIED_BY_POLICY", `file_read ${path}: ${shown(read)}`);
          assert.match(read.error.message, /control plane/);
          const write = await tool(bot, "file_write", { path, content: evil });
          if (path === link) {
            // The write replaces the link itself (temp file + rename), never its target.
            if (write.error === undefined) assert.ok((await Deno.lstat(link)).isFile);
          } else {
            assert.equal(
              write.error?.code,
              "DENIED_BY_POLICY",
              `file_write ${path}: ${shown(write)}`,
            );
          }
        }
        assert.deepEqual(await Promise.all(files.map(fileHash)), before, "file_write changed one");
        // A reload now still trusts only the pinned keys.
        assert.equal((await termada(home, ["policy", "reload"])).code, 0);
        assert.equal(await mcpStatus(d, await agentJwt(keys)), 200);
        assert.equal(await mcpStatus(d, await agentJwt(keys, {}, { key: keys.stray })), 401);
        const strayOp = await operatorJwt(keys, "m", ["sre"], ["otp"], {}, {
          key: keys.stray,
          kid: null,
        });
        assert.equal((await api(d, strayOp, "/status")).status, 401);
      },
    );

    // ── [G] anchors ─────────────────────────────────────────────────────────

    const anchorKey = `${home}/anchor_key.pkcs8`;
    if (boundary.hiding.active) {
      await t.step(
        `HELD: [G] the anchor signing key cannot be read, replaced or reached from a session (hiding: ${boundary.hiding.how})`,
        async () => {
          const before = await fileHash(anchorKey);
          const listing = await sh(bot, `ls -a ${home}`);
          assert.doesNotMatch(listing.out, /^anchor_key\.pkcs8$/m, listing.out);
          const attempts = [
            `cat ${anchorKey}`,
            `printf 'x' > ${anchorKey}`,
            `tee ${anchorKey} < /dev/null`,
            `mv ${home} ${home}.moved`,
            `umount -l ${home}`,
            `cat /proc/${d.proc.pid}/root${anchorKey}`,
            `cat /proc/${d.proc.pid}/cwd/../../../../../..${anchorKey}`,
          ];
          for (const line of attempts) {
            const r = await sh(bot, `${line} && echo "OK-REACHED"`);
            assert.doesNotMatch(r.out, /OK-REACHED/, `${line}: ${r.out}`);
          }
          assert.equal(await fileHash(anchorKey), before);
          const read = await tool(bot, "file_read", { path: anchorKey });
          assert.equal(read.isError, true);
          const a = await termada(home, ["audit", "anchor", "--json"]);
          assert.equal(a.code, 0, a.stderr);
        },
      );
    } else {
      await t.step(
        "LIMIT: [G] without hiding (no Landlock, no mounts) the anchor key is readable from a session",
        async () => {
          // SECURITY.md table: without Landlock or a mount namespace the state dir is not
          // hidden; this machine lacks both, so what a session sees is recorded here.
          const r = await sh(bot, `test -r ${anchorKey} && echo READABLE`);
          assert.match(r.out, /READABLE/);
        },
      );
    }

    // ── [F] budgets ─────────────────────────────────────────────────────────

    await t.step(
      "HELD: [F] 30 concurrent exec_run from two MCP sessions of one agent against a limit of 10: exactly 10 run",
      async () => {
        await using s1 = await agentClient(d, tokens.bud!);
        await using s2 = await agentClient(d, tokens.bud!);
        const calls = Array.from({ length: 30 }, (_, i) =>
          tool(i % 2 ? s1 : s2, "exec_run", {
            command: ["true"],
            mode: "background",
            timeout_ms: 20_000,
          }));
        const results = await Promise.all(calls);
        const ok = results.filter((r) => !r.isError && r.sc.exit_code === 0);
        const refused = results.filter((r) => r.isError);
        assert.equal(ok.length, 10, shown(results.map((r) => r.error?.code ?? r.sc.status)));
        assert.equal(refused.length, 20);
        // Beyond the budget; a few may meet the background-jobs quota (16) first.
        for (const r of refused) {
          assert.ok(["BUDGET_EXCEEDED", "QUOTA_EXCEEDED"].includes(r.error?.code ?? ""), shown(r));
        }
        assert.ok(refused.some((r) => r.error?.code === "BUDGET_EXCEEDED"));
        const line = await pollUntil(async () => {
          const l = await budgetLine(d, "budgeted/ops", "principal:agent:bud");
          return l.reserved === 0 ? l : undefined;
        }, "the budget settled");
        assert.equal(line.used, 10, shown(line));
        const after = await tool(s1, "exec_run", { command: ["true"], mode: "background" });
        assert.equal(after.error?.code, "BUDGET_EXCEEDED");
      },
    );

    await t.step(
      "HELD: [F] a budget on failures refuses once the failures are used up",
      async () => {
        await using f1 = await agentClient(d, tokens.f1!);
        for (let i = 0; i < 2; i++) {
          const r = await tool(f1, "exec_run", { command: ["false"], mode: "background" });
          assert.equal(r.sc.exit_code, 1, shown(r));
        }
        await pollUntil(async () => {
          const l = await budgetLine(d, "failing/fails", "principal:agent:f1");
          return l.used >= 2 ? l : undefined;
        }, "two failures counted");
        for (const command of [["true"], ["false"], ["echo", "innocent"]]) {
          const r = await tool(f1, "exec_run", { command, mode: "background" });
          assert.equal(r.error?.code, "BUDGET_EXCEEDED", shown(r));
        }
      },
    );

    await t.step(
      "LIMIT: [F] failing jobs started together all run: a failures budget is overrun by what was already admitted",
      async () => {
        // Documented (GOVERNANCE.md "What each metric counts"): failures reserve nothing at
        // admission ("refused once used ≥ limit. Actions already running still end normally,
        // and each failure among them counts") — a failure is only known at the end.
        await using f2 = await agentClient(d, tokens.f2!);
        const results = await Promise.all(
          Array.from(
            { length: 6 },
            () =>
              tool(f2, "exec_run", { command: ["false"], mode: "background", timeout_ms: 20_000 }),
          ),
        );
        assert.deepEqual(results.map((r) => r.sc.exit_code), [1, 1, 1, 1, 1, 1], shown(results));
        const line = await pollUntil(async () => {
          const l = await budgetLine(d, "failing/fails", "principal:agent:f2");
          return l.used >= 6 ? l : undefined;
        }, "six failures counted");
        assert.equal(line.limit, 2);
        assert.equal(line.used, 6);
        const next = await tool(f2, "exec_run", { command: ["true"], mode: "background" });
        assert.equal(next.error?.code, "BUDGET_EXCEEDED");
      },
    );

    await t.step(
      "HELD: [F] a line typed into a shell is an input action: counted (secret too); a denied line is not",
      async () => {
        await using typ = await agentClient(d, tokens.typ!);
        const sh0 = await tool(typ, "exec_run", {
          command: ["bash", "--norc", "--noprofile"],
          timeout_ms: 10_000,
        });
        assert.equal(sh0.sc.status, "awaiting_input", shown(sh0));
        const job = String(sh0.sc.job_id);
        try {
          const denied = await typeLine(typ, job, "echo forbidden-line");
          assert.equal(denied.error?.code, "DENIED_BY_POLICY", shown(denied));
          assert.equal((await typeLine(typ, job, "echo one")).error, undefined);
          assert.equal((await typeLine(typ, job, "echo two", { secret: true })).error, undefined);
          const third = await typeLine(typ, job, "echo three");
          assert.equal(third.error?.code, "BUDGET_EXCEEDED", shown(third));
          const line = await budgetLine(d, "typing/typed", "principal:agent:typ");
          assert.equal(line.used + line.reserved, 2, shown(line));
        } finally {
          await tool(typ, "exec_kill", { job_id: job, grace_ms: 200 });
        }
      },
    );
  } finally {
    await removeAll(home, jdir, work);
  }
});

Deno.test("governance attacks on the config: strict mode refuses weak identities and untrustworthy key files at load", async (t) => {
  const keys = await freshKeys();
  const jdir = await Deno.makeTempDir({ prefix: "termada-jwks-" });
  const homes: string[] = [];
  /** The daemon's words when it refuses to start with `config` (it must exit by itself). */
  const refusedStart = async (config: string): Promise<string> => {
    const home = await homeWith(config);
    homes.push(home);
    const r = await runWithDeadline(
      Deno.execPath(),
      [...DENO_ARGS, "serve", "--bind", "127.0.0.1:0"],
      { ms: 30_000, env: termadaEnv(home) },
    );
    assert.equal(r.timedOut, false, `the daemon started:\n${r.stderr}`);
    assert.notEqual(r.code, 0, r.stderr);
    return r.stderr;
  };
  const strictWith = (agents: string, extra = "") => `
security:
  identity_mode: strict
${extra}
agents:
${agents}
default_policy: team
policies:
  team:
    rules:
      - { effect: allow, action: exec, resource: ["true"] }
`;
  try {
    await t.step("HELD: [D] strict mode: an agent without a policy of its own", async () => {
      const msg = await refusedStart(
        strictWith(`  lonely: { token: "${strongToken("lonely")}" }`),
      );
      assert.match(msg, /lonely/);
      assert.match(msg, /polic/i);
    });

    await t.step(
      "HELD: [D] strict mode: a token shorter than 32 characters, never echoed",
      async () => {
        const short = "Ab1-short-but-24-plus-chars"; // 27: fine in development mode
        assert.ok(short.length >= 24 && short.length < 32);
        const msg = await refusedStart(strictWith(`  weak: { token: "${short}", policy: team }`));
        assert.match(msg, /weak/);
        assert.match(msg, /at least 32 characters/);
        assert.ok(!msg.includes(short), "the load error quotes the token");
        // The same length passes in development mode (documented: 24–512).
        const home = await homeWith(`agents:\n  weak: { token: "${short}" }\n`);
        homes.push(home);
        await using d = await startDaemon(home);
        assert.equal(await mcpStatus(d, short), 200);
      },
    );

    await t.step(
      "HELD: [B] agent and operator trusts with one issuer and audience (every agent JWT an operator credential)",
      async () => {
        await pinned(`${jdir}/shared.json`, [keys.agent]);
        const same = `issuer: ${ISS}, audience: termada, jwks_file: ${jdir}/shared.json`;
        const msg = await refusedStart(strictWith(
          `  ci: { jwt: true, policy: team }`,
          `  agent_jwt: { ${same} }\n  operator_jwt: { ${same} }`,
        ));
        assert.match(msg, /operator_jwt/);
        assert.match(msg, /must differ/);
      },
    );

    await t.step(
      "HELD: [E] a JWKS file writable by group or others, in a directory others can write, or a symlink",
      async () => {
        const trust = (file: string) =>
          `  agent_jwt: { issuer: ${ISS}, audience: ${AGENT_AUD}, jwks_file: ${file} }`;
        const agents = `  ci: { jwt: true, policy: team }`;
        await pinned(`${jdir}/open.json`, [keys.agent]);
        await Deno.chmod(`${jdir}/open.json`, 0o666);
        assert.match(
          await refusedStart(strictWith(agents, trust(`${jdir}/open.json`))),
          /group or others can write/,
        );
        await Deno.chmod(`${jdir}/open.json`, 0o620);
        assert.match(
          await refusedStart(strictWith(agents, trust(`${jdir}/open.json`))),
          /group or others can write/,
        );
        const shared = await Deno.makeTempDir({ prefix: "termada-jwks-shared-" });
        try {
          await pinned(`${shared}/k.json`, [keys.agent]);
          await Deno.chmod(shared, 0o777);
          assert.match(
            await refusedStart(strictWith(agents, trust(`${shared}/k.json`))),
            /directory/,
          );
          await Deno.chmod(shared, 0o1777); // sticky like /tmp: still writable by others
          assert.match(
            await refusedStart(strictWith(agents, trust(`${shared}/k.json`))),
            /directory/,
          );
        } finally {
          await removeAll(shared);
        }
        await pinned(`${jdir}/real.json`, [keys.agent]);
        await Deno.symlink(`${jdir}/real.json`, `${jdir}/link.json`);
        assert.match(
          await refusedStart(strictWith(agents, trust(`${jdir}/link.json`))),
          /regular file/,
        );
      },
    );
  } finally {
    await removeAll(jdir, ...homes);
  }
});

Deno.test("governance attacks in development mode: socket identity, an expired approval, a reload under open connections", async (t) => {
  const tok = strongToken("tok");
  const gone = strongToken("gone");
  const config = (withGone: boolean) => `
approvals:
  confirm_timeout_ms: 800
agents:
  tok: { token: "${tok}", policy: open }
${withGone ? `  gone: { token: "${gone}", policy: open }` : ""}
default_policy: open
policies:
  open:
    confirm: ["touch *"]
`;
  const home = await homeWith(config(true));
  const work = await Deno.makeTempDir({ prefix: "termada-attack-" });
  try {
    await using d = await startDaemon(home);
    const TOKEN = opToken(d);
    const keyFile = `${mcpSocketOf(d)}.key`;
    const key = Deno.readTextFileSync(keyFile).trim();
    await using agent = await agentClient(d, tok);

    await t.step(
      "HELD: [D] self-naming on the MCP socket without the socket key (or with a wrong one); the key is hidden from sessions",
      async () => {
        for (const hello of [{ agent: "mallory" }, { agent: "mallory", key: "0".repeat(64) }, {}]) {
          const { conn, init } = await socketSession(d, hello, "mallory");
          await using _ = conn;
          assert.equal(socketError(init)?.code, -32001, shown(init));
          assert.match(String(socketError(init)?.message), /socket key/);
        }
        // With the key (what the shim reads) it works: the key is the whole defence.
        const { conn, init } = await socketSession(d, { agent: "mallory", key });
        await using _ = conn;
        assert.ok(init?.result, shown(init));
        assert.equal(structured(await socketTool(conn, "capabilities", {})).agent, "mallory");
        // Over the HTTP Unix socket, naming without the key is refused too.
        const unix = Deno.createHttpClient({ proxy: { transport: "unix", path: d.socketPath } });
        try {
          const r = await fetch("http://termada/mcp", {
            client: unix,
            method: "POST",
            headers: {
              "content-type": "application/json",
              accept: "application/json, text/event-stream",
              "x-termada-agent": "mallory",
            },
            body: JSON.stringify(initialize()),
          } as RequestInit);
          assert.equal(r.status, 401);
          await r.body?.cancel();
        } finally {
          unix.close();
        }
        // From inside a session, the key cannot be read.
        const caps = (await tool(agent, "capabilities", {})).sc;
        const hiding = (caps.boundary as { hiding: { active: boolean } }).hiding.active;
        const r = await sh(agent, `cat ${keyFile}; echo "rc=$?"`);
        if (hiding) {
          assert.doesNotMatch(r.out, new RegExp(key));
          assert.match(r.out, /rc=[1-9]/);
        }
      },
    );

    await t.step(
      "HELD: [D] a configured agent claimed over the socket without its token",
      async () => {
        for (
          const hello of [{ agent: "tok" }, { agent: "tok", key }, { agent: "TOK", key }, {
            agent: " tok ",
            key,
          }]
        ) {
          const { conn, init } = await socketSession(d, hello);
          await using _ = conn;
          assert.equal(socketError(init)?.code, -32001, `${shown(hello)}: ${shown(init)}`);
        }
        // The client's name in initialize is no way around it either.
        const { conn, init } = await socketSession(d, { key }, "tok");
        await using _ = conn;
        assert.equal(socketError(init)?.code, -32001, shown(init));
        assert.match(String(socketError(init)?.message), /has a token/);
      },
    );

    await t.step("HELD: [C] an approval after the request expired", async () => {
      const { approval, job } = await request(agent, ["touch", `${work}/expired`]);
      await pollUntil(
        async () => (await pending(d)).some((x) => x.approval_id === approval) ? undefined : true,
        "the request expired",
      );
      const r = await approve(d, TOKEN, approval);
      assert.equal(r.status, 400, shown(r));
      assert.match(errMsg(r), /already expired/);
      const end = await tool(agent, "exec_poll", { job_id: job, wait_ms: 5000 });
      assert.equal(end.sc.status, "denied", shown(end));
      await assert.rejects(Deno.stat(`${work}/expired`));
    });

    await t.step(
      "LIMIT: [D] a token removed by a reload keeps working on an MCP socket connection already open",
      async () => {
        // Documented (SECURITY.md "What it does not cover"): the MCP socket checks a credential
        // once per connection. HTTP re-checks every request, and new connections are refused.
        const { conn, init } = await socketSession(d, { token: gone });
        await using _ = conn;
        assert.ok(init?.result, shown(init));
        await using http = await agentClient(d, gone);
        assert.equal((await tool(http, "capabilities", {})).sc.agent, "gone");
        await writeConfig(`${home}/config.yaml`, config(false));
        const reload = await termada(home, ["policy", "reload"]);
        assert.equal(reload.code, 0, reload.stderr);
        // LIMIT: the open socket connection still acts as "gone".
        const still = structured(await socketTool(conn, "capabilities", {}));
        assert.equal(still.agent, "gone");
        // HELD: everything else refuses the removed token.
        const again = await socketSession(d, { token: gone });
        await using __ = again.conn;
        assert.equal(socketError(again.init)?.code, -32001);
        const viaHttp = await tool(http, "capabilities", {});
        assert.equal(viaHttp.isError, true, shown(viaHttp));
        assert.equal(await mcpStatus(d, gone), 401);
      },
    );
  } finally {
    await removeAll(home, work);
  }
});

// ── FINDINGS: attacks that work today (ignored; each asserts the secure behaviour) ──────────

// FINDING 1 and 2 have one root cause. As root (no run_as), sessions hide the control plane with a
// private mount namespace (src/sandbox/mounts.ts hideWithMounts): each hidden path itself is
// covered (a file by a read-only bind of /dev/null, a directory by a tmpfs), while "nothing around
// the hidden paths is frozen". A session runs as the daemon's own user, so it may rename any
// ancestor directory that is not itself a mount point — the mount moves along with it — and create
// a new directory and file at the hidden path. The daemon reads its trust by path (the JWKS at
// `policy reload` and at start, src/daemon/governance.ts; the config at reload, loadConfig), so it
// reads what the agent planted. checkTrustFile passes: the planted file is this user's, 0600, in
// a 0700 directory of this user — the session's user. (Landlock-only hiding, for an unprivileged
// daemon, freezes the ancestor chain instead and is not affected; run_as sessions cannot rename
// the daemon user's directories.)
Deno.test({
  name:
    "HELD (was a finding): a session cannot rename the directory of the pinned operator JWKS to plant its own key for the next reload",
  fn: async () => {
    const keys = await freshKeys();
    const evil = await mintKeys("EdDSA"); // made by the agent; its private half never leaves it
    const jdir = await Deno.makeTempDir({ prefix: "termada-jwks-" });
    const work = await Deno.makeTempDir({ prefix: "termada-attack-" });
    const botToken = strongToken("bot");
    await pinned(`${jdir}/operator-jwks.json`, [keys.op]);
    const home = await homeWith(`
security:
  identity_mode: strict
  operator_jwt: { issuer: ${ISS}, audience: ${OP_AUD}, jwks_file: ${jdir}/operator-jwks.json }
agents:
  bot: { token: "${botToken}", policy: team, principal: dave }
default_policy: team
policies:
  team:
    rules:
      - { effect: allow, action: exec, resource: ["*"] }
      - effect: confirm
        action: exec
        resource: "touch *"
        approval: { quorum: 1, roles: [sre], mfa: true, exclude_requester: true }
`);
    try {
      await using d = await startDaemon(home);
      await using bot = await agentClient(d, botToken);
      // Inside its session: the file itself is hidden (a bind of /dev/null), its directory is
      // not — so the agent moves the directory away and puts its own key at the same path.
      const jwks = JSON.stringify({ keys: [evil.publicJwk] });
      const swap = await sh(
        bot,
        `mv ${jdir} ${jdir}.old && mkdir -m 700 ${jdir} && echo ${
          b64(jwks)
        } | base64 -d > ${jdir}/operator-jwks.json && chmod 600 ${jdir}/operator-jwks.json; echo "rc=$?"`,
      );
      const { approval } = await request(bot, ["touch", `${work}/pwned`]);
      // Later, an operator reloads the policy for an unrelated reason (or restarts the daemon).
      await termada(home, ["policy", "reload"]);
      const jwt = await signed(evil, operatorClaims("mallory", ["sre"], ["hwk"]));
      const r = await approve(d, jwt, approval);
      await deny(d, opToken(d), approval).catch(() => {});
      assert.equal(
        r.status,
        401,
        `the agent's own operator JWT was accepted (${swap.out}): ${shown(r)}`,
      );
      await assert.rejects(Deno.stat(`${work}/pwned`));
    } finally {
      await removeAll(home, jdir, `${jdir}.old`, work);
    }
  },
});

Deno.test({
  name:
    "HELD (was a finding): a session cannot rename the directory above termada/config.yaml to plant its own policy for the next reload",
  fn: async () => {
    const base = await Deno.makeTempDir({ prefix: "termada-xdg-" });
    const conf = `${base}/config`; // stands for ~/.config
    const state = `${base}/state`; // stands for ~/.local/state
    const botToken = strongToken("bot");
    const cfg = (touch: "confirm" | "allow") => `
security:
  identity_mode: strict
agents:
  bot: { token: "${botToken}", policy: team }
default_policy: team
policies:
  team:
    rules:
      - { effect: allow, action: exec, resource: ["*"] }
${touch === "confirm" ? `      - { effect: confirm, action: exec, resource: "touch *" }` : ""}
`;
    await Deno.mkdir(`${conf}/termada`, { recursive: true, mode: 0o700 });
    await writeConfig(`${conf}/termada/config.yaml`, cfg("confirm"));
    const env = { TERMADA_HOME: "", XDG_CONFIG_HOME: conf, XDG_STATE_HOME: state };
    try {
      await using d = await startDaemon(`${state}/termada`, { env });
      await using bot = await agentClient(d, botToken);
      const swap = await sh(
        bot,
        `mv ${conf} ${conf}.old && mkdir -p -m 700 ${conf}/termada && echo ${
          b64(cfg("allow"))
        } | base64 -d > ${conf}/termada/config.yaml && chmod 600 ${conf}/termada/config.yaml; echo "rc=$?"`,
      );
      await termada(`${state}/termada`, ["policy", "reload"], env);
      const r = await tool(bot, "exec_run", {
        command: ["touch", `${base}/pwned`],
        timeout_ms: 10_000,
      });
      assert.equal(
        r.sc.status,
        "pending_approval",
        `touch ran unapproved (${swap.out}): ${shown(r)}`,
      );
      await assert.rejects(Deno.stat(`${base}/pwned`));
    } finally {
      await removeAll(base);
    }
  },
});

// FINDING 3: whether a typed line is a command (decided as `input`, counted by input budgets) is
// keyed on the reading process's comm matched against a list of names (src/control/agent.ts
// COMMAND_READERS, the reader from src/engine/input.ts). A copy of bash under another name — or a
// shell the list does not name (ash, mksh, yash, pwsh, tclsh, nodejs…) — gets every line with no
// input decision and no budget, although CONTROL.md says "Every line typed … is an input action
// for budgets". (Its programs still meet the exec gate's deny and confirm rules at execve.)
Deno.test({
  name:
    "HELD (was a finding): lines typed into a renamed copy of bash are decided as input and counted by an input budget",
  fn: async () => {
    const work = await Deno.makeTempDir({ prefix: "termada-attack-" });
    const typToken = strongToken("typ");
    const home = await homeWith(`
security:
  identity_mode: strict
agents:
  typ: { token: "${typToken}", policy: typing }
default_policy: typing
policies:
  typing:
    rules:
      - { effect: allow, action: [exec, input], resource: ["*"] }
      - { effect: deny, action: input, resource: "echo forbidden*", reason: not this line }
    budgets:
      - { name: typed, scope: principal, metric: operations, limit: 2, kinds: [input] }
`);
    try {
      await using d = await startDaemon(home);
      await using typ = await agentClient(d, typToken);
      assert.equal((await sh(typ, `cp /bin/bash ${work}/notashell`)).code, 0);
      const start = await tool(typ, "exec_run", {
        command: [`${work}/notashell`, "--norc", "--noprofile"],
        timeout_ms: 10_000,
      });
      assert.equal(start.sc.status, "awaiting_input", shown(start));
      const job = String(start.sc.job_id);
      try {
        const denied = await typeLine(typ, job, "echo forbidden-line");
        await typeLine(typ, job, "echo one");
        await typeLine(typ, job, "echo two");
        const third = await typeLine(typ, job, "echo three");
        // As typed into /bin/bash itself (the [F] step of the first test): the deny rule refuses
        // the first line, and the budget of 2 the third.
        assert.deepEqual(
          [denied.error?.code, third.error?.code],
          ["DENIED_BY_POLICY", "BUDGET_EXCEEDED"],
          `typed into a renamed bash: ${shown([denied, third])}`,
        );
      } finally {
        await tool(typ, "exec_kill", { job_id: job, grace_ms: 200 });
      }
    } finally {
      await removeAll(home, work);
    }
  },
});
