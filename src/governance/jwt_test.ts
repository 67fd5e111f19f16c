import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { join } from "node:path";
import { CompactSign, exportJWK, type JWTPayload } from "jose";
import { TermadaError } from "../shared/mod.ts";
import {
  JWT_LIMITS,
  type JwtAlgorithm,
  JwtError,
  type JwtErrorReason,
  type JwtTrust,
  JwtVerifier,
  looksLikeJwt,
} from "./jwt.ts";
import { mint, type MintedKeys, mintKeys, writeJwks } from "./_jwt_testing.ts";

const NOW_MS = 1_750_000_000_000;
const NOW = NOW_MS / 1000;
const ISS = "https://idp.example";
const AUD = "termada";
const clock = { now: () => NOW_MS };

const keyCache = new Map<JwtAlgorithm, MintedKeys>();
async function keysFor(alg: JwtAlgorithm): Promise<MintedKeys> {
  let k = keyCache.get(alg);
  if (k === undefined) {
    k = await mintKeys(alg);
    keyCache.set(alg, k);
  }
  return k;
}

function trustFor(keys: readonly JsonWebKey[], extra: Partial<JwtTrust> = {}): JwtTrust {
  return {
    issuer: ISS,
    audience: AUD,
    keys,
    maxTtlSeconds: 3600,
    clockSkewSeconds: 0,
    clock,
    ...extra,
  };
}

function claims(extra: JWTPayload = {}): JWTPayload {
  return { iss: ISS, aud: AUD, sub: "alice", iat: NOW - 60, exp: NOW + 600, ...extra };
}

function b64url(value: unknown): string {
  return Buffer.from(JSON.stringify(value)).toString("base64url");
}

/** Asserts `token` is refused for `reason`, as a JwtError that does not echo the token. */
async function refused(v: JwtVerifier, token: string, reason: JwtErrorReason): Promise<void> {
  const err = await v.verify(token).then(
    () => assert.fail(`expected a refusal for ${reason}`),
    (e: unknown) => e,
  );
  assert.ok(err instanceof JwtError, `not a JwtError: ${String(err)}`);
  assert.equal(err.reason, reason, err.message);
  assert.equal(err.code, "INVALID_ARGUMENT");
  assert.equal(err.retriable, false);
  assert.equal(err.details?.state, reason);
  assert.ok(err.hint !== undefined && err.hint.length > 0);
  if (token !== "") assert.ok(!err.message.includes(token), "message echoes the token");
  for (const part of token.split(".")) {
    if (part.length > 8) assert.ok(!err.message.includes(part), "message echoes part of the token");
  }
}

async function withTempDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "termada_jwt_" });
  try {
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("verify accepts a valid token signed with each algorithm", async (t) => {
  for (const alg of ["EdDSA", "ES256", "RS256"] as const) {
    await t.step(alg, async () => {
      const k = await keysFor(alg);
      const v = await JwtVerifier.create(trustFor([k.publicJwk]));
      assert.equal(v.keyCount, 1);
      const token = await mint(k.privateKey, alg, k.publicJwk.kid, claims({ jti: "t-1" }));
      assert.ok(looksLikeJwt(token));
      const got = await v.verify(token);
      assert.deepEqual(got, {
        principal: "alice",
        roles: [],
        amr: [],
        delegation: [],
        jti: "t-1",
        issuedAt: NOW - 60,
        expiresAt: NOW + 600,
        keyId: k.publicJwk.kid,
        algorithm: alg,
      });
    });
  }
});

Deno.test("verify refuses expired and not-yet-valid tokens", async (t) => {
  const k = await keysFor("EdDSA");
  const v = await JwtVerifier.create(trustFor([k.publicJwk]));
  const sign = (c: JWTPayload) => mint(k.privateKey, "EdDSA", k.publicJwk.kid, claims(c));
  await t.step("exp in the past", async () => {
    await refused(v, await sign({ iat: NOW - 120, exp: NOW - 1 }), "expired");
  });
  await t.step("exp equal to now", async () => {
    await refused(v, await sign({ iat: NOW - 120, exp: NOW }), "expired");
  });
  await t.step("nbf in the future", async () => {
    await refused(v, await sign({ iat: NOW, nbf: NOW + 30, exp: NOW + 300 }), "not_yet_valid");
  });
  await t.step("iat in the future", async () => {
    await refused(v, await sign({ iat: NOW + 30, exp: NOW + 300 }), "not_yet_valid");
  });
  await t.step("iat that is not a number", async () => {
    await refused(v, await sign({ iat: "yesterday" as unknown as number }), "bad_claim");
  });
  await t.step("exp missing", async () => {
    await refused(v, await sign({ exp: undefined }), "missing_claim");
  });
});

Deno.test("verify honours clock skew for exp, nbf and iat", async (t) => {
  const k = await keysFor("EdDSA");
  const v = await JwtVerifier.create(trustFor([k.publicJwk], { clockSkewSeconds: 30 }));
  const sign = (c: JWTPayload) => mint(k.privateKey, "EdDSA", k.publicJwk.kid, claims(c));
  await t.step("exp 10 s ago passes with 30 s skew", async () => {
    const got = await v.verify(await sign({ iat: NOW - 300, exp: NOW - 10 }));
    assert.equal(got.expiresAt, NOW - 10);
  });
  await t.step("exp 60 s ago fails with 30 s skew", async () => {
    await refused(v, await sign({ iat: NOW - 300, exp: NOW - 60 }), "expired");
  });
  await t.step("nbf and iat 20 s ahead pass with 30 s skew", async () => {
    await v.verify(await sign({ iat: NOW + 20, nbf: NOW + 20, exp: NOW + 300 }));
  });
  await t.step("iat 60 s ahead fails with 30 s skew", async () => {
    await refused(v, await sign({ iat: NOW + 60, exp: NOW + 300 }), "not_yet_valid");
  });
});

Deno.test("verify refuses a wrong issuer or audience", async (t) => {
  const k = await keysFor("ES256");
  const v = await JwtVerifier.create(trustFor([k.publicJwk]));
  const sign = (c: JWTPayload) => mint(k.privateKey, "ES256", k.publicJwk.kid, claims(c));
  await t.step("wrong audience", async () => {
    await refused(v, await sign({ aud: "someone-else" }), "bad_audience");
  });
  await t.step("audience array containing ours passes", async () => {
    await v.verify(await sign({ aud: ["other", AUD] }));
  });
  await t.step("audience missing", async () => {
    await refused(v, await sign({ aud: undefined }), "missing_claim");
  });
  await t.step("wrong issuer", async () => {
    await refused(v, await sign({ iss: "https://idp.example/" }), "bad_issuer");
  });
  await t.step("issuer missing", async () => {
    await refused(v, await sign({ iss: undefined }), "missing_claim");
  });
});

Deno.test("verify picks the key by kid and never tries several", async (t) => {
  const a = await mintKeys("EdDSA");
  const b = await mintKeys("EdDSA");
  const two = await JwtVerifier.create(trustFor([a.publicJwk, b.publicJwk]));
  assert.equal(two.keyCount, 2);
  await t.step("each kid selects its key", async () => {
    assert.equal(
      (await two.verify(await mint(a.privateKey, "EdDSA", a.publicJwk.kid, claims())))
        .keyId,
      a.publicJwk.kid,
    );
    assert.equal(
      (await two.verify(await mint(b.privateKey, "EdDSA", b.publicJwk.kid, claims())))
        .keyId,
      b.publicJwk.kid,
    );
  });
  await t.step("unknown kid", async () => {
    await refused(two, await mint(a.privateKey, "EdDSA", "k_nobody", claims()), "unknown_key");
  });
  await t.step("no kid with several keys", async () => {
    await refused(two, await mint(a.privateKey, "EdDSA", undefined, claims()), "unknown_key");
  });
  await t.step("a kid naming the other key fails the signature", async () => {
    await refused(
      two,
      await mint(a.privateKey, "EdDSA", b.publicJwk.kid, claims()),
      "bad_signature",
    );
  });
  await t.step("one key: kid optional, a different kid refused", async () => {
    const one = await JwtVerifier.create(trustFor([a.publicJwk]));
    assert.equal(
      (await one.verify(await mint(a.privateKey, "EdDSA", undefined, claims())))
        .principal,
      "alice",
    );
    await refused(one, await mint(a.privateKey, "EdDSA", "k_other", claims()), "unknown_key");
  });
  await t.step("one key without kid: keyId absent", async () => {
    const { kid: _kid, ...bare } = a.publicJwk;
    const one = await JwtVerifier.create(trustFor([bare]));
    const got = await one.verify(await mint(a.privateKey, "EdDSA", "anything", claims()));
    assert.equal(got.keyId, undefined);
  });
});

Deno.test("verify refuses a tampered payload", async () => {
  const k = await keysFor("RS256");
  const v = await JwtVerifier.create(trustFor([k.publicJwk]));
  const token = await mint(k.privateKey, "RS256", k.publicJwk.kid, claims());
  const [head, , sig] = token.split(".");
  const forged = `${head}.${b64url(claims({ sub: "admin" }))}.${sig}`;
  await refused(v, forged, "bad_signature");
  // One character of the signature changed, in the middle (its last characters may already be
  // "AA", or carry bits a decoder ignores).
  const mid = Math.floor(sig!.length / 2);
  const other = sig![mid] === "A" ? "B" : "A";
  const flipped = `${head}.${token.split(".")[1]}.${sig!.slice(0, mid)}${other}${
    sig!.slice(mid + 1)
  }`;
  await refused(v, flipped, "bad_signature");
});

Deno.test("verify refuses alg none, HS256 and algorithms the trust or key excludes", async (t) => {
  const k = await keysFor("EdDSA");
  const v = await JwtVerifier.create(trustFor([k.publicJwk]));
  await t.step("alg none", async () => {
    const none = `${b64url({ alg: "none", kid: k.publicJwk.kid })}.${b64url(claims())}.`;
    assert.ok(looksLikeJwt(none));
    await refused(v, none, "bad_algorithm");
  });
  await t.step("HS256", async () => {
    const secret = new TextEncoder().encode(k.publicJwk.x ?? "x".repeat(32));
    await refused(v, await mint(secret, "HS256", k.publicJwk.kid, claims()), "bad_algorithm");
  });
  await t.step("header alg differs from the key's alg", async () => {
    const ec = await keysFor("ES256");
    const both = await JwtVerifier.create(trustFor([k.publicJwk, ec.publicJwk]));
    await refused(
      both,
      await mint(ec.privateKey, "ES256", k.publicJwk.kid, claims()),
      "bad_algorithm",
    );
  });
  await t.step("algorithm outside trust.algorithms", async () => {
    const ec = await keysFor("ES256");
    const onlyEd = await JwtVerifier.create(trustFor([k.publicJwk], { algorithms: ["EdDSA"] }));
    await refused(onlyEd, await mint(ec.privateKey, "ES256", undefined, claims()), "bad_algorithm");
    await assert.rejects(
      JwtVerifier.create(trustFor([ec.publicJwk], { algorithms: ["EdDSA"] })),
      (e: unknown) => e instanceof TermadaError && /algorithms exclude/.test(e.message),
    );
  });
  await t.step("HS256 cannot be configured", async () => {
    await assert.rejects(
      JwtVerifier.create(trustFor([k.publicJwk], {
        algorithms: ["HS256" as JwtAlgorithm],
      })),
      RangeError,
    );
  });
});

Deno.test("verify refuses a lifetime over maxTtlSeconds", async (t) => {
  const k = await keysFor("EdDSA");
  const v = await JwtVerifier.create(trustFor([k.publicJwk], { maxTtlSeconds: 600 }));
  const sign = (c: JWTPayload) => mint(k.privateKey, "EdDSA", k.publicJwk.kid, claims(c));
  await t.step("exp - iat at the limit passes", async () => {
    await v.verify(await sign({ iat: NOW - 100, exp: NOW + 500 }));
  });
  await t.step("exp - iat over", async () => {
    await refused(v, await sign({ iat: NOW - 100, exp: NOW + 501 }), "ttl_too_long");
  });
  await t.step("exp - nbf over when iat is absent", async () => {
    await refused(v, await sign({ iat: undefined, nbf: NOW - 10, exp: NOW + 700 }), "ttl_too_long");
  });
  await t.step("exp - now when neither", async () => {
    await v.verify(await sign({ iat: undefined, exp: NOW + 600 }));
    await refused(v, await sign({ iat: undefined, exp: NOW + 601 }), "ttl_too_long");
  });
});

Deno.test("verify maps roles, amr and the act delegation chain", async (t) => {
  const k = await keysFor("ES256");
  const v = await JwtVerifier.create(trustFor([k.publicJwk]));
  const sign = (c: JWTPayload) => mint(k.privateKey, "ES256", k.publicJwk.kid, claims(c));
  await t.step("arrays and nested act", async () => {
    const got = await v.verify(
      await sign({
        tenant: "acme",
        agent_id: "agent-7",
        roles: ["operator", "viewer"],
        amr: ["pwd", "hwk"],
        act: { sub: "ci-bot", act: { sub: "scheduler" } },
      }),
    );
    assert.equal(got.tenant, "acme");
    assert.equal(got.agent, "agent-7");
    assert.deepEqual(got.roles, ["operator", "viewer"]);
    assert.deepEqual(got.amr, ["pwd", "hwk"]);
    assert.deepEqual(got.delegation, ["ci-bot", "scheduler"]);
  });
  await t.step("space-separated roles", async () => {
    assert.deepEqual((await v.verify(await sign({ roles: "a  b c" }))).roles, ["a", "b", "c"]);
  });
  await t.step("bounds", async () => {
    const roles = Array.from({ length: JWT_LIMITS.roles }, (_, i) => `r${i}`);
    assert.equal((await v.verify(await sign({ roles }))).roles.length, JWT_LIMITS.roles);
    await refused(v, await sign({ roles: [...roles, "one-more"] }), "bad_claim");
    const amr = Array.from({ length: JWT_LIMITS.amr + 1 }, (_, i) => `m${i}`);
    await refused(v, await sign({ amr }), "bad_claim");
    await refused(v, await sign({ amr: "pwd" }), "bad_claim");
    await refused(v, await sign({ roles: [1, 2] }), "bad_claim");
    await refused(v, await sign({ roles: ["x".repeat(JWT_LIMITS.claimChars + 1)] }), "bad_claim");
  });
  await t.step("act depth", async () => {
    const chain = (depth: number): Record<string, unknown> | undefined =>
      depth === 0 ? undefined : { sub: `actor-${depth}`, act: chain(depth - 1) };
    const deep = await v.verify(await sign({ act: chain(JWT_LIMITS.delegationDepth) }));
    assert.equal(deep.delegation.length, JWT_LIMITS.delegationDepth);
    assert.equal(deep.delegation[0], `actor-${JWT_LIMITS.delegationDepth}`);
    await refused(v, await sign({ act: chain(JWT_LIMITS.delegationDepth + 1) }), "bad_claim");
    await refused(v, await sign({ act: { act: { sub: "x" } } }), "bad_claim");
    await refused(v, await sign({ act: ["x"] }), "bad_claim");
  });
});

Deno.test("verify checks the principal claim", async (t) => {
  const k = await keysFor("EdDSA");
  const v = await JwtVerifier.create(trustFor([k.publicJwk]));
  const sign = (c: JWTPayload) => mint(k.privateKey, "EdDSA", k.publicJwk.kid, claims(c));
  await t.step("missing", async () => {
    await refused(v, await sign({ sub: undefined }), "missing_claim");
  });
  await t.step("control characters", async () => {
    await refused(v, await sign({ sub: "alice\nadmin" }), "bad_claim");
    await refused(v, await sign({ sub: "alice\u0085" }), "bad_claim");
  });
  await t.step("empty, too long, not a string", async () => {
    await refused(v, await sign({ sub: "" }), "bad_claim");
    await refused(v, await sign({ sub: "a".repeat(JWT_LIMITS.claimChars + 1) }), "bad_claim");
    await refused(v, await sign({ sub: 42 as unknown as string }), "bad_claim");
  });
  await t.step("tenant with a control character", async () => {
    await refused(v, await sign({ tenant: "ac\u0000me" }), "bad_claim");
  });
});

Deno.test("verify reads custom claim names", async () => {
  const k = await keysFor("RS256");
  const v = await JwtVerifier.create(
    trustFor([k.publicJwk], {
      claims: { principal: "email", tenant: "org", agent: "azp", roles: "scope" },
    }),
  );
  const got = await v.verify(
    await mint(
      k.privateKey,
      "RS256",
      k.publicJwk.kid,
      claims({
        sub: "ignored",
        email: "bob@example.com",
        org: "acme",
        azp: "cli",
        scope: "exec:run audit:read",
        roles: ["not-read"],
      }),
    ),
  );
  assert.equal(got.principal, "bob@example.com");
  assert.equal(got.tenant, "acme");
  assert.equal(got.agent, "cli");
  assert.deepEqual(got.roles, ["exec:run", "audit:read"]);
  const noEmail = await mint(k.privateKey, "RS256", k.publicJwk.kid, claims());
  await refused(v, noEmail, "missing_claim");
});

Deno.test("verify refuses a token over the size limit without parsing it", async () => {
  const k = await keysFor("EdDSA");
  const v = await JwtVerifier.create(trustFor([k.publicJwk]));
  const big = await mint(k.privateKey, "EdDSA", k.publicJwk.kid, claims({ pad: "x".repeat(7000) }));
  assert.ok(big.length > JWT_LIMITS.tokenChars);
  await refused(v, big, "too_large");
  // Not even three parts: refused for its size, before its shape is looked at.
  await refused(v, "!".repeat(JWT_LIMITS.tokenChars + 1), "too_large");
  assert.equal(looksLikeJwt(big), false);
});

Deno.test("verify refuses malformed tokens", async (t) => {
  const k = await keysFor("EdDSA");
  const v = await JwtVerifier.create(trustFor([k.publicJwk]));
  const token = await mint(k.privateKey, "EdDSA", k.publicJwk.kid, claims());
  const [head, body, sig] = token.split(".") as [string, string, string];
  // Signed properly, so only the payload's shape can fail.
  const notJson = await new CompactSign(new TextEncoder().encode("nope"))
    .setProtectedHeader({ alg: "EdDSA", kid: k.publicJwk.kid })
    .sign(k.privateKey);
  for (
    const [name, bad] of [
      ["two parts", `${head}.${body}`],
      ["four parts", `${token}.x`],
      ["header not JSON", `${b64url("x").slice(0, -1)}eA.${body}.${sig}`],
      ["header without alg", `${b64url({ kid: "x" })}.${body}.${sig}`],
      ["non-base64url payload", `${head}.${body}*.${sig}`],
      ["payload not JSON", notJson],
      ["kid not a string", `${b64url({ alg: "EdDSA", kid: 7 })}.${body}.${sig}`],
      ["empty", ""],
    ] as const
  ) {
    await t.step(name, async () => {
      await refused(v, bad, "malformed");
    });
  }
});

Deno.test("create refuses private, weak or ambiguous keys", async (t) => {
  await withTempDir(async (dir) => {
    const k = await mintKeys("ES256");
    await t.step("private JWK in the JWKS file", async () => {
      const priv = { ...(await exportJWK(k.privateKey)), kid: "p1", alg: "ES256" };
      const path = join(dir, "private.json");
      await writeJwks(path, [priv]);
      await assert.rejects(
        JwtVerifier.create(trustFor([], { keys: undefined, jwksFile: path })),
        (e: unknown) =>
          e instanceof TermadaError && !(e instanceof JwtError) &&
          e.code === "INVALID_ARGUMENT" && e.message.includes(`"${path}"`) &&
          /private member "d"/.test(e.message) && e.details?.file === path,
      );
    });
    await t.step("private JWK inline", async () => {
      await assert.rejects(
        JwtVerifier.create(trustFor([{ ...k.publicJwk, d: "AAAA" }])),
        (e: unknown) => e instanceof TermadaError && /inline keys/.test(e.message),
      );
    });
    await t.step("RSA under 2048 bits", async () => {
      const pair = await crypto.subtle.generateKey(
        {
          name: "RSASSA-PKCS1-v1_5",
          modulusLength: 1024,
          publicExponent: new Uint8Array([1, 0, 1]),
          hash: "SHA-256",
        },
        true,
        ["sign", "verify"],
      );
      const weak = await crypto.subtle.exportKey("jwk", pair.publicKey);
      await assert.rejects(
        JwtVerifier.create(trustFor([weak])),
        (e: unknown) => e instanceof TermadaError && /1024 bits/.test(e.message),
      );
    });
    await t.step("unsupported key types", async () => {
      await assert.rejects(
        JwtVerifier.create(trustFor([{ kty: "oct", k: "c2VjcmV0" }])),
        TermadaError,
      );
      await assert.rejects(
        JwtVerifier.create(trustFor([{ kty: "EC", crv: "P-384", x: "AA", y: "AA" }])),
        TermadaError,
      );
    });
    await t.step("several keys without kid, or a duplicate kid", async () => {
      const other = await mintKeys("ES256");
      const { kid: _a, ...bare } = k.publicJwk;
      await assert.rejects(
        JwtVerifier.create(trustFor([bare, other.publicJwk])),
        (e: unknown) => e instanceof TermadaError && /needs a "kid"/.test(e.message),
      );
      await assert.rejects(
        JwtVerifier.create(trustFor([k.publicJwk, { ...other.publicJwk, kid: k.publicJwk.kid }])),
        (e: unknown) => e instanceof TermadaError && /more than once/.test(e.message),
      );
    });
    await t.step("missing, non-JSON and oversized files name the file", async () => {
      const missing = join(dir, "missing.json");
      const notJson = join(dir, "bad.json");
      const huge = join(dir, "huge.json");
      await Deno.writeTextFile(notJson, "{keys:");
      await Deno.writeTextFile(huge, " ".repeat(JWT_LIMITS.jwksBytes + 1));
      for (const path of [missing, notJson, huge]) {
        await assert.rejects(
          JwtVerifier.create(trustFor([], { keys: undefined, jwksFile: path })),
          (e: unknown) => e instanceof TermadaError && e.message.includes(`"${path}"`),
        );
      }
    });
    await t.step("too many keys", async () => {
      const path = join(dir, "many.json");
      await writeJwks(
        path,
        Array.from({ length: JWT_LIMITS.keys + 1 }, (_, i) => ({ ...k.publicJwk, kid: `k${i}` })),
      );
      await assert.rejects(
        JwtVerifier.create(trustFor([], { keys: undefined, jwksFile: path })),
        (e: unknown) => e instanceof TermadaError && /65 keys/.test(e.message),
      );
    });
  });
});

Deno.test("create refuses options no config could mean", async () => {
  const k = await keysFor("EdDSA");
  await assert.rejects(JwtVerifier.create(trustFor([], { keys: undefined })), TypeError);
  await assert.rejects(JwtVerifier.create(trustFor([k.publicJwk], { issuer: "" })), TypeError);
  await assert.rejects(
    JwtVerifier.create(trustFor([k.publicJwk], { clockSkewSeconds: 301 })),
    RangeError,
  );
  await assert.rejects(
    JwtVerifier.create(trustFor([k.publicJwk], { maxTtlSeconds: 0 })),
    RangeError,
  );
  await assert.rejects(JwtVerifier.create(trustFor([k.publicJwk], { algorithms: [] })), TypeError);
});

Deno.test("reload swaps the JWKS file's keys and keeps them when the new file is bad", async () => {
  await withTempDir(async (dir) => {
    const path = join(dir, "jwks.json");
    const a = await mintKeys("EdDSA");
    const b = await mintKeys("ES256");
    await writeJwks(path, [a.publicJwk]);
    const v = await JwtVerifier.create(trustFor([], { keys: undefined, jwksFile: path }));
    const tokenA = await mint(a.privateKey, "EdDSA", a.publicJwk.kid, claims());
    const tokenB = await mint(b.privateKey, "ES256", b.publicJwk.kid, claims());
    assert.equal((await v.verify(tokenA)).keyId, a.publicJwk.kid);
    await refused(v, tokenB, "unknown_key");

    await writeJwks(path, [b.publicJwk]);
    await v.reload();
    assert.equal(v.keyCount, 1);
    await refused(v, tokenA, "unknown_key");
    assert.equal((await v.verify(tokenB)).algorithm, "ES256");

    await Deno.writeTextFile(path, "not json");
    await assert.rejects(
      v.reload(),
      (e: unknown) => e instanceof TermadaError && e.message.includes(`"${path}"`),
    );
    assert.equal(v.keyCount, 1);
    assert.equal((await v.verify(tokenB)).principal, "alice");

    await writeJwks(path, [a.publicJwk, b.publicJwk]);
    await v.reload();
    assert.equal(v.keyCount, 2);
    await v.verify(tokenA);
    await v.verify(tokenB);
  });
});

Deno.test("reload keeps inline keys beside the file's", async () => {
  await withTempDir(async (dir) => {
    const path = join(dir, "jwks.json");
    const inline = await mintKeys("EdDSA");
    const file = await mintKeys("RS256");
    await writeJwks(path, [file.publicJwk]);
    const v = await JwtVerifier.create(trustFor([inline.publicJwk], { jwksFile: path }));
    assert.equal(v.keyCount, 2);
    await writeJwks(path, []);
    await v.reload();
    assert.equal(v.keyCount, 1);
    await v.verify(await mint(inline.privateKey, "EdDSA", inline.publicJwk.kid, claims()));
  });
});

Deno.test("looksLikeJwt tells JWTs from static tokens", async () => {
  const k = await keysFor("EdDSA");
  const token = await mint(k.privateKey, "EdDSA", k.publicJwk.kid, claims());
  assert.equal(looksLikeJwt(token), true);
  assert.equal(looksLikeJwt(`${b64url({ alg: "none" })}.${b64url({})}.`), true);
  assert.equal(looksLikeJwt("tk_0123456789abcdef0123456789abcdef"), false);
  assert.equal(looksLikeJwt("a.b.c"), false);
  assert.equal(looksLikeJwt(`${b64url({ typ: "JWT" })}.${b64url({})}.sig`), false);
  assert.equal(looksLikeJwt(`${b64url([1])}.${b64url({})}.sig`), false);
  assert.equal(looksLikeJwt(`${b64url({ alg: "EdDSA" })}.${b64url({})}`), false);
  assert.equal(looksLikeJwt(`${b64url({ alg: "EdDSA" })}.a+b.sig`), false);
  assert.equal(looksLikeJwt(""), false);
});

Deno.test("EdDSA verification median over 200 tokens", async () => {
  const k = await keysFor("EdDSA");
  const v = await JwtVerifier.create(trustFor([k.publicJwk]));
  const tokens = await Promise.all(
    Array.from(
      { length: 200 },
      (_, i) => mint(k.privateKey, "EdDSA", k.publicJwk.kid, claims({ jti: `t${i}` })),
    ),
  );
  for (const t of tokens.slice(0, 20)) await v.verify(t); // warm up JIT and the key
  const times: number[] = [];
  for (const t of tokens) {
    const start = performance.now();
    await v.verify(t);
    times.push(performance.now() - start);
  }
  times.sort((a, b) => a - b);
  const median = (times[99]! + times[100]!) / 2;
  // deno-lint-ignore no-console
  console.error(`EdDSA verify median over 200: ${(median * 1000).toFixed(1)} µs`);
  assert.ok(median < 50, `median ${median} ms`);
});
