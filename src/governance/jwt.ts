/**
 * Offline verification of the JWTs agents and operators present as bearer credentials. The
 * trust is pinned: public keys come from a JWKS file on disk and/or inline JWKs in the config,
 * and nothing is ever fetched (no `jku`, `x5u`, discovery or remote JWKS). One `JwtVerifier`
 * holds the keys of one trust (imported once, swapped atomically by `reload()`) and turns a
 * compact JWS into `VerifiedClaims` or a `JwtError` whose `reason` an HTTP edge can answer
 * with 401. This module does not decide what a principal may do; the governance layer does.
 *
 * What a token must satisfy, in this order:
 * - at most `JWT_LIMITS.tokenChars` characters (checked before anything is parsed);
 * - three base64url parts, a JSON header whose `alg` is EdDSA, ES256 or RS256 and in the
 *   trust's `algorithms` (`none` and HS* are never accepted, whatever the config says);
 * - a key chosen without guessing: with several keys the header's `kid` must name one, with a
 *   single key `kid` may be absent; the key's `alg` must equal the header's `alg`;
 * - a valid signature, then `iss` equal to the trust's issuer, `aud` containing its audience,
 *   `exp` present and not past, `nbf` and `iat` not in the future (each with
 *   `clockSkewSeconds`, at most `JWT_LIMITS.maxSkewSeconds`);
 * - a lifetime (`exp - iat`, else `exp - nbf`, else `exp - now`) of at most `maxTtlSeconds`;
 * - a principal claim of 1..`claimChars` characters without control characters; optional
 *   tenant, agent and `jti` under the same bounds; at most `roles` roles, `amr` methods and a
 *   `delegationDepth`-deep RFC 8693 `act` chain.
 *
 * Keys: public only (a JWK carrying `d`, `p`, `q`, `dp`, `dq`, `qi`, `oth`, `k` or `priv` is
 * refused at load), Ed25519 (EdDSA), P-256 (ES256) or RSA of at least 2048 bits (RS256); at
 * most `JWT_LIMITS.keys` per trust, a JWKS file of at most `JWT_LIMITS.jwksBytes` bytes.
 *
 * There is no cache of verified tokens: an EdDSA verification costs about 0.2 ms, nearly all of
 * it WebCrypto's own verify (`jwt_test.ts` prints the measured median), and without a cache
 * `reload()` takes effect on the very next request. Error messages never include the token or any string taken from it.
 */
import { errors as joseErrors, importJWK, type JWTPayload, jwtVerify } from "jose";
import { systemClock, TermadaError, type TermadaErrorOptions } from "../shared/mod.ts";

export type JwtAlgorithm = "EdDSA" | "ES256" | "RS256";

/** Every algorithm a trust may accept; the default of `JwtTrust.algorithms`. */
export const JWT_ALGORITHMS: readonly JwtAlgorithm[] = ["EdDSA", "ES256", "RS256"];

/** The bounds every token, claim and key set is held to. */
export const JWT_LIMITS = {
  /** Longest compact token accepted, in characters. */
  tokenChars: 8192,
  /** Largest JWKS file read. */
  jwksBytes: 256 * 1024,
  /** Most public keys per trust (file and inline together). */
  keys: 64,
  /** Longest principal, tenant, agent, role, amr value, actor or jti. */
  claimChars: 256,
  roles: 32,
  amr: 16,
  /** Deepest RFC 8693 `act` nesting. */
  delegationDepth: 8,
  /** Largest `clockSkewSeconds` a trust may configure. */
  maxSkewSeconds: 300,
} as const;

/** The trust one verifier enforces: who issues, for whom, with which pinned keys. */
export interface JwtTrust {
  /** Exact match of `iss`. */
  issuer: string;
  /** `aud` (a string or an array) must contain it. */
  audience: string;
  /** Path to a pinned JWKS JSON file (`{"keys":[...]}`), public keys only. */
  jwksFile?: string;
  /** Inline public JWKs (each may carry `kid`, `alg`). */
  keys?: readonly JsonWebKey[];
  /** Accepted algorithms; all three by default. `none` and HS* are never accepted. */
  algorithms?: readonly JwtAlgorithm[];
  /** Longest lifetime accepted: `exp - iat` (or `exp - nbf`, or `exp - now` when neither). */
  maxTtlSeconds: number;
  /** Tolerance for `exp`, `nbf` and `iat`, 0..300 seconds. */
  clockSkewSeconds: number;
  /** Claim NAMES; defaults `sub`, `tenant`, `agent_id`, `roles`. */
  claims?: { principal?: string; tenant?: string; agent?: string; roles?: string };
  /** Epoch ms; the system clock by default (tests inject one). */
  clock?: { now(): number };
}

/** What a verified token says, bounded and typed. */
export interface VerifiedClaims {
  principal: string;
  tenant?: string;
  agent?: string;
  roles: string[];
  amr: string[];
  /** RFC 8693 `act` chain, outermost first: who acts on behalf of `principal`. */
  delegation: string[];
  jti?: string;
  /** Epoch seconds. */
  issuedAt?: number;
  /** Epoch seconds. */
  expiresAt: number;
  keyId?: string;
  algorithm: JwtAlgorithm;
}

/** Why a token was refused; `JwtError.reason`. */
export type JwtErrorReason =
  | "malformed"
  | "too_large"
  | "bad_algorithm"
  | "unknown_key"
  | "bad_signature"
  | "expired"
  | "not_yet_valid"
  | "bad_issuer"
  | "bad_audience"
  | "ttl_too_long"
  | "missing_claim"
  | "bad_claim";

const HINTS: Record<JwtErrorReason, string> = {
  malformed: "Send a compact JWS (header.payload.signature) in the Authorization header",
  too_large: `Tokens are limited to ${JWT_LIMITS.tokenChars} characters`,
  bad_algorithm: "Sign with an algorithm the trust accepts (EdDSA, ES256 or RS256) and its key",
  unknown_key: "Sign with a key the trust pins and put its kid in the token header",
  bad_signature: "Send the token exactly as the issuer signed it",
  expired: "Obtain a fresh token from the issuer",
  not_yet_valid: "Check the clocks of the issuer and this host, or wait until the token is valid",
  bad_issuer: "Use a token from the issuer this trust names",
  bad_audience: "Request a token whose audience is this Termada",
  ttl_too_long: "Request a token with a shorter lifetime",
  missing_claim: "Request a token that carries the claims this trust requires",
  bad_claim: "Request a token whose claims are well-formed and within the limits",
};

/**
 * A bearer JWT that was refused. Travels as INVALID_ARGUMENT (the shared codes have no
 * "unauthorized"); HTTP edges answer 401 for it, keyed on `reason`, which also goes out as
 * `details.state`.
 */
export class JwtError extends TermadaError {
  readonly reason: JwtErrorReason;

  constructor(reason: JwtErrorReason, message: string, options: { cause?: unknown } = {}) {
    const opts: TermadaErrorOptions = {
      hint: HINTS[reason],
      details: { state: reason },
      retriable: false,
    };
    if (options.cause !== undefined) opts.cause = options.cause;
    super("INVALID_ARGUMENT", message, opts);
    this.name = "JwtError";
    this.reason = reason;
  }
}

const B64URL = /^[A-Za-z0-9_-]*$/;
/** C0, DEL, C1 and unpaired surrogates: nothing a name or role may hold. */
const CONTROL = /[\p{Cc}\p{Cs}]/u;
const PRIVATE_MEMBERS = ["d", "p", "q", "dp", "dq", "qi", "oth", "k", "priv"] as const;
const DEFAULT_CLAIMS = { principal: "sub", tenant: "tenant", agent: "agent_id", roles: "roles" };
const utf8 = new TextDecoder("utf-8", { fatal: true });

/** Bytes of unpadded base64url, or undefined when `text` is not that. */
function decodeBase64Url(text: string): Uint8Array | undefined {
  if (!B64URL.test(text) || text.length % 4 === 1) return undefined;
  const b64 = text.replaceAll("-", "+").replaceAll("_", "/");
  let bin: string;
  try {
    bin = atob(b64 + "=".repeat((4 - (b64.length % 4)) % 4));
  } catch {
    return undefined; // not base64 after all; the caller reports it as malformed
  }
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

interface Header {
  alg: string;
  kid?: unknown;
}

/** The parsed header of a compact JWS, or undefined when it is not one. */
function parseHeader(token: string): Header | undefined {
  const parts = token.split(".");
  if (parts.length !== 3) return undefined;
  const [head, body, sig] = parts as [string, string, string];
  if (head === "" || body === "" || !B64URL.test(body) || !B64URL.test(sig)) return undefined;
  const bytes = decodeBase64Url(head);
  if (bytes === undefined) return undefined;
  let header: unknown;
  try {
    header = JSON.parse(utf8.decode(bytes));
  } catch {
    return undefined; // not UTF-8 JSON: not a JWT
  }
  if (!isObject(header) || typeof header.alg !== "string") return undefined;
  return header as unknown as Header;
}

/**
 * True when `token` has the shape of a JWT: at most `JWT_LIMITS.tokenChars` characters, three
 * base64url parts, the first a JSON header with an `alg`. A cheap check (nothing is verified)
 * that routes a bearer credential to JWT verification rather than static-token comparison.
 */
export function looksLikeJwt(token: string): boolean {
  return typeof token === "string" && token.length <= JWT_LIMITS.tokenChars &&
    parseHeader(token) !== undefined;
}

/** One imported public key. */
interface TrustedKey {
  kid: string | undefined;
  alg: JwtAlgorithm;
  key: CryptoKey;
}

/** Where a key came from, for messages. */
interface KeySource {
  /** `JWKS file "<path>"` or `inline keys`. */
  label: string;
  file?: string;
  key: string;
}

function loadError(source: KeySource, problem: string, cause?: unknown): TermadaError {
  const options: TermadaErrorOptions = {
    hint: source.file === undefined
      ? "Give public JWKs only (kty OKP/Ed25519, EC/P-256 or RSA of 2048+ bits)"
      : `Fix the file (a JSON object {"keys": [...]} of public JWKs), then reload`,
    details: source.file === undefined ? { key: source.key } : { file: source.file },
  };
  if (cause !== undefined) options.cause = cause;
  return new TermadaError("INVALID_ARGUMENT", `Cannot load ${source.label}: ${problem}`, options);
}

/** The algorithm a key's type implies (each supported key type fits exactly one). */
function keyAlgorithm(jwk: Record<string, unknown>): JwtAlgorithm | undefined {
  if (jwk.kty === "OKP" && jwk.crv === "Ed25519") return "EdDSA";
  if (jwk.kty === "EC" && jwk.crv === "P-256") return "ES256";
  if (jwk.kty === "RSA") return "RS256";
  return undefined;
}

function rsaBits(n: string): number {
  const bytes = decodeBase64Url(n);
  if (bytes === undefined) return 0;
  let i = 0;
  while (i < bytes.length && bytes[i] === 0) i++;
  if (i === bytes.length) return 0;
  return (bytes.length - i - 1) * 8 + (32 - Math.clz32(bytes[i]!));
}

async function importKey(
  raw: unknown,
  where: string,
  source: KeySource,
  allowed: ReadonlySet<JwtAlgorithm>,
): Promise<TrustedKey> {
  if (!isObject(raw)) throw loadError(source, `${where} is not a JSON object`);
  const present = PRIVATE_MEMBERS.filter((m) => raw[m] !== undefined);
  if (present.length > 0) {
    throw loadError(
      source,
      `${where} is not a public key (it has private member "${present[0]}")`,
    );
  }
  const alg = keyAlgorithm(raw);
  if (alg === undefined) {
    throw loadError(source, `${where} is not an Ed25519, P-256 or RSA public key`);
  }
  if (raw.alg !== undefined && raw.alg !== alg) {
    throw loadError(
      source,
      `${where} has "alg" that does not fit its key type (expected "${alg}")`,
    );
  }
  if (!allowed.has(alg)) {
    throw loadError(source, `${where} is an ${alg} key, which the trust's algorithms exclude`);
  }
  if (raw.use !== undefined && raw.use !== "sig") {
    throw loadError(source, `${where} has "use" other than "sig"`);
  }
  if (
    raw.key_ops !== undefined &&
    !(Array.isArray(raw.key_ops) && raw.key_ops.includes("verify"))
  ) {
    throw loadError(source, `${where} has "key_ops" without "verify"`);
  }
  let kid: string | undefined;
  if (raw.kid !== undefined) {
    if (typeof raw.kid !== "string" || raw.kid === "" || raw.kid.length > JWT_LIMITS.claimChars) {
      throw loadError(source, `${where} has a "kid" that is not a string of 1..256 characters`);
    }
    kid = raw.kid;
  }
  // Only the public members go to WebCrypto, so stray fields cannot change how it is imported.
  let pub: Record<string, unknown>;
  if (alg === "RS256") {
    if (typeof raw.n !== "string" || typeof raw.e !== "string") {
      throw loadError(source, `${where} lacks "n" or "e"`);
    }
    const bits = rsaBits(raw.n);
    if (bits < 2048) {
      throw loadError(source, `${where} is an RSA key of ${bits} bits (at least 2048 needed)`);
    }
    pub = { kty: "RSA", n: raw.n, e: raw.e };
  } else if (alg === "ES256") {
    if (typeof raw.x !== "string" || typeof raw.y !== "string") {
      throw loadError(source, `${where} lacks "x" or "y"`);
    }
    pub = { kty: "EC", crv: "P-256", x: raw.x, y: raw.y };
  } else {
    if (typeof raw.x !== "string") throw loadError(source, `${where} lacks "x"`);
    pub = { kty: "OKP", crv: "Ed25519", x: raw.x };
  }
  let key: CryptoKey;
  try {
    const imported = await importJWK(pub, alg);
    if (imported instanceof Uint8Array) throw new TypeError("Symmetric key");
    key = imported;
  } catch (err) {
    throw loadError(source, `${where} is not a valid ${alg} public key`, err);
  }
  return { kid, alg, key };
}

async function readBounded(path: string): Promise<Uint8Array> {
  using file = await Deno.open(path, { read: true });
  const chunks: Uint8Array[] = [];
  let total = 0;
  const buf = new Uint8Array(64 * 1024);
  for (;;) {
    const n = await file.read(buf);
    if (n === null) break;
    total += n;
    if (total > JWT_LIMITS.jwksBytes) {
      throw new RangeError(`larger than ${JWT_LIMITS.jwksBytes} bytes`);
    }
    chunks.push(buf.slice(0, n));
  }
  const out = new Uint8Array(total);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}

async function loadJwksFile(
  path: string,
  allowed: ReadonlySet<JwtAlgorithm>,
): Promise<TrustedKey[]> {
  const source: KeySource = { label: `JWKS file "${path}"`, file: path, key: "jwks_file" };
  let bytes: Uint8Array;
  try {
    bytes = await readBounded(path);
  } catch (err) {
    if (err instanceof RangeError) throw loadError(source, `it is ${err.message}`);
    const why = err instanceof Deno.errors.NotFound
      ? "it does not exist"
      : err instanceof Deno.errors.PermissionDenied
      ? "permission denied"
      : err instanceof Error
      ? err.message
      : String(err);
    throw loadError(source, `cannot read it (${why})`, err);
  }
  let doc: unknown;
  try {
    doc = JSON.parse(utf8.decode(bytes));
  } catch (err) {
    throw loadError(source, "it is not UTF-8 JSON", err);
  }
  if (!isObject(doc) || !Array.isArray(doc.keys)) {
    throw loadError(source, `it is not a JSON object with a "keys" array`);
  }
  if (doc.keys.length > JWT_LIMITS.keys) {
    throw loadError(source, `it has ${doc.keys.length} keys (at most ${JWT_LIMITS.keys})`);
  }
  const out: TrustedKey[] = [];
  for (const [i, raw] of doc.keys.entries()) {
    out.push(await importKey(raw, `key ${i}`, source, allowed));
  }
  return out;
}

function checkKeySet(keys: readonly TrustedKey[], source: KeySource): void {
  if (keys.length === 0) throw loadError(source, "the trust has no keys");
  if (keys.length > JWT_LIMITS.keys) {
    throw loadError(source, `the trust has ${keys.length} keys (at most ${JWT_LIMITS.keys})`);
  }
  if (keys.length === 1) return;
  const seen = new Set<string>();
  for (const k of keys) {
    if (k.kid === undefined) {
      throw loadError(source, 'with more than one key, every key needs a "kid"');
    }
    if (seen.has(k.kid)) throw loadError(source, `"kid" "${k.kid}" appears more than once`);
    seen.add(k.kid);
  }
}

/** Longest issuer or audience a trust may name (URLs; the config allows as much). */
const TRUST_NAME_CHARS = 512;
/** Longest JWKS file path. */
const PATH_CHARS = 4096;

function checkName(value: unknown, what: string, max: number = JWT_LIMITS.claimChars): string {
  if (typeof value !== "string" || value === "" || value.length > max) {
    throw new TypeError(`${what} must be a string of 1..${max} characters`);
  }
  return value;
}

interface ClaimNames {
  principal: string;
  tenant: string;
  agent: string;
  roles: string;
}

function refuse(reason: JwtErrorReason, message: string, cause?: unknown): JwtError {
  return new JwtError(reason, message, cause === undefined ? {} : { cause });
}

/** A bounded string claim, or a `bad_claim` refusal naming it (never its value). */
function stringClaim(value: unknown, name: string): string {
  if (
    typeof value !== "string" || value === "" || value.length > JWT_LIMITS.claimChars ||
    CONTROL.test(value)
  ) {
    throw refuse(
      "bad_claim",
      `Cannot accept the token: claim "${name}" is not a string of 1..${JWT_LIMITS.claimChars} characters without control characters`,
    );
  }
  return value;
}

function stringList(value: unknown, name: string, max: number, spaced: boolean): string[] {
  if (value === undefined) return [];
  let items: unknown[];
  if (spaced && typeof value === "string") {
    items = value.split(" ").filter((s) => s !== "");
  } else if (Array.isArray(value)) {
    items = value;
  } else {
    throw refuse(
      "bad_claim",
      `Cannot accept the token: claim "${name}" is not an array of strings${
        spaced ? " or a space-separated string" : ""
      }`,
    );
  }
  if (items.length > max) {
    throw refuse(
      "bad_claim",
      `Cannot accept the token: claim "${name}" has ${items.length} entries (at most ${max})`,
    );
  }
  return items.map((v) => stringClaim(v, name));
}

function delegationChain(value: unknown): string[] {
  const chain: string[] = [];
  let act = value;
  while (act !== undefined) {
    if (chain.length >= JWT_LIMITS.delegationDepth) {
      throw refuse(
        "bad_claim",
        `Cannot accept the token: claim "act" is nested deeper than ${JWT_LIMITS.delegationDepth}`,
      );
    }
    if (!isObject(act)) {
      throw refuse("bad_claim", `Cannot accept the token: claim "act" is not an object`);
    }
    chain.push(stringClaim(act.sub, "act.sub"));
    act = act.act;
  }
  return chain;
}

function numericClaim(value: unknown, name: string): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== "number" || !Number.isFinite(value)) {
    throw refuse("bad_claim", `Cannot accept the token: claim "${name}" is not a number`);
  }
  return value;
}

/** The jose failure as a refusal; anything unexpected refuses too (fail closed). */
function fromJose(err: unknown): JwtError {
  if (err instanceof JwtError) return err;
  const base = "Cannot accept the token";
  if (err instanceof joseErrors.JWTExpired) {
    return refuse("expired", `${base}: it has expired`, err);
  }
  if (err instanceof joseErrors.JWTClaimValidationFailed) {
    const claim = err.claim;
    if (err.reason === "missing") {
      return refuse("missing_claim", `${base}: claim "${claim}" is missing`, err);
    }
    if (err.reason === "check_failed") {
      if (claim === "iss") return refuse("bad_issuer", `${base}: its issuer is not trusted`, err);
      if (claim === "aud") {
        return refuse("bad_audience", `${base}: its audience does not include this service`, err);
      }
      if (claim === "nbf") return refuse("not_yet_valid", `${base}: it is not yet valid`, err);
    }
    return refuse("bad_claim", `${base}: claim "${claim}" is invalid`, err);
  }
  if (err instanceof joseErrors.JWSSignatureVerificationFailed) {
    return refuse("bad_signature", `${base}: its signature does not verify`, err);
  }
  if (err instanceof joseErrors.JOSEAlgNotAllowed) {
    return refuse("bad_algorithm", `${base}: its algorithm is not accepted`, err);
  }
  return refuse("malformed", `${base}: it is not a well-formed signed JWT`, err);
}

/** Verifies bearer JWTs against one pinned trust. Build with `JwtVerifier.create`. */
export class JwtVerifier {
  readonly #trust: JwtTrust;
  readonly #allowed: ReadonlySet<JwtAlgorithm>;
  readonly #names: ClaimNames;
  readonly #inline: readonly TrustedKey[];
  readonly #clock: { now(): number };
  #keys: readonly TrustedKey[];

  private constructor(
    trust: JwtTrust,
    allowed: ReadonlySet<JwtAlgorithm>,
    names: ClaimNames,
    inline: readonly TrustedKey[],
    keys: readonly TrustedKey[],
  ) {
    this.#trust = trust;
    this.#allowed = allowed;
    this.#names = names;
    this.#inline = inline;
    this.#keys = keys;
    this.#clock = trust.clock ?? systemClock;
  }

  /**
   * Validates `trust` (TypeError/RangeError for options no config could mean) and imports its
   * keys once. A bad, unreadable or oversized JWKS file, or a bad inline key, is a TermadaError
   * (INVALID_ARGUMENT) naming the file or `keys`.
   */
  static async create(trust: JwtTrust): Promise<JwtVerifier> {
    if (!isObject(trust)) throw new TypeError("JwtVerifier.create needs a trust object");
    checkName(trust.issuer, "trust.issuer", TRUST_NAME_CHARS);
    checkName(trust.audience, "trust.audience", TRUST_NAME_CHARS);
    if (!Number.isSafeInteger(trust.maxTtlSeconds) || trust.maxTtlSeconds <= 0) {
      throw new RangeError(
        `trust.maxTtlSeconds must be a positive integer, got ${trust.maxTtlSeconds}`,
      );
    }
    if (
      !Number.isInteger(trust.clockSkewSeconds) || trust.clockSkewSeconds < 0 ||
      trust.clockSkewSeconds > JWT_LIMITS.maxSkewSeconds
    ) {
      throw new RangeError(
        `trust.clockSkewSeconds must be an integer in 0..${JWT_LIMITS.maxSkewSeconds}, got ${trust.clockSkewSeconds}`,
      );
    }
    const algorithms = trust.algorithms ?? JWT_ALGORITHMS;
    if (!Array.isArray(algorithms) || algorithms.length === 0) {
      throw new TypeError("trust.algorithms must be a non-empty array");
    }
    for (const a of algorithms) {
      if (!JWT_ALGORITHMS.includes(a)) {
        throw new RangeError(
          `trust.algorithms holds "${String(a)}"; only EdDSA, ES256 and RS256 are accepted`,
        );
      }
    }
    const names: ClaimNames = { ...DEFAULT_CLAIMS };
    if (trust.claims !== undefined) {
      for (const k of ["principal", "tenant", "agent", "roles"] as const) {
        const v = trust.claims[k];
        if (v !== undefined) names[k] = checkName(v, `trust.claims.${k}`);
      }
    }
    if (trust.jwksFile !== undefined) checkName(trust.jwksFile, "trust.jwksFile", PATH_CHARS);
    if (trust.keys !== undefined && !Array.isArray(trust.keys)) {
      throw new TypeError("trust.keys must be an array of JWKs");
    }
    if (trust.jwksFile === undefined && (trust.keys === undefined || trust.keys.length === 0)) {
      throw new TypeError("trust needs jwksFile or keys");
    }
    const allowed = new Set<JwtAlgorithm>(algorithms);
    const inlineSource: KeySource = { label: "inline keys", key: "keys" };
    const inlineRaw = trust.keys ?? [];
    if (inlineRaw.length > JWT_LIMITS.keys) {
      throw loadError(inlineSource, `there are ${inlineRaw.length} (at most ${JWT_LIMITS.keys})`);
    }
    const inline: TrustedKey[] = [];
    for (const [i, raw] of inlineRaw.entries()) {
      inline.push(await importKey(raw, `key ${i}`, inlineSource, allowed));
    }
    const keys = await JwtVerifier.#assemble(trust, allowed, inline);
    return new JwtVerifier({ ...trust }, allowed, names, inline, keys);
  }

  static async #assemble(
    trust: JwtTrust,
    allowed: ReadonlySet<JwtAlgorithm>,
    inline: readonly TrustedKey[],
  ): Promise<TrustedKey[]> {
    if (trust.jwksFile === undefined) {
      checkKeySet(inline, { label: "inline keys", key: "keys" });
      return [...inline];
    }
    const fromFile = await loadJwksFile(trust.jwksFile, allowed);
    const all = [...inline, ...fromFile];
    checkKeySet(all, {
      label: `JWKS file "${trust.jwksFile}"`,
      file: trust.jwksFile,
      key: "jwks_file",
    });
    return all;
  }

  /** How many keys the trust holds now (inline and file). */
  get keyCount(): number {
    return this.#keys.length;
  }

  /**
   * Re-reads `jwksFile` and swaps the key set in one step. When the new file is bad the old
   * keys stay in force and the TermadaError is thrown. Without a `jwksFile` there is nothing to
   * re-read and it returns at once.
   */
  async reload(): Promise<void> {
    if (this.#trust.jwksFile === undefined) return;
    this.#keys = await JwtVerifier.#assemble(this.#trust, this.#allowed, this.#inline);
  }

  /** The claims of `token` once every check passed; a JwtError otherwise. */
  async verify(token: string): Promise<VerifiedClaims> {
    if (typeof token !== "string") {
      throw refuse("malformed", "Cannot accept the token: it is not a string");
    }
    if (token.length > JWT_LIMITS.tokenChars) {
      throw refuse(
        "too_large",
        `Cannot accept the token: it is longer than ${JWT_LIMITS.tokenChars} characters`,
      );
    }
    const header = parseHeader(token);
    if (header === undefined) {
      throw refuse("malformed", "Cannot accept the token: it is not a well-formed signed JWT");
    }
    const alg = header.alg as JwtAlgorithm;
    if (!this.#allowed.has(alg)) {
      throw refuse("bad_algorithm", "Cannot accept the token: its algorithm is not accepted");
    }
    const key = this.#select(header.kid);
    if (key.alg !== alg) {
      throw refuse(
        "bad_algorithm",
        "Cannot accept the token: its algorithm does not match its key's",
      );
    }
    const trust = this.#trust;
    const nowMs = this.#clock.now();
    const now = Math.floor(nowMs / 1000);
    const skew = trust.clockSkewSeconds;
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, key.key, {
        algorithms: [key.alg],
        issuer: trust.issuer,
        audience: trust.audience,
        clockTolerance: skew,
        currentDate: new Date(nowMs),
        requiredClaims: ["exp", "iss", "aud"],
      }));
    } catch (err) {
      throw fromJose(err);
    }
    // jose checked the types of exp and nbf; iat only when maxTokenAge is set, so here.
    const exp = payload.exp!;
    const iat = numericClaim(payload.iat, "iat");
    const nbf = payload.nbf;
    if (iat !== undefined && iat > now + skew) {
      throw refuse("not_yet_valid", "Cannot accept the token: it was issued in the future");
    }
    const ttl = exp - (iat ?? nbf ?? now);
    if (ttl > trust.maxTtlSeconds) {
      throw refuse(
        "ttl_too_long",
        `Cannot accept the token: its lifetime of ${ttl} s exceeds ${trust.maxTtlSeconds} s`,
      );
    }
    const names = this.#names;
    const raw = payload as Record<string, unknown>;
    if (raw[names.principal] === undefined) {
      throw refuse(
        "missing_claim",
        `Cannot accept the token: claim "${names.principal}" is missing`,
      );
    }
    const claims: VerifiedClaims = {
      principal: stringClaim(raw[names.principal], names.principal),
      roles: stringList(raw[names.roles], names.roles, JWT_LIMITS.roles, true),
      amr: stringList(raw.amr, "amr", JWT_LIMITS.amr, false),
      delegation: delegationChain(raw.act),
      expiresAt: exp,
      algorithm: key.alg,
    };
    if (raw[names.tenant] !== undefined) {
      claims.tenant = stringClaim(raw[names.tenant], names.tenant);
    }
    if (raw[names.agent] !== undefined) claims.agent = stringClaim(raw[names.agent], names.agent);
    if (raw.jti !== undefined) claims.jti = stringClaim(raw.jti, "jti");
    if (iat !== undefined) claims.issuedAt = iat;
    if (key.kid !== undefined) claims.keyId = key.kid;
    return claims;
  }

  /** The one key a header may use: named by `kid`, or the only key. Never tries several. */
  #select(kid: unknown): TrustedKey {
    const keys = this.#keys;
    if (kid !== undefined && typeof kid !== "string") {
      throw refuse("malformed", `Cannot accept the token: its "kid" is not a string`);
    }
    if (keys.length === 1) {
      const only = keys[0]!;
      if (kid === undefined || only.kid === undefined || only.kid === kid) return only;
    } else if (kid !== undefined) {
      const found = keys.find((k) => k.kid === kid);
      if (found !== undefined) return found;
    }
    throw refuse(
      "unknown_key",
      kid === undefined
        ? `Cannot accept the token: it has no "kid" and the trust holds several keys`
        : `Cannot accept the token: its "kid" matches no trusted key`,
    );
  }
}
