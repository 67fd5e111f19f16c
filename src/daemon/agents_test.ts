import assert from "node:assert/strict";
import type { JWTPayload } from "jose";
import { type Config, loadYaml, parseConfig } from "../config/mod.ts";
import { type JwtTrust, JwtVerifier } from "../governance/mod.ts";
import { mint, mintKeys, writeJwks } from "../governance/_jwt_testing.ts";
import { agentDirectory, MAX_PRINCIPALS_PER_AGENT, MAX_REMEMBERED_IDENTITIES } from "./agents.ts";

// parseConfig is synchronous; its YAML parser is loaded once, lazily.
await loadYaml();

const ISS = "https://idp.example";
const AUD = "termada";
const SOCKET_KEY = "socket-key-0123456789abcdef";
/** Strong enough for strict identity mode. */
const TOKEN_CI = "tok_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6";
const TOKEN_BOT = "tok_Q1r2S3t4U5v6W7x8Y9z0A1b2C3d4E5f6";
const TOKEN_ONLY = "tok_Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4";

const keys = await mintKeys("EdDSA");
const otherKeys = await mintKeys("EdDSA");

function trust(extra: Partial<JwtTrust> = {}): JwtTrust {
  return {
    issuer: ISS,
    audience: AUD,
    keys: [keys.publicJwk],
    maxTtlSeconds: 3600,
    clockSkewSeconds: 0,
    ...extra,
  };
}

const verifier = await JwtVerifier.create(trust());

function config(
  opts: { strict?: boolean; ciPrincipal?: string; botToken?: string; devMode?: boolean } = {},
): Config {
  const policy = opts.strict ? ", policy: p" : "";
  return parseConfig(
    `
auth: {dev_mode: ${opts.devMode ?? true}}
security:
  identity_mode: ${opts.strict ? "strict" : "development"}
  agent_jwt: {issuer: "${ISS}", audience: ${AUD}, keys: [${JSON.stringify(keys.publicJwk)}]}
agents:
  ci: {token: "${TOKEN_CI}", principal: ${opts.ciPrincipal ?? "team-ci"}, tenant: acme${policy}}
  bot: {token: "${opts.botToken ?? TOKEN_BOT}"${policy}}
  jwtbot: {jwt: true, tenant: acme${policy}}
  tokenonly: {token: "${TOKEN_ONLY}"${policy}}
policies: {default: {}, p: {}}
`,
    { path: "/x.yaml", env: {} },
  );
}

/** A fresh agent JWT (valid for 10 minutes) signed by the trusted key unless told otherwise. */
async function agentJwt(claims: JWTPayload, signer = keys): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return await mint(signer.privateKey, "EdDSA", signer.publicJwk.kid, {
    iss: ISS,
    aud: AUD,
    sub: "alice@example.com",
    iat: now - 10,
    exp: now + 600,
    ...claims,
  });
}

type Refusal = { transport: string; reason: string; agent?: string };

function directory(c = config(), withJwt = true) {
  const refusals: Refusal[] = [];
  const dir = agentDirectory(c, SOCKET_KEY, {
    ...(withJwt ? { jwt: verifier } : {}),
    refused: (r) => refusals.push(r),
  });
  return { dir, refusals };
}

Deno.test("a static token proves its agent, with the configured principal and tenant", async () => {
  const { dir, refusals } = directory();
  assert.deepEqual(await dir.authenticate(TOKEN_CI, "http"), {
    agent: "ci",
    principal: "team-ci",
    tenant: "acme",
    via: "token",
  });
  assert.deepEqual(await dir.authenticate(TOKEN_BOT, "socket"), {
    agent: "bot",
    principal: "agent:bot",
    via: "token",
  });
  assert.equal(dir.principalOf("ci").principal, "team-ci");
  assert.equal(dir.principalOf("ci").tenant, "acme");
  assert.equal(dir.principalOf("ci").via, "token");
  assert.deepEqual(refusals, []);
});

Deno.test("an unknown token is refused and the refusal never carries it", async () => {
  const { dir, refusals } = directory();
  const wrong = ["tok_not_a_configured_token_0123456789", TOKEN_CI + "x", TOKEN_CI.slice(0, -1)];
  for (const token of wrong) {
    assert.deepEqual(await dir.authenticate(token, "http"), { error: "Unknown agent token" });
  }
  assert.deepEqual(
    refusals,
    wrong.map(() => ({ transport: "http", reason: "Unknown agent token" })),
  );
  const recorded = JSON.stringify(refusals);
  for (const token of wrong) assert.ok(!recorded.includes(token));
  dir.noCredential("socket");
  assert.deepEqual(refusals.at(-1), { transport: "socket", reason: "No agent credential" });
});

Deno.test("an agent JWT for an agent with jwt: true proves its subject", async (t) => {
  await t.step("principal = sub, the configured tenant, the token's expiry", async () => {
    const { dir, refusals } = directory();
    const exp = Math.floor(Date.now() / 1000) + 300;
    const token = await agentJwt({ agent_id: "jwtbot", exp });
    assert.deepEqual(await dir.authenticate(token, "http"), {
      agent: "jwtbot",
      principal: "alice@example.com",
      tenant: "acme",
      via: "jwt",
      expiresAt: exp * 1000,
    });
    assert.deepEqual(refusals, []);
  });
  await t.step("a tenant claim wins over the configured one", async () => {
    const { dir } = directory();
    const who = await dir.authenticate(
      await agentJwt({ agent_id: "jwtbot", tenant: "globex" }),
      "http",
    );
    assert.ok(!("error" in who));
    assert.equal(who.tenant, "globex");
  });
});

Deno.test("an agent JWT is refused unless its agent accepts JWTs", async (t) => {
  const cases: [string, () => Promise<string>, string, string | undefined][] = [
    [
      "an agent without jwt: true",
      () => agentJwt({ agent_id: "tokenonly" }),
      `Agent JWT for "tokenonly", which does not accept JWTs`,
      "tokenonly",
    ],
    [
      "an agent that is not configured",
      () => agentJwt({ agent_id: "ghost" }),
      `Agent JWT for "ghost", which does not accept JWTs`,
      "ghost",
    ],
    ["no agent claim", () => agentJwt({}), "Agent JWT names no agent", undefined],
    [
      "expired",
      () => agentJwt({ agent_id: "jwtbot", iat: 1_000_000, exp: 1_000_600 }),
      "Agent JWT refused (expired)",
      undefined,
    ],
    [
      "signed by a key the trust does not pin",
      () => agentJwt({ agent_id: "jwtbot" }, otherKeys),
      "Agent JWT refused (unknown_key)",
      undefined,
    ],
  ];
  for (const [name, make, reason, agent] of cases) {
    await t.step(name, async () => {
      const { dir, refusals } = directory();
      const token = await make();
      assert.deepEqual(await dir.authenticate(token, "http"), { error: reason });
      assert.deepEqual(refusals, [{ transport: "http", reason, ...(agent ? { agent } : {}) }]);
      assert.ok(!JSON.stringify(refusals).includes(token));
      if (agent !== undefined) assert.equal(dir.principalOf(agent).principal, `agent:${agent}`);
    });
  }
  await t.step("no JWT trust configured", async () => {
    const { dir, refusals } = directory(config(), false);
    const reason = "Agent JWTs are not configured (security.agent_jwt)";
    assert.deepEqual(await dir.authenticate(await agentJwt({ agent_id: "jwtbot" }), "http"), {
      error: reason,
    });
    assert.deepEqual(refusals, [{ transport: "http", reason }]);
  });
});

Deno.test("a JWT signed by a key from a pinned JWKS file is accepted", async () => {
  const dir = await Deno.makeTempDir({ prefix: "termada-agents-" });
  try {
    await writeJwks(`${dir}/jwks.json`, [otherKeys.publicJwk]);
    const fromFile = await JwtVerifier.create(
      trust({ keys: undefined, jwksFile: `${dir}/jwks.json` }),
    );
    const agents = agentDirectory(config(), SOCKET_KEY, { jwt: fromFile });
    const who = await agents.authenticate(
      await agentJwt({ agent_id: "jwtbot", sub: "bob" }, otherKeys),
      "http",
    );
    assert.ok(!("error" in who), JSON.stringify(who));
    assert.equal(who.principal, "bob");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("strict identity mode turns development mode off", async () => {
  const strict = directory(config({ strict: true })).dir;
  assert.equal(strict.strict, true);
  assert.equal(strict.devMode, false);
  // Configured agents with their own policy still sign in.
  const who = await strict.authenticate(TOKEN_CI, "http");
  assert.ok(!("error" in who));
  assert.equal(who.agent, "ci");
  const jwt = await strict.authenticate(await agentJwt({ agent_id: "jwtbot" }), "http");
  assert.ok(!("error" in jwt));

  // A config assembled without the schema's checks: an agent whose policy is missing is refused.
  const base = config({ strict: true });
  const { dir: noPolicy, refusals } = directory({
    ...base,
    agents: { ...base.agents, ci: { ...base.agents.ci!, policy: "missing" } },
  });
  const reason = `Agent "ci" has no policy of its own (strict identity mode)`;
  assert.deepEqual(await noPolicy.authenticate(TOKEN_CI, "http"), { error: reason });
  assert.deepEqual(refusals, [{ transport: "http", reason, agent: "ci" }]);

  const dev = directory(config()).dir;
  assert.equal(dev.strict, false);
  assert.equal(dev.devMode, true);
  assert.equal(directory(config({ devMode: false })).dir.devMode, false);
});

Deno.test("the socket key and configured ids", () => {
  const { dir } = directory();
  assert.equal(dir.devKey(SOCKET_KEY), true);
  assert.equal(dir.devKey(SOCKET_KEY + "x"), false);
  assert.equal(dir.devKey(undefined), false);
  assert.equal(dir.isConfigured("ci"), true);
  assert.equal(dir.isConfigured("jwtbot"), true);
  assert.equal(dir.isConfigured("stranger"), false);
  assert.equal(dir.isConfigured("constructor"), false);
});

Deno.test("principalOf before any sign-in falls back to the config", () => {
  const { dir } = directory();
  assert.deepEqual(dir.principalOf("ci"), {
    principal: "team-ci",
    tenant: "acme",
    via: "token",
    principals: ["team-ci"],
  });
  assert.deepEqual(dir.principalOf("jwtbot"), {
    principal: "agent:jwtbot",
    tenant: "acme",
    via: "jwt",
    principals: ["agent:jwtbot"],
  });
  assert.deepEqual(dir.principalOf("stranger"), {
    principal: "agent:stranger",
    via: "dev",
    principals: ["agent:stranger"],
  });
  const dev = dir.devIdentity("stranger");
  assert.deepEqual(dev, { agent: "stranger", principal: "agent:stranger", via: "dev" });
});

Deno.test("reload keeps a JWT's principal and takes token agents as now configured", async () => {
  const { dir } = directory();
  await dir.authenticate(await agentJwt({ agent_id: "jwtbot", sub: "alice" }), "http");
  await dir.authenticate(TOKEN_CI, "http");
  assert.equal(dir.principalOf("jwtbot").principal, "alice");
  assert.equal(dir.principalOf("ci").principal, "team-ci");

  const newBot = "tok_N3wB0tT0k3nV4lu3F0rT3st1ngR3l0ad";
  dir.reload(config({ ciPrincipal: "team-ci-2", botToken: newBot }), verifier);
  assert.equal(dir.principalOf("jwtbot").principal, "alice");
  assert.equal(dir.principalOf("jwtbot").via, "jwt");
  // Who was behind it before stays excluded from approving its requests (principals).
  assert.deepEqual(dir.principalOf("ci"), {
    principal: "team-ci-2",
    tenant: "acme",
    via: "token",
    principals: ["team-ci", "team-ci-2"],
  });
  // Tokens as now configured.
  assert.deepEqual(await dir.authenticate(TOKEN_BOT, "http"), { error: "Unknown agent token" });
  const bot = await dir.authenticate(newBot, "http");
  assert.ok(!("error" in bot));
  assert.equal(bot.agent, "bot");
  // JWT trust as now given: none.
  dir.reload(config());
  assert.deepEqual(await dir.authenticate(await agentJwt({ agent_id: "jwtbot" }), "http"), {
    error: "Agent JWTs are not configured (security.agent_jwt)",
  });
  assert.equal(dir.principalOf("jwtbot").principal, "alice");
});

Deno.test("remembered identities are bounded: the least recently seen is forgotten", async (t) => {
  const jwt = await agentJwt({ agent_id: "jwtbot", sub: "alice" });
  assert.equal(MAX_REMEMBERED_IDENTITIES, 1024);
  await t.step("1030 dev identities after a JWT sign-in forget it", async () => {
    const { dir } = directory();
    await dir.authenticate(jwt, "http");
    for (let i = 0; i < 1030; i++) dir.devIdentity(`dev-${i}`);
    assert.deepEqual(dir.principalOf("jwtbot"), {
      principal: "agent:jwtbot",
      tenant: "acme",
      via: "jwt",
      principals: ["agent:jwtbot"],
    });
  });
  await t.step("exactly at the bound it is still remembered; one more forgets it", async () => {
    const { dir } = directory();
    await dir.authenticate(jwt, "http");
    for (let i = 0; i < MAX_REMEMBERED_IDENTITIES - 1; i++) dir.devIdentity(`dev-${i}`);
    assert.equal(dir.principalOf("jwtbot").principal, "alice");
    dir.devIdentity("one-more");
    assert.equal(dir.principalOf("jwtbot").principal, "agent:jwtbot");
  });
  await t.step("signing in again makes it the most recently seen", async () => {
    const { dir } = directory();
    await dir.authenticate(jwt, "http");
    for (let i = 0; i < 1000; i++) dir.devIdentity(`dev-${i}`);
    await dir.authenticate(jwt, "http");
    for (let i = 1000; i < 2000; i++) dir.devIdentity(`dev-${i}`);
    assert.equal(dir.principalOf("jwtbot").principal, "alice");
  });
});

Deno.test("every principal seen behind an agent id is kept (bounded) for requester exclusion", async () => {
  const { dir } = directory();
  for (const sub of ["alice", "zed", "alice"]) {
    await dir.authenticate(await agentJwt({ agent_id: "jwtbot", sub }), "http");
  }
  assert.equal(dir.principalOf("jwtbot").principal, "alice");
  assert.deepEqual(dir.principalOf("jwtbot").principals, ["zed", "alice"]);
  for (let i = 0; i < MAX_PRINCIPALS_PER_AGENT + 4; i++) {
    await dir.authenticate(await agentJwt({ agent_id: "jwtbot", sub: `p${i}` }), "http");
  }
  assert.equal(dir.principalOf("jwtbot").principals.length, MAX_PRINCIPALS_PER_AGENT);
});
