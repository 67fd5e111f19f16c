/**
 * Signed anchors of the audit chain: the daemon signs the fsynced head of the audit log (`seq`,
 * `hash`) with its own Ed25519 key, keeps each anchor in an append-only local file and delivers it
 * to receivers outside the machine over HTTPS. `verifyAnchors` checks, offline, that every anchor
 * is signed by the key and still matches the record it names — so a log that was cut off or
 * rewritten behind an anchor shows up. See docs/GOVERNANCE.md (signed anchors).
 *
 * Files (all synchronous, like the audit log: a write is on disk before the call goes on):
 *
 * ```
 * <stateDir>/anchor_key.pkcs8   0600  Ed25519 private key (PKCS#8 DER)
 * <stateDir>/anchor_key.pub     0644  raw 32-byte public key, base64 text
 * <stateDir>/anchors/           0700
 *   anchors.jsonl               0600  one anchor per line, fsynced before it counts
 *   outbox.json                 0600  per receiver: delivered through which seq, dropped count
 *   receipts.jsonl              0600  what each receiver answered
 * ```
 *
 * Delivery is at least once, in seq order, one request at a time per receiver; the
 * `Idempotency-Key: <key_id>:<seq>` header lets a receiver make it exactly once.
 */
import { createHash } from "node:crypto";
import { join } from "node:path";
import { auditHashesAt, canonicalJson, readLastLines, type VerifyResult } from "../audit/mod.ts";
import {
  type Clock,
  decodeBase64,
  encodeBase64,
  invalidArgument,
  logger,
  systemClock,
  TermadaError,
} from "../shared/mod.ts";

export const ANCHOR_KEY_FILE = "anchor_key.pkcs8";
export const ANCHOR_PUBLIC_KEY_FILE = "anchor_key.pub";
export const ANCHORS_DIR = "anchors";
export const ANCHORS_FILE = "anchors.jsonl";
export const OUTBOX_FILE = "outbox.json";
export const RECEIPTS_FILE = "receipts.jsonl";
/** Anchors waiting for one receiver; past this the oldest are dropped (counted in status). */
export const MAX_PENDING_ANCHORS = 10_000;
/** A receiver's answer body is kept in its receipt up to this size (bytes). */
export const MAX_RECEIPT_BODY_BYTES = 4096;
export const DEFAULT_RECEIVER_TIMEOUT_MS = 10_000;
/** Back-off after a failed delivery: base doubling per attempt up to max, with jitter. */
export const DEFAULT_RETRY: Readonly<AnchorRetry> = Object.freeze({ baseMs: 1000, maxMs: 300_000 });
/**
 * Prefixed to what is signed, so a signature of this key can never be taken for one over
 * something else (the same idea as the audit checkpoint's `check`).
 */
export const ANCHOR_SIGNING_DOMAIN = "termada-audit-anchor\n";

const ANCHOR_KEYS = ["hash", "host", "key_id", "seq", "sig", "time", "v"].join();
const HEX64 = /^[0-9a-f]{64}$/;
const KEY_ID = /^[0-9a-f]{16}$/;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
const RECEIVER_NAME = /^[a-z0-9][a-z0-9_-]{0,63}$/;
// deno-lint-ignore no-control-regex -- matching control characters is the point
const CONTROL_CHARS = /[\x00-\x1f\x7f]/;
const MAX_HOST_CHARS = 255;
/** An anchor line is ~250 bytes; anything much longer is not one of ours. */
const MAX_ANCHOR_LINE_BYTES = 4096;
const MAX_KEY_FILE_BYTES = 1024;
const MAX_TIMEOUT_MS = 120_000;
const MAX_EVERY_MS = 86_400_000;
const LF = 0x0a;

const encoder = new TextEncoder();
const strictDecoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
const log = logger("anchors");

/** One signed anchor: the audit record `seq` had `hash` when `time` was read on `host`. */
export interface Anchor {
  v: 1;
  seq: number;
  hash: string;
  /** ISO-8601 UTC, from the service's clock. */
  time: string;
  host: string;
  /** First 16 hex digits of SHA-256 of the raw public key. */
  key_id: string;
  /** base64 Ed25519 signature over ANCHOR_SIGNING_DOMAIN + canonical JSON of the other fields. */
  sig: string;
}

/** Where anchors go: an https:// URL that accepts a POST of one anchor. */
export interface AnchorReceiver {
  /** A lowercase word: `[a-z0-9][a-z0-9_-]{0,63}`. */
  name: string;
  url: string;
  /** A PEM CA bundle to trust for this receiver (a private CA). */
  caFile?: string;
  /** Per request (default 10 s, at most 120 s). */
  timeoutMs?: number;
}

export interface AnchorRetry {
  /** First back-off after a failure (ms). */
  baseMs: number;
  /** Longest back-off (ms). */
  maxMs: number;
  /** A number in [0, 1) for the jitter (tests: fixed). */
  random?: () => number;
}

/** What the service needs of the audit log (an AuditLog fits). */
export interface AnchorLog {
  readonly lastSeq: number;
  readonly lastHash: string;
  durable(seq?: number): Promise<void>;
}

export interface AnchorServiceOptions {
  stateDir: string;
  log: AnchorLog;
  /** After `start()`, anchor the head this often when it moved; null: only on `anchorNow()`. */
  everyMs: number | null;
  receivers: readonly AnchorReceiver[];
  /** Written into every anchor (default: Deno.hostname()). */
  host?: string;
  clock?: Clock;
  /** Tests only: a replacement for the global fetch. */
  fetch?: typeof fetch;
  /** Back-off after failed deliveries (default DEFAULT_RETRY). */
  retry?: Partial<AnchorRetry>;
  /** Anchors kept waiting per receiver before the oldest are dropped (default and at most 10 000). */
  maxPending?: number;
}

export interface AnchorReceiverStatus {
  name: string;
  url: string;
  /** Anchors not yet answered by this receiver. */
  pending: number;
  /** Every anchor up to this seq was answered (delivered, rejected or dropped). */
  delivered_through: number;
  /** Anchors given up because more than MAX_PENDING_ANCHORS were waiting. */
  dropped: number;
  /** Anchors the receiver refused with a 3xx or 4xx (recorded, not retried), since open. */
  rejected: number;
  /** Failed attempts in a row (0 after a delivery). */
  attempts: number;
  last_status: number | null;
  last_error: string | null;
  last_delivered_at: string | null;
  /** When the next attempt runs (ISO), when one is scheduled. */
  next_retry: string | null;
}

export interface AnchorStatus {
  key_id: string;
  last_anchor: { seq: number; hash: string; time: string } | null;
  /** The last failure to make an anchor (e.g. the log is behind the last anchor). */
  last_error: string | null;
  receivers: AnchorReceiverStatus[];
}

export interface AnchorVerifyFailure {
  /** The anchor's seq, null when the line is not an anchor. */
  seq: number | null;
  /** 1-based line of the anchors file. */
  line: number;
  reason: string;
}

export interface AnchorVerifyResult {
  /** Every anchor is signed, in order and matches the log, and the log itself verifies. */
  ok: boolean;
  /** Lines in the anchors file (complete ones). */
  anchors: number;
  /** Anchors whose record was found in the log with the anchored hash. */
  checked: number;
  /** Anchors whose record was pruned behind the checkpoint: not checkable, not a failure. */
  pruned: number;
  failures: AnchorVerifyFailure[];
  key_id: string;
  /** Lines in receipts.jsonl. */
  receipts: number;
  /** The last well-formed, correctly signed anchor. */
  last_anchor: { seq: number; hash: string; time: string } | null;
  /** The audit log's own check (the same as `verifyAudit`). */
  audit: {
    ok: boolean;
    head: { seq: number; hash: string };
    first_broken?: VerifyResult["firstBroken"];
  };
  /** A last line without its newline: an anchor whose write never finished (not a failure). */
  torn_tail?: { line: number; bytes: number };
}

export interface VerifyAnchorsOptions {
  /**
   * The raw public key (base64) to trust instead of `<stateDir>/anchor_key.pub`: one kept off
   * the machine proves more than one beside the anchors.
   */
  publicKey?: string;
  /** An anchors file to check instead of the local one (e.g. a receiver's copy, as JSON lines). */
  anchorsFile?: string;
}

/** The key id of a raw Ed25519 public key: the first 16 hex digits of its SHA-256. */
export function anchorKeyId(publicKey: Uint8Array): string {
  return createHash("sha256").update(publicKey).digest("hex").slice(0, 16);
}

// ---------------------------------------------------------------------------------------------
// Files

function syncDir(dir: string): void {
  const d = Deno.openSync(dir, { read: true });
  try {
    d.syncSync();
  } finally {
    d.close();
  }
}

function writeAll(file: Deno.FsFile, bytes: Uint8Array): void {
  for (let off = 0; off < bytes.length;) {
    const n = file.writeSync(bytes.subarray(off));
    if (!(n > 0)) throw new Error("a write made no progress");
    off += n;
  }
}

function exists(path: string): boolean {
  try {
    Deno.lstatSync(path);
    return true;
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return false;
    throw err;
  }
}

/** Appends one line and fsyncs it; a new file's directory entry is fsynced too. */
function appendLine(path: string, text: string): void {
  const created = !exists(path);
  const file = Deno.openSync(path, { write: true, append: true, create: true, mode: 0o600 });
  try {
    writeAll(file, encoder.encode(text + "\n"));
    file.syncDataSync();
  } finally {
    file.close();
  }
  if (created) syncDir(join(path, ".."));
}

/** Replaces a file atomically and durably: temp file, fsync, rename, fsync of the directory. */
function writeAtomic(path: string, text: string): void {
  const tmp = `${path}.tmp`;
  const file = Deno.openSync(tmp, { write: true, create: true, truncate: true, mode: 0o600 });
  try {
    writeAll(file, encoder.encode(text));
    file.syncDataSync();
  } finally {
    file.close();
  }
  Deno.renameSync(tmp, path);
  syncDir(join(path, ".."));
}

/**
 * The last `n` complete lines of a file (oldest first) and the size of the good part (before a
 * torn last line): the audit log's own backwards reader. Bounded: open reads at most the anchors
 * it can still deliver, not the whole history.
 */
function lastLines(path: string, n: number): { lines: Uint8Array[]; goodBytes: number } {
  const r = readLastLines(path, n);
  return { lines: r.lines, goodBytes: r.size - r.tornBytes };
}

type FileLine = { kind: "line"; line: number; bytes: Uint8Array } | {
  kind: "torn";
  line: number;
  bytes: number;
};

/** Every line of a file, streamed in 1 MiB chunks; a line over `maxBytes` comes back cut short. */
function* fileLines(path: string, maxBytes: number): Generator<FileLine> {
  const file = Deno.openSync(path, { read: true });
  try {
    const chunk = new Uint8Array(1024 * 1024);
    let carry = new Uint8Array(0);
    let line = 0;
    let skipping = false;
    for (;;) {
      const n = file.readSync(chunk);
      if (n === null || n === 0) break;
      const data = new Uint8Array(carry.length + n);
      data.set(carry);
      data.set(chunk.subarray(0, n), carry.length);
      let start = 0;
      for (let lf = data.indexOf(LF); lf >= 0; lf = data.indexOf(LF, start)) {
        if (!skipping) {
          line++;
          yield { kind: "line", line, bytes: data.slice(start, lf) };
        }
        skipping = false;
        start = lf + 1;
      }
      carry = data.slice(start);
      if (carry.length > maxBytes && !skipping) {
        // Report the overlong line once, then skip to its end.
        line++;
        yield { kind: "line", line, bytes: carry.slice(0, maxBytes + 1) };
        skipping = true;
      }
      if (skipping) carry = new Uint8Array(0);
    }
    if (carry.length > 0 && !skipping) yield { kind: "torn", line: line + 1, bytes: carry.length };
  } finally {
    file.close();
  }
}

function countLines(path: string): number {
  if (!exists(path)) return 0;
  let n = 0;
  for (const l of fileLines(path, MAX_RECEIPT_BODY_BYTES * 4)) if (l.kind === "line") n++;
  return n;
}

// ---------------------------------------------------------------------------------------------
// The key

interface SigningKey {
  privateKey: CryptoKey;
  publicRaw: Uint8Array;
  keyId: string;
}

function keyError(path: string, message: string, hint: string, cause?: unknown): TermadaError {
  return new TermadaError("INVALID_ARGUMENT", message, { hint, cause, details: { file: path } });
}

/** The private key's bytes, or null when there is none; refuses a link or a file others can read. */
function readPrivateKey(path: string): Uint8Array<ArrayBuffer> | null {
  let st: Deno.FileInfo;
  try {
    st = Deno.lstatSync(path);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return null;
    throw err;
  }
  if (!st.isFile) {
    throw keyError(
      path,
      `Cannot use the anchor signing key "${path}": it is ${
        st.isSymlink ? "a symbolic link" : "not a regular file"
      }`,
      `Replace it with the key file itself (mode 0600), or move it aside to create a new key`,
    );
  }
  const mode = (st.mode ?? 0) & 0o777;
  if ((mode & 0o077) !== 0) {
    throw keyError(
      path,
      `Cannot use the anchor signing key "${path}": its mode 0${
        mode.toString(8)
      } lets other users read it`,
      `Run chmod 600 "${path}" (and check who may have copied it; if anyone could, move it ` +
        "aside to create a new key)",
    );
  }
  if (st.size > MAX_KEY_FILE_BYTES) {
    throw keyError(
      path,
      `Cannot use the anchor signing key "${path}": it is ${st.size} bytes, not an Ed25519 key`,
      "Move it aside to create a new key",
    );
  }
  return Deno.readFileSync(path);
}

/**
 * Writes a new private key so that the final name never holds a partial file: a temp file
 * (0600, createNew), fsynced, hard-linked to the final name (fails if one appeared meanwhile),
 * then the directory is fsynced. Returns false when another writer was first.
 */
function createPrivateKey(dir: string, path: string, bytes: Uint8Array): boolean {
  const tmp = `${path}.tmp`;
  try {
    Deno.removeSync(tmp);
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  }
  const file = Deno.openSync(tmp, { write: true, createNew: true, mode: 0o600 });
  try {
    writeAll(file, bytes);
    file.syncDataSync();
  } finally {
    file.close();
  }
  try {
    Deno.linkSync(tmp, path);
    return true;
  } catch (err) {
    if (err instanceof Deno.errors.AlreadyExists) return false;
    throw err;
  } finally {
    Deno.removeSync(tmp);
    syncDir(dir);
  }
}

function decodePublicKey(text: string, what: string): Uint8Array {
  const t = text.trim();
  const raw = BASE64.test(t) ? decodeBase64(t) : null;
  if (raw === null || raw.length !== 32) {
    throw invalidArgument(
      `Cannot use the anchor public key ${what}: it is not 32 bytes of base64`,
      `The public key file holds the raw Ed25519 key as base64 text (44 characters)`,
    );
  }
  return raw;
}

function decodeBase64Url(text: string): Uint8Array {
  const b64 = text.replaceAll("-", "+").replaceAll("_", "/");
  return decodeBase64(b64 + "=".repeat((4 - (b64.length % 4)) % 4));
}

function writePublicKey(path: string, raw: Uint8Array): void {
  writeAtomic(path, encodeBase64(raw) + "\n");
  Deno.chmodSync(path, 0o644);
}

/** The key in an existing .pub file, or null when there is none (or it is not a key). */
function readStalePublicKey(path: string): Uint8Array | null {
  try {
    return decodePublicKey(Deno.readTextFileSync(path), `"${path}"`);
  } catch {
    // Missing, unreadable or not a key: nothing worth keeping for verification.
    return null;
  }
}

/** Loads the anchor key of `stateDir`, creating it (and its .pub) when there is none. */
async function loadOrCreateKey(stateDir: string): Promise<SigningKey> {
  const path = join(stateDir, ANCHOR_KEY_FILE);
  const pubPath = join(stateDir, ANCHOR_PUBLIC_KEY_FILE);
  let pkcs8 = readPrivateKey(path);
  if (pkcs8 === null) {
    const pair = await crypto.subtle.generateKey({ name: "Ed25519" }, true, [
      "sign",
      "verify",
    ]) as CryptoKeyPair;
    const bytes = new Uint8Array(await crypto.subtle.exportKey("pkcs8", pair.privateKey));
    if (createPrivateKey(stateDir, path, bytes)) {
      log.info("created the anchor signing key", { file: path });
      // A .pub without its private key belongs to a key that is gone; anchors it signed stay
      // checkable with it, so it is kept under its key id rather than overwritten.
      const stale = readStalePublicKey(pubPath);
      if (stale !== null) {
        const kept = `${pubPath}.${anchorKeyId(stale)}`;
        Deno.renameSync(pubPath, kept);
        log.warn("kept the public key of a removed anchor key", { file: kept });
      }
      writePublicKey(pubPath, new Uint8Array(await crypto.subtle.exportKey("raw", pair.publicKey)));
    }
    pkcs8 = readPrivateKey(path)!;
  }
  let publicRaw: Uint8Array;
  let privateKey: CryptoKey;
  try {
    const extractable = await crypto.subtle.importKey("pkcs8", pkcs8, { name: "Ed25519" }, true, [
      "sign",
    ]);
    const jwk = await crypto.subtle.exportKey("jwk", extractable);
    publicRaw = decodeBase64Url(jwk.x ?? "");
    privateKey = await crypto.subtle.importKey("pkcs8", pkcs8, { name: "Ed25519" }, false, [
      "sign",
    ]);
  } catch (err) {
    throw keyError(
      path,
      `Cannot use the anchor signing key "${path}": it is not an Ed25519 PKCS#8 key`,
      "Move it aside to create a new key (anchors it signed stay checkable with its .pub)",
      err,
    );
  }
  let pubText: string | null = null;
  try {
    pubText = Deno.readTextFileSync(pubPath);
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  }
  if (pubText === null) {
    writePublicKey(pubPath, publicRaw);
  } else if (encodeBase64(decodePublicKey(pubText, `"${pubPath}"`)) !== encodeBase64(publicRaw)) {
    throw keyError(
      pubPath,
      `Cannot use the anchor key: "${pubPath}" does not belong to "${path}"`,
      `Move "${pubPath}" aside (it is rewritten from the private key) and keep it if it may ` +
        "belong to older anchors",
    );
  }
  return { privateKey, publicRaw, keyId: anchorKeyId(publicRaw) };
}

// ---------------------------------------------------------------------------------------------
// The anchor format

type AnchorBody = Omit<Anchor, "sig">;

function signingInput(a: AnchorBody): Uint8Array<ArrayBuffer> {
  return encoder.encode(
    ANCHOR_SIGNING_DOMAIN +
      canonicalJson({
        v: a.v,
        seq: a.seq,
        hash: a.hash,
        time: a.time,
        host: a.host,
        key_id: a.key_id,
      }),
  );
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** An anchor line parsed and checked for form (not the signature); the reason when it is not one. */
function parseAnchorLine(
  bytes: Uint8Array,
): { anchor: Anchor } | { seq: number | null; why: string } {
  if (bytes.length > MAX_ANCHOR_LINE_BYTES) {
    return { seq: null, why: `malformed anchor: longer than ${MAX_ANCHOR_LINE_BYTES} bytes` };
  }
  let v: unknown;
  try {
    v = JSON.parse(strictDecoder.decode(bytes));
  } catch (err) {
    return { seq: null, why: `malformed anchor: ${(err as Error).message}` };
  }
  if (!isPlainObject(v)) return { seq: null, why: "malformed anchor: not a JSON object" };
  const seq = typeof v.seq === "number" && Number.isSafeInteger(v.seq) && v.seq >= 1 ? v.seq : null;
  const bad = (what: string) => ({ seq, why: `malformed anchor: ${what}` });
  if (Object.keys(v).sort().join() !== ANCHOR_KEYS) {
    return bad("fields must be exactly v, seq, hash, time, host, key_id, sig");
  }
  if (v.v !== 1) return bad(`version ${JSON.stringify(v.v)} is not 1`);
  if (seq === null) return bad("seq is not a positive integer");
  if (typeof v.hash !== "string" || !HEX64.test(v.hash)) return bad("hash is not 64 hex digits");
  if (typeof v.time !== "string" || v.time.length === 0 || v.time.length > 64) {
    return bad("time is not a string");
  }
  if (
    typeof v.host !== "string" || v.host.length === 0 || v.host.length > MAX_HOST_CHARS ||
    CONTROL_CHARS.test(v.host)
  ) {
    return bad("host is not a host name");
  }
  if (typeof v.key_id !== "string" || !KEY_ID.test(v.key_id)) {
    return bad("key_id is not 16 hex digits");
  }
  if (typeof v.sig !== "string" || v.sig.length !== 88 || !BASE64.test(v.sig)) {
    return bad("sig is not a base64 Ed25519 signature");
  }
  const anchor = v as unknown as Anchor;
  if (canonicalJson(anchor) !== strictDecoder.decode(bytes)) {
    return { seq, why: "not canonical: the line differs from the form Termada writes" };
  }
  return { anchor };
}

function verifySignature(key: CryptoKey, a: Anchor): Promise<boolean> {
  return crypto.subtle.verify(
    { name: "Ed25519" },
    key,
    new Uint8Array(decodeBase64(a.sig)),
    signingInput(a),
  );
}

// ---------------------------------------------------------------------------------------------
// The service

interface ReceiverState {
  name: string;
  url: string;
  timeoutMs: number;
  client: Deno.HttpClient | undefined;
  /** Every anchor up to this seq is answered (or dropped). Durable in outbox.json. */
  delivered: number;
  dropped: number;
  rejected: number;
  attempts: number;
  lastStatus: number | null;
  lastError: string | null;
  lastDeliveredAt: string | null;
  nextRetryAt: number | null;
  timer: ReturnType<typeof setTimeout> | undefined;
  /** The running delivery loop: never two for one receiver. */
  running: Promise<void> | null;
  abort: AbortController | null;
}

interface Outbox {
  v: 1;
  receivers: Record<string, { delivered: number; dropped: number }>;
}

type Outcome =
  | { kind: "delivered" | "rejected"; status: number; body: unknown; bodyBytes: number }
  | { kind: "retry"; error: string; status: number | null; retryAfterMs: number | null }
  | { kind: "closed" };

function checkOptions(o: AnchorServiceOptions): void {
  if (typeof o.stateDir !== "string" || o.stateDir === "") {
    throw new TypeError("An anchor service needs a state directory");
  }
  if (
    o.everyMs !== null &&
    (!Number.isSafeInteger(o.everyMs) || o.everyMs < 1 || o.everyMs > MAX_EVERY_MS)
  ) {
    throw new RangeError(
      `Anchor option everyMs must be null or 1 to ${MAX_EVERY_MS}: ${o.everyMs}`,
    );
  }
  const seen = new Set<string>();
  for (const r of o.receivers) {
    if (!RECEIVER_NAME.test(r.name)) {
      throw invalidArgument(
        `Cannot use anchor receiver "${r.name}": its name must be a lowercase word`,
        "Use a-z, 0-9, '_' and '-' (at most 64 characters, starting with a letter or digit)",
      );
    }
    if (seen.has(r.name)) {
      throw invalidArgument(`Cannot use anchor receiver "${r.name}": it is listed twice`);
    }
    seen.add(r.name);
    let url: URL;
    try {
      url = new URL(r.url);
    } catch {
      throw invalidArgument(`Cannot use anchor receiver "${r.name}": "${r.url}" is not a URL`);
    }
    if (url.protocol !== "https:") {
      throw invalidArgument(
        `Cannot use anchor receiver "${r.name}": "${r.url}" is not an https:// URL`,
        "Anchors go to receivers over TLS only; give an https:// URL (with ca_file for a " +
          "private CA)",
      );
    }
    const t = r.timeoutMs;
    if (t !== undefined && (!Number.isSafeInteger(t) || t < 1 || t > MAX_TIMEOUT_MS)) {
      throw new RangeError(
        `Anchor receiver "${r.name}": timeoutMs must be 1 to ${MAX_TIMEOUT_MS}: ${t}`,
      );
    }
  }
}

function defaultHost(): string {
  try {
    return Deno.hostname();
  } catch {
    // No sys permission for the host name: the anchor is still valid, only less telling.
    return "unknown";
  }
}

function readOutbox(path: string): Outbox | null | "corrupt" {
  let text: string;
  try {
    text = Deno.readTextFileSync(path);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return null;
    throw err;
  }
  try {
    const v: unknown = JSON.parse(text);
    if (!isPlainObject(v) || v.v !== 1 || !isPlainObject(v.receivers)) return "corrupt";
    const out: Outbox = { v: 1, receivers: {} };
    for (const [name, s] of Object.entries(v.receivers)) {
      if (
        !isPlainObject(s) || !Number.isSafeInteger(s.delivered) || !Number.isSafeInteger(s.dropped)
      ) {
        return "corrupt";
      }
      out.receivers[name] = { delivered: s.delivered as number, dropped: s.dropped as number };
    }
    return out;
  } catch {
    return "corrupt";
  }
}

/** Reads up to MAX_RECEIPT_BODY_BYTES of an answer, then lets the rest go. */
async function readSmallBody(res: Response): Promise<{ body: unknown; bytes: number }> {
  if (res.body === null) return { body: undefined, bytes: 0 };
  const reader = res.body.getReader();
  const parts: Uint8Array[] = [];
  let bytes = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      bytes += value.length;
      if (bytes > MAX_RECEIPT_BODY_BYTES) {
        await reader.cancel();
        return { body: undefined, bytes };
      }
      parts.push(value);
    }
  } finally {
    reader.releaseLock();
  }
  if (bytes === 0) return { body: undefined, bytes };
  const all = new Uint8Array(bytes);
  let at = 0;
  for (const p of parts) {
    all.set(p, at);
    at += p.length;
  }
  try {
    const body: unknown = JSON.parse(strictDecoder.decode(all));
    canonicalJson(body); // too deep or not representable: keep the size only
    return { body, bytes };
  } catch {
    return { body: undefined, bytes };
  }
}

function retryAfterMs(res: Response): number | null {
  const h = res.headers.get("retry-after");
  if (h === null || !/^[0-9]{1,6}$/.test(h.trim())) return null;
  return Number(h.trim()) * 1000;
}

function errorText(err: unknown): string {
  if (err instanceof Error) {
    const cause = err.cause instanceof Error ? `: ${err.cause.message}` : "";
    return `${err.message}${cause}`;
  }
  return String(err);
}

/**
 * Makes, keeps and delivers signed anchors of one audit log. The owner closes it (`close()` is
 * idempotent and awaits everything the service started; `await using` works).
 *
 * Nothing happens in the background until `start()`: then the head is anchored every `everyMs`
 * when it moved, and anchors are delivered as they are made, with back-off after a failure.
 * `anchorNow()` and `flush()` work with or without `start()`.
 */
export class AnchorService {
  readonly #stateDir: string;
  readonly #dir: string;
  readonly #log: AnchorLog;
  readonly #key: SigningKey;
  readonly #host: string;
  readonly #clock: Clock;
  readonly #fetch: typeof fetch;
  readonly #retry: Required<AnchorRetry>;
  readonly #everyMs: number | null;
  readonly #maxPending: number;
  readonly #receivers: ReceiverState[];
  /** Anchors some receiver still waits for, oldest first, plus always the last one made. */
  #retained: Anchor[];
  #lastError: string | null = null;
  #started = false;
  #closed = false;
  #closing: Promise<void> | null = null;
  /** anchorNow calls run one after the other. */
  #anchoring: Promise<unknown> = Promise.resolve();
  #tickTimer: ReturnType<typeof setTimeout> | undefined;
  #ticking: Promise<void> | null = null;

  private constructor(
    o: AnchorServiceOptions,
    key: SigningKey,
    retained: Anchor[],
    receivers: ReceiverState[],
  ) {
    this.#stateDir = o.stateDir;
    this.#dir = join(o.stateDir, ANCHORS_DIR);
    this.#log = o.log;
    this.#key = key;
    this.#host = o.host ?? defaultHost();
    this.#clock = o.clock ?? systemClock;
    this.#fetch = o.fetch ?? fetch;
    this.#retry = {
      baseMs: o.retry?.baseMs ?? DEFAULT_RETRY.baseMs,
      maxMs: o.retry?.maxMs ?? DEFAULT_RETRY.maxMs,
      random: o.retry?.random ?? Math.random,
    };
    this.#everyMs = o.everyMs;
    this.#maxPending = o.maxPending ?? MAX_PENDING_ANCHORS;
    this.#retained = retained;
    this.#receivers = receivers;
  }

  /**
   * Opens the anchors of `stateDir`: loads the signing key (created when missing), the last
   * anchors and what each receiver still waits for. A torn last line of anchors.jsonl (a crash
   * inside a write that never returned) is cut off.
   */
  static async open(options: AnchorServiceOptions): Promise<AnchorService> {
    checkOptions(options);
    const host = options.host;
    if (
      host !== undefined &&
      (host.length === 0 || host.length > MAX_HOST_CHARS || CONTROL_CHARS.test(host))
    ) {
      throw new RangeError(`Anchor option host must be 1 to ${MAX_HOST_CHARS} characters`);
    }
    const mp = options.maxPending;
    if (mp !== undefined && (!Number.isSafeInteger(mp) || mp < 1 || mp > MAX_PENDING_ANCHORS)) {
      throw new RangeError(`Anchor option maxPending must be 1 to ${MAX_PENDING_ANCHORS}: ${mp}`);
    }
    const r = options.retry;
    for (const [k, v] of [["baseMs", r?.baseMs], ["maxMs", r?.maxMs]] as const) {
      if (v !== undefined && (!Number.isSafeInteger(v) || v < 1 || v > 3_600_000)) {
        throw new RangeError(`Anchor retry option ${k} must be 1 to 3600000: ${v}`);
      }
    }
    const key = await loadOrCreateKey(options.stateDir);
    const dir = join(options.stateDir, ANCHORS_DIR);
    if (!exists(dir)) {
      Deno.mkdirSync(dir, { recursive: true, mode: 0o700 });
      syncDir(options.stateDir);
    }
    const st = Deno.lstatSync(dir);
    if (!st.isDirectory) {
      throw invalidArgument(`Cannot keep anchors in "${dir}": it is not a directory`);
    }
    if (st.mode !== null && (st.mode & 0o077) !== 0) Deno.chmodSync(dir, 0o700);

    const retained = readRetained(
      join(dir, ANCHORS_FILE),
      (options.maxPending ?? MAX_PENDING_ANCHORS) + 1,
    );
    const last = retained.at(-1) ?? null;
    const outbox = readOutbox(join(dir, OUTBOX_FILE));
    if (outbox === "corrupt") {
      log.warn("outbox.json is damaged: every kept anchor is delivered again", { dir });
    }
    const receivers: ReceiverState[] = [];
    try {
      for (const rc of options.receivers) {
        let client: Deno.HttpClient | undefined;
        if (rc.caFile !== undefined) {
          let pem: string;
          try {
            pem = Deno.readTextFileSync(rc.caFile);
          } catch (err) {
            throw new TermadaError(
              "INVALID_ARGUMENT",
              `Cannot use anchor receiver "${rc.name}": cannot read its CA file "${rc.caFile}"`,
              {
                cause: err,
                hint: "ca_file must be a readable PEM file",
                details: { file: rc.caFile },
              },
            );
          }
          client = Deno.createHttpClient({ caCerts: [pem] });
        }
        const saved = outbox !== null && outbox !== "corrupt"
          ? outbox.receivers[rc.name]
          : undefined;
        // A receiver seen for the first time gets the latest anchor, not the whole history; a
        // damaged outbox redelivers everything kept (the Idempotency-Key makes that harmless).
        const delivered = saved?.delivered ??
          (outbox === "corrupt" ? 0 : last === null ? 0 : last.seq - 1);
        receivers.push({
          name: rc.name,
          url: rc.url,
          timeoutMs: rc.timeoutMs ?? DEFAULT_RECEIVER_TIMEOUT_MS,
          client,
          delivered,
          dropped: saved?.dropped ?? 0,
          rejected: 0,
          attempts: 0,
          lastStatus: null,
          lastError: null,
          lastDeliveredAt: null,
          nextRetryAt: null,
          timer: undefined,
          running: null,
          abort: null,
        });
      }
    } catch (err) {
      for (const rc of receivers) rc.client?.close();
      throw err;
    }
    const service = new AnchorService(options, key, retained, receivers);
    try {
      service.#bound();
      service.#saveOutbox();
    } catch (err) {
      await service.close();
      throw err;
    }
    return service;
  }

  /** The id of the signing key (the first 16 hex digits of SHA-256 of the raw public key). */
  get keyId(): string {
    return this.#key.keyId;
  }

  /**
   * Anchors the durable head of the log now and returns the anchor once it is fsynced locally
   * (delivery runs in the background after `start()`, or on `flush()`). The head anchored last is
   * not anchored twice: that anchor is returned. A head behind the last anchor (the log was cut
   * or replaced) is refused with AUDIT_UNAVAILABLE.
   */
  anchorNow(): Promise<Anchor> {
    const run = this.#anchoring.then(() => this.#anchor());
    this.#anchoring = run.catch(() => {/* the caller of this anchorNow gets the error */});
    return run;
  }

  async #anchor(): Promise<Anchor> {
    this.#assertOpen();
    // Read the head first, then wait for it: only a record that is on disk is anchored.
    const seq = this.#log.lastSeq;
    const hash = this.#log.lastHash;
    if (seq < 1) {
      throw new TermadaError("NOT_FOUND", "Cannot anchor the audit log: it has no records yet", {
        hint: "An anchor is made once the log has a record",
      });
    }
    const last = this.#retained.at(-1);
    if (last !== undefined) {
      if (seq === last.seq && hash === last.hash) return last;
      if (seq <= last.seq) {
        const err = new TermadaError(
          "AUDIT_UNAVAILABLE",
          `Cannot anchor the audit log: its head (seq ${seq}) is ${
            seq === last.seq ? "not the record" : "behind the record"
          } anchored last (seq ${last.seq}): the log was cut off or replaced`,
          {
            retriable: false,
            hint: "Run `termada audit verify --anchors` and keep the audit and anchors " +
              "directories as they are for inspection",
          },
        );
        this.#lastError = err.message;
        throw err;
      }
    }
    await this.#log.durable(seq);
    this.#assertOpen();
    const body: AnchorBody = {
      v: 1,
      seq,
      hash,
      time: new Date(this.#clock.now()).toISOString(),
      host: this.#host,
      key_id: this.#key.keyId,
    };
    const sig = new Uint8Array(
      await crypto.subtle.sign({ name: "Ed25519" }, this.#key.privateKey, signingInput(body)),
    );
    const anchor: Anchor = { ...body, sig: encodeBase64(sig) };
    this.#assertOpen();
    appendLine(join(this.#dir, ANCHORS_FILE), canonicalJson(anchor));
    this.#retained.push(anchor);
    this.#lastError = null;
    try {
      if (this.#bound()) this.#saveOutbox();
    } catch (err) {
      log.error("cannot save outbox.json after dropping anchors", { error: errorText(err) });
    }
    this.#trim();
    if (this.#started) { for (const r of this.#receivers) this.#kick(r); }
    return anchor;
  }

  /** Drops the oldest anchors of a receiver past MAX_PENDING_ANCHORS; true when any was. */
  #bound(): boolean {
    let changed = false;
    for (const r of this.#receivers) {
      const pending = this.#pending(r);
      const over = pending.length - this.#maxPending;
      if (over <= 0) continue;
      const through = pending[over - 1]!.seq;
      log.warn("too many anchors wait for a receiver: dropped the oldest", {
        receiver: r.name,
        dropped: over,
        through,
      });
      r.delivered = through;
      r.dropped += over;
      changed = true;
    }
    return changed;
  }

  /** Forgets anchors no receiver waits for (the last one stays: it is what the next compares to). */
  #trim(): void {
    let floor = Infinity;
    for (const r of this.#receivers) floor = Math.min(floor, r.delivered);
    const keepFrom = this.#retained.findIndex((a) => a.seq > floor);
    const from = keepFrom < 0 ? this.#retained.length - 1 : keepFrom;
    if (from > 0) this.#retained = this.#retained.slice(Math.min(from, this.#retained.length - 1));
  }

  #pending(r: ReceiverState): Anchor[] {
    return this.#retained.filter((a) => a.seq > r.delivered);
  }

  #saveOutbox(): void {
    const outbox: Outbox = { v: 1, receivers: {} };
    for (const r of this.#receivers) {
      outbox.receivers[r.name] = { delivered: r.delivered, dropped: r.dropped };
    }
    writeAtomic(join(this.#dir, OUTBOX_FILE), JSON.stringify(outbox) + "\n");
  }

  /**
   * Starts the background work: anchoring every `everyMs` when the head moved, and delivery of
   * what is pending (with back-off after failures). Idempotent.
   */
  start(): void {
    this.#assertOpen();
    if (this.#started) return;
    this.#started = true;
    this.#scheduleTick();
    for (const r of this.#receivers) this.#kick(r);
  }

  #scheduleTick(): void {
    if (this.#closed || this.#everyMs === null) return;
    this.#tickTimer = setTimeout(() => {
      this.#tickTimer = undefined;
      this.#ticking = this.#tick().finally(() => {
        this.#ticking = null;
        this.#scheduleTick();
      });
    }, this.#everyMs);
  }

  async #tick(): Promise<void> {
    const last = this.#retained.at(-1);
    const seq = this.#log.lastSeq;
    if (seq < 1 || (last !== undefined && seq === last.seq && this.#log.lastHash === last.hash)) {
      return;
    }
    try {
      await this.anchorNow();
    } catch (err) {
      if (this.#closed) return;
      const message = errorText(err);
      // Logged once per distinct failure, not on every tick.
      if (message !== this.#lastError) log.error("cannot anchor the audit log", { error: message });
      this.#lastError = message;
    }
  }

  /**
   * Tries to deliver everything pending now, to every receiver, skipping back-off waits; resolves
   * when each receiver is done or has failed (failures are in `status()`, never thrown).
   */
  async flush(): Promise<void> {
    this.#assertOpen();
    await Promise.all(this.#receivers.map(async (r) => {
      if (r.running !== null) await r.running;
      if (this.#closed) return;
      clearTimeout(r.timer);
      r.timer = undefined;
      r.nextRetryAt = null;
      if (this.#pending(r).length > 0) await this.#run(r);
    }));
  }

  /** Starts the receiver's loop unless it runs or waits for its back-off. */
  #kick(r: ReceiverState): void {
    if (this.#closed || r.running !== null || r.timer !== undefined) return;
    if (this.#pending(r).length === 0) return;
    this.#run(r);
  }

  #run(r: ReceiverState): Promise<void> {
    if (r.running !== null) return r.running;
    r.running = this.#drain(r).catch((err) => {
      log.error("anchor delivery stopped", { receiver: r.name, error: errorText(err) });
    }).finally(() => {
      r.running = null;
    });
    return r.running;
  }

  /** Delivers the pending anchors of one receiver in seq order, one request at a time. */
  async #drain(r: ReceiverState): Promise<void> {
    while (!this.#closed) {
      const next = this.#retained.find((x) => x.seq > r.delivered);
      if (next === undefined) return;
      const outcome = await this.#post(r, next);
      if (outcome.kind === "closed") return;
      if (outcome.kind === "retry") {
        r.attempts++;
        r.lastStatus = outcome.status;
        r.lastError = outcome.error;
        this.#backOff(r, outcome.retryAfterMs);
        return;
      }
      const time = new Date(this.#clock.now()).toISOString();
      try {
        // The receipt first, then the cursor: a crash between the two redelivers (harmless with
        // the Idempotency-Key), it never loses what a receiver answered.
        appendLine(
          join(this.#dir, RECEIPTS_FILE),
          canonicalJson({
            time,
            receiver: r.name,
            seq: next.seq,
            key_id: next.key_id,
            status: outcome.status,
            outcome: outcome.kind,
            body: outcome.body,
            body_bytes: outcome.bodyBytes,
          }),
        );
        const before = r.delivered;
        r.delivered = Math.max(r.delivered, next.seq);
        try {
          this.#saveOutbox();
        } catch (err) {
          r.delivered = before;
          throw err;
        }
      } catch (err) {
        r.attempts++;
        r.lastError = `cannot record the answer: ${errorText(err)}`;
        log.error("cannot record an anchor receipt", { receiver: r.name, error: errorText(err) });
        this.#backOff(r, null);
        return;
      }
      r.attempts = 0;
      r.lastStatus = outcome.status;
      if (outcome.kind === "delivered") {
        r.lastError = null;
        r.lastDeliveredAt = time;
      } else {
        r.rejected++;
        r.lastError = `anchor ${next.seq} rejected with HTTP ${outcome.status}`;
        log.warn("an anchor receiver rejected an anchor", {
          receiver: r.name,
          seq: next.seq,
          status: outcome.status,
        });
      }
      this.#trim();
    }
  }

  #backOff(r: ReceiverState, retryAfter: number | null): void {
    const { baseMs, maxMs, random } = this.#retry;
    const full = Math.min(maxMs, baseMs * 2 ** Math.min(r.attempts - 1, 40));
    // Equal jitter: half fixed, half random, so receivers that failed together spread out.
    let wait = full / 2 + random() * (full / 2);
    if (retryAfter !== null) wait = Math.max(wait, Math.min(maxMs, retryAfter));
    wait = Math.max(1, Math.round(wait));
    if (!this.#started || this.#closed) {
      r.nextRetryAt = null;
      return;
    }
    r.nextRetryAt = this.#clock.now() + wait;
    r.timer = setTimeout(() => {
      r.timer = undefined;
      r.nextRetryAt = null;
      this.#kick(r);
    }, wait);
  }

  async #post(r: ReceiverState, a: Anchor): Promise<Outcome> {
    const abort = new AbortController();
    r.abort = abort;
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      abort.abort();
    }, r.timeoutMs);
    try {
      const init: RequestInit & { client?: Deno.HttpClient } = {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "idempotency-key": `${a.key_id}:${a.seq}`,
        },
        body: canonicalJson(a),
        redirect: "manual",
        signal: abort.signal,
      };
      if (r.client !== undefined) init.client = r.client;
      const res = await this.#fetch(r.url, init);
      const { body, bytes } = await readSmallBody(res);
      const status = res.status;
      if (status >= 200 && status < 300) {
        return { kind: "delivered", status, body, bodyBytes: bytes };
      }
      if (status >= 500 || status === 408 || status === 425 || status === 429) {
        return {
          kind: "retry",
          status,
          error: `HTTP ${status} from "${r.url}"`,
          retryAfterMs: retryAfterMs(res),
        };
      }
      return { kind: "rejected", status, body, bodyBytes: bytes };
    } catch (err) {
      if (this.#closed) return { kind: "closed" };
      const error = timedOut
        ? `no answer from "${r.url}" within ${r.timeoutMs} ms`
        : `cannot reach "${r.url}": ${errorText(err)}`;
      return { kind: "retry", status: null, error, retryAfterMs: null };
    } finally {
      clearTimeout(timer);
      r.abort = null;
    }
  }

  /** Key id, last anchor, and per receiver: pending, delivered, dropped, last error, next retry. */
  status(): AnchorStatus {
    const last = this.#retained.at(-1);
    return {
      key_id: this.#key.keyId,
      last_anchor: last === undefined ? null : { seq: last.seq, hash: last.hash, time: last.time },
      last_error: this.#lastError,
      receivers: this.#receivers.map((r) => ({
        name: r.name,
        url: r.url,
        pending: this.#pending(r).length,
        delivered_through: r.delivered,
        dropped: r.dropped,
        rejected: r.rejected,
        attempts: r.attempts,
        last_status: r.lastStatus,
        last_error: r.lastError,
        last_delivered_at: r.lastDeliveredAt,
        next_retry: r.nextRetryAt === null ? null : new Date(r.nextRetryAt).toISOString(),
      })),
    };
  }

  #assertOpen(): void {
    if (this.#closed) {
      throw new TermadaError("INVALID_ARGUMENT", `The anchors of "${this.#stateDir}" are closed`, {
        hint: "Open the anchor service again",
      });
    }
  }

  /**
   * Stops the timers, aborts requests in flight (their anchors stay pending, durably) and waits
   * for everything the service started; then closes the TLS clients. Idempotent.
   */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#tickTimer);
    this.#tickTimer = undefined;
    for (const r of this.#receivers) {
      clearTimeout(r.timer);
      r.timer = undefined;
      r.nextRetryAt = null;
      r.abort?.abort();
    }
    await this.#ticking;
    await this.#anchoring;
    await Promise.all(this.#receivers.map((r) => r.running));
    for (const r of this.#receivers) r.client?.close();
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}

/** The anchors open keeps: the last `keep` lines; a torn last line is cut off. */
function readRetained(path: string, keep: number): Anchor[] {
  if (!exists(path)) return [];
  const { lines, goodBytes } = lastLines(path, keep);
  const size = Deno.statSync(path).size;
  if (goodBytes < size) {
    log.warn("cut a torn last anchor (a write that never returned)", {
      file: path,
      bytes: size - goodBytes,
    });
    const file = Deno.openSync(path, { write: true });
    try {
      file.truncateSync(goodBytes);
      file.syncDataSync();
    } finally {
      file.close();
    }
  }
  const out: Anchor[] = [];
  for (const bytes of lines) {
    const parsed = parseAnchorLine(bytes);
    if ("anchor" in parsed) {
      const prev = out.at(-1);
      if (prev === undefined || parsed.anchor.seq > prev.seq) out.push(parsed.anchor);
      else log.warn("skipped an anchor out of order", { file: path, seq: parsed.anchor.seq });
    } else {
      log.warn("skipped a damaged anchor line (termada audit verify --anchors shows it)", {
        file: path,
        reason: parsed.why,
      });
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Offline verification

/**
 * Checks the anchors of `stateDir` against the audit log in `auditDir`, offline and read-only:
 * every line is a canonical anchor signed by the anchor key (`anchor_key.pub`, or
 * `options.publicKey`), seqs strictly increase, and the record with each anchored seq is in the
 * verified chain with exactly the anchored hash. Anchors of records pruned behind the checkpoint
 * are counted as `pruned`, not as failures. NOT_FOUND when there is no public key.
 */
export async function verifyAnchors(
  stateDir: string,
  auditDir: string,
  options: VerifyAnchorsOptions = {},
): Promise<AnchorVerifyResult> {
  const pubPath = join(stateDir, ANCHOR_PUBLIC_KEY_FILE);
  let raw: Uint8Array;
  if (options.publicKey !== undefined) {
    raw = decodePublicKey(options.publicKey, "given");
  } else {
    let text: string;
    try {
      text = Deno.readTextFileSync(pubPath);
    } catch (err) {
      if (err instanceof Deno.errors.NotFound) {
        throw new TermadaError("NOT_FOUND", `No anchor key "${pubPath}": no anchors were made`, {
          hint: "The daemon makes anchors when audit.anchors is configured; or pass the public " +
            "key kept elsewhere",
        });
      }
      throw err;
    }
    raw = decodePublicKey(text, `"${pubPath}"`);
  }
  const keyId = anchorKeyId(raw);
  const key = await crypto.subtle.importKey(
    "raw",
    new Uint8Array(raw),
    { name: "Ed25519" },
    false,
    [
      "verify",
    ],
  );
  const anchorsFile = options.anchorsFile ?? join(stateDir, ANCHORS_DIR, ANCHORS_FILE);

  const failures: AnchorVerifyFailure[] = [];
  const good: { anchor: Anchor; line: number }[] = [];
  let lines = 0;
  let torn: AnchorVerifyResult["torn_tail"];
  if (exists(anchorsFile)) {
    for (const l of fileLines(anchorsFile, MAX_ANCHOR_LINE_BYTES)) {
      if (l.kind === "torn") {
        torn = { line: l.line, bytes: l.bytes };
        continue;
      }
      lines++;
      const parsed = parseAnchorLine(l.bytes);
      if (!("anchor" in parsed)) {
        failures.push({ seq: parsed.seq, line: l.line, reason: parsed.why });
        continue;
      }
      const a = parsed.anchor;
      if (a.key_id !== keyId) {
        failures.push({
          seq: a.seq,
          line: l.line,
          reason: `key mismatch: signed by key ${a.key_id}, not by ${keyId}`,
        });
        continue;
      }
      if (!(await verifySignature(key, a))) {
        failures.push({
          seq: a.seq,
          line: l.line,
          reason: "bad signature: the anchor was changed or not signed by this key",
        });
        continue;
      }
      const prev = good.at(-1);
      if (prev !== undefined && a.seq <= prev.anchor.seq) {
        failures.push({
          seq: a.seq,
          line: l.line,
          reason: `out of order: seq ${a.seq} follows seq ${prev.anchor.seq}`,
        });
        continue;
      }
      good.push({ anchor: a, line: l.line });
    }
  }

  const audit = auditHashesAt(auditDir, good.map((g) => g.anchor.seq));
  const v = audit.verify;
  let checked = 0;
  let pruned = 0;
  for (const { anchor: a, line } of good) {
    const fail = (reason: string) => failures.push({ seq: a.seq, line, reason });
    let found: string | undefined;
    if (audit.pruned !== null && a.seq < audit.pruned.seq) {
      pruned++;
      continue;
    } else if (audit.pruned !== null && a.seq === audit.pruned.seq) {
      found = audit.pruned.hash; // the checkpoint keeps the hash of the last pruned record
    } else if (a.seq <= v.head.seq) {
      found = audit.hashes.get(a.seq);
      if (found === undefined) {
        fail(`record not read: record ${a.seq} was not found (was the log pruned meanwhile?)`);
        continue;
      }
    } else if (v.ok) {
      fail(
        `record missing: the audit log ends at seq ${v.head.seq}: records up to the anchored ` +
          "one were cut off, or the log was replaced",
      );
      continue;
    } else {
      fail(
        `not checkable: the audit chain is broken at seq ${v.firstBroken?.seq ?? "-"} ` +
          `(${v.firstBroken?.reason ?? "unknown"})`,
      );
      continue;
    }
    if (found !== a.hash) {
      fail(
        `hash mismatch: record ${a.seq} has hash ${found}, the anchor says ${a.hash}: the log ` +
          "was rewritten",
      );
      continue;
    }
    checked++;
  }
  failures.sort((x, y) => x.line - y.line);
  const last = good.at(-1)?.anchor;
  return {
    ok: failures.length === 0 && v.ok,
    anchors: lines,
    checked,
    pruned,
    failures,
    key_id: keyId,
    receipts: countLines(join(stateDir, ANCHORS_DIR, RECEIPTS_FILE)),
    last_anchor: last === undefined ? null : { seq: last.seq, hash: last.hash, time: last.time },
    audit: {
      ok: v.ok,
      head: v.head,
      ...(v.firstBroken === undefined ? {} : { first_broken: v.firstBroken }),
    },
    ...(torn === undefined ? {} : { torn_tail: torn }),
  };
}
