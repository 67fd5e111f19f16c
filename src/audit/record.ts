/**
 * The on-disk format shared by the writer (log.ts) and the verifier (verify.ts): segment names, the
 * record line, its hash, the checkpoint file, and the check of one line against the chain so far.
 * Both sides use the same check, so what `open` accepts and what `verifyAudit` accepts cannot drift.
 */
import { createHash } from "node:crypto";
import { canonicalJson } from "./canonical.ts";

export type AuditActor = { kind: "agent" | "operator" | "system"; id: string };

/** One line of a segment, as written and as read back. */
export interface AuditRecord {
  seq: number;
  /** ISO-8601 UTC, from the log's clock. */
  time: string;
  actor: AuditActor;
  event: string;
  /** Redacted before hashing: exactly what is on disk. */
  data: Record<string, unknown>;
  /** Hash of the record before (GENESIS for the first record of a log). */
  prev: string;
  /** sha256 hex of `prev + "\n" + canonical JSON of {seq, time, actor, event, data}`. */
  hash: string;
}

/** The prev of record 1 when no checkpoint says otherwise. */
export const GENESIS = "0".repeat(64);
export const CHECKPOINT_FILE = "checkpoint.json";
/** Written, synced, then renamed over CHECKPOINT_FILE; a leftover is ignored. */
export const CHECKPOINT_TMP = "checkpoint.json.tmp";
/** Event of the record the log appends when it prunes (confirms checkpoint.json). */
export const CHECKPOINT_EVENT = "audit.checkpoint";
/** Event of the record the log appends after discarding a torn last line at open. */
export const RECOVERED_EVENT = "audit.recovered";
/** Actor of the records the log writes itself. */
export const AUDIT_ACTOR: AuditActor = Object.freeze({ kind: "system", id: "audit" });
/** Events starting with this are written by the log itself only. */
export const RESERVED_EVENT_PREFIX = "audit.";

export const ACTOR_KINDS: readonly string[] = ["agent", "operator", "system"];
export const MAX_ACTOR_ID_LENGTH = 256;
export const MAX_EVENT_LENGTH = 64;
export const EVENT_PATTERN = /^[a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*)*$/;

const HEX64 = /^[0-9a-f]{64}$/;
const SEGMENT_NAME = /^audit-([0-9]{6,15})\.jsonl$/;
const CHECKPOINT_DOMAIN = "termada-audit-checkpoint\n";

export const encoder: TextEncoder = new TextEncoder();
/** Fatal: a byte that is not UTF-8 is damage, not a character. */
export const strictDecoder: TextDecoder = new TextDecoder("utf-8", {
  fatal: true,
  ignoreBOM: true,
});

export function sha256Hex(input: string | Uint8Array): string {
  const h = createHash("sha256");
  if (typeof input === "string") h.update(input, "utf8");
  else h.update(input);
  return h.digest("hex");
}

/** `audit-000001.jsonl`: six digits at least, more when needed. */
export function segmentName(n: number): string {
  return `audit-${String(n).padStart(6, "0")}.jsonl`;
}

/** The number of a segment file name, or null for any other name (including non-canonical ones). */
export function segmentNumber(name: string): number | null {
  const m = SEGMENT_NAME.exec(name);
  if (!m) return null;
  const n = Number(m[1]);
  return n >= 1 && segmentName(n) === name ? n : null;
}

/** The pieces of a record that are written as JSON text. */
export interface RecordParts {
  seq: number;
  time: string;
  actor: AuditActor;
  event: string;
  /** Canonical JSON of the data object. */
  dataJson: string;
}

function actorJson(actor: AuditActor): string {
  return `{"id":${JSON.stringify(actor.id)},"kind":${JSON.stringify(actor.kind)}}`;
}

/** sha256(prev + "\n" + canonical JSON of {seq, time, actor, event, data}). */
export function recordHash(prev: string, p: RecordParts): string {
  const body = `{"actor":${actorJson(p.actor)},"data":${p.dataJson},` +
    `"event":${JSON.stringify(p.event)},"seq":${p.seq},"time":${JSON.stringify(p.time)}}`;
  return sha256Hex(`${prev}\n${body}`);
}

/** The line (without newline): fields in the documented order, nested objects canonical. */
export function recordLine(p: RecordParts, prev: string, hash: string): string {
  return `{"seq":${p.seq},"time":${JSON.stringify(p.time)},"actor":${actorJson(p.actor)},` +
    `"event":${JSON.stringify(p.event)},"data":${p.dataJson},"prev":"${prev}","hash":"${hash}"}`;
}

/** Chain position: the last good record (seq 0 and GENESIS before the first). */
export interface ChainHead {
  seq: number;
  hash: string;
}

export type LineCheck =
  | { ok: true; record: AuditRecord }
  | { ok: false; seq: number; reason: string };

const RECORD_KEYS = ["actor", "data", "event", "hash", "prev", "seq", "time"].join();

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** Why a parsed line is not a record, or null when its shape is right. */
function shapeProblem(v: unknown): string | null {
  if (!isPlainObject(v)) return "not a JSON object";
  if (Object.keys(v).sort().join() !== RECORD_KEYS) {
    return "fields must be exactly seq, time, actor, event, data, prev, hash";
  }
  if (typeof v.seq !== "number" || !Number.isSafeInteger(v.seq) || v.seq < 1) {
    return "seq is not a positive integer";
  }
  if (typeof v.time !== "string" || v.time.length > 64) return "time is not a string";
  const a = v.actor;
  if (
    !isPlainObject(a) || Object.keys(a).sort().join() !== "id,kind" ||
    typeof a.kind !== "string" || !ACTOR_KINDS.includes(a.kind) || typeof a.id !== "string"
  ) {
    return "actor is not {kind, id}";
  }
  if (typeof v.event !== "string") return "event is not a string";
  if (!isPlainObject(v.data)) return "data is not an object";
  if (typeof v.prev !== "string" || !HEX64.test(v.prev)) return "prev is not 64 hex digits";
  if (typeof v.hash !== "string" || !HEX64.test(v.hash)) return "hash is not 64 hex digits";
  return null;
}

/**
 * Checks one complete line (no newline) as the record after `head`: well-formed, in canonical
 * form (so no byte can change without changing the hash input), the next seq, linked to the head,
 * and hashed right. On failure `seq` is the seq expected at this position, except for prev and
 * hash mismatches, which name the record itself.
 */
export function checkLine(bytes: Uint8Array, head: ChainHead): LineCheck {
  const expected = head.seq + 1;
  let text: string;
  try {
    text = strictDecoder.decode(bytes);
  } catch {
    return { ok: false, seq: expected, reason: "malformed record: not UTF-8" };
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    const why = text.length === 0 ? "an empty line" : (err as Error).message;
    return { ok: false, seq: expected, reason: `malformed record: ${why}` };
  }
  const problem = shapeProblem(parsed);
  if (problem !== null) return { ok: false, seq: expected, reason: `malformed record: ${problem}` };
  const r = parsed as AuditRecord;
  let dataJson: string;
  try {
    dataJson = canonicalJson(r.data);
  } catch (err) {
    // Too deep, or a number JSON.parse read as Infinity: never written by Termada.
    return { ok: false, seq: expected, reason: `malformed record: ${(err as Error).message}` };
  }
  const parts: RecordParts = { seq: r.seq, time: r.time, actor: r.actor, event: r.event, dataJson };
  if (recordLine(parts, r.prev, r.hash) !== text) {
    return {
      ok: false,
      seq: expected,
      reason: "not canonical: the line differs from the form Termada writes (edited by hand?)",
    };
  }
  if (r.seq !== expected) {
    const reason = r.seq > expected
      ? `record missing: expected seq ${expected}, found seq ${r.seq}`
      : `out of order: expected seq ${expected}, found seq ${r.seq} again`;
    return { ok: false, seq: expected, reason };
  }
  if (r.prev !== head.hash) {
    return {
      ok: false,
      seq: r.seq,
      reason: head.seq === 0
        ? "prev mismatch: the first record does not start from the genesis hash"
        : `prev mismatch: it does not link to the hash of record ${head.seq}`,
    };
  }
  if (recordHash(r.prev, parts) !== r.hash) {
    return { ok: false, seq: r.seq, reason: "hash mismatch: the record or its hash was changed" };
  }
  return { ok: true, record: r };
}

/**
 * Checks a line on its own (no chain position known): well-formed, canonical and hashed right. Used
 * where only the end of a segment is read (the segment before the one `open` continues).
 */
export function checkLineAlone(bytes: Uint8Array): LineCheck {
  let head: ChainHead = { seq: 0, hash: GENESIS };
  try {
    const v: unknown = JSON.parse(strictDecoder.decode(bytes));
    if (
      isPlainObject(v) && typeof v.seq === "number" && Number.isSafeInteger(v.seq) && v.seq >= 1 &&
      typeof v.prev === "string"
    ) {
      head = { seq: v.seq - 1, hash: v.prev };
    }
  } catch {
    // Not JSON: checkLine below reports it with the same words as everywhere else.
  }
  return checkLine(bytes, head);
}

/** checkpoint.json: where the retained chain starts after older segments were pruned. */
export interface Checkpoint {
  /** seq of the last pruned record. */
  seq: number;
  /** hash of the last pruned record: the prev of the first retained one. */
  hash: string;
  /** Segment that held the last pruned record (always segmentName(prunedThrough)). */
  segment: string;
  /** Segments 1..prunedThrough are gone; the chain resumes in prunedThrough + 1. */
  prunedThrough: number;
  /** seq of the audit.checkpoint record that announced this checkpoint in the chain. */
  recordSeq: number;
}

/** The data of the audit.checkpoint record for a checkpoint (canonical JSON). */
export function checkpointDataJson(c: Omit<Checkpoint, "recordSeq">): string {
  return canonicalJson({
    seq: c.seq,
    hash: c.hash,
    segment: c.segment,
    prunedThrough: c.prunedThrough,
  });
}

function checkpointCheck(c: Checkpoint): string {
  return sha256Hex(
    CHECKPOINT_DOMAIN +
      canonicalJson({
        seq: c.seq,
        hash: c.hash,
        segment: c.segment,
        prunedThrough: c.prunedThrough,
        recordSeq: c.recordSeq,
      }),
  );
}

/** The file text (one line) of a checkpoint, with its check hash. */
export function checkpointText(c: Checkpoint): string {
  return `{"seq":${c.seq},"hash":"${c.hash}","segment":${JSON.stringify(c.segment)},` +
    `"prunedThrough":${c.prunedThrough},"recordSeq":${c.recordSeq},` +
    `"check":"${checkpointCheck(c)}"}\n`;
}

/** Parses checkpoint.json: the checkpoint, or why it is not one. */
export function parseCheckpoint(bytes: Uint8Array): Checkpoint | string {
  let v: unknown;
  try {
    v = JSON.parse(strictDecoder.decode(bytes));
  } catch (err) {
    return `checkpoint invalid: ${(err as Error).message}`;
  }
  if (!isPlainObject(v)) return "checkpoint invalid: not a JSON object";
  const int = (x: unknown, min: number): x is number =>
    typeof x === "number" && Number.isSafeInteger(x) && x >= min;
  if (
    Object.keys(v).sort().join() !== "check,hash,prunedThrough,recordSeq,segment,seq" ||
    !int(v.seq, 1) || typeof v.hash !== "string" || !HEX64.test(v.hash) ||
    !int(v.prunedThrough, 1) || v.segment !== segmentName(v.prunedThrough) ||
    !int(v.recordSeq, v.seq + 1) || typeof v.check !== "string"
  ) {
    return "checkpoint invalid: fields are missing, extra or out of range";
  }
  const c: Checkpoint = {
    seq: v.seq,
    hash: v.hash,
    segment: v.segment,
    prunedThrough: v.prunedThrough,
    recordSeq: v.recordSeq as number,
  };
  if (checkpointCheck(c) !== v.check) {
    return "checkpoint invalid: its check hash does not match (the file was edited)";
  }
  return c;
}

/**
 * Whether `record` (at checkpoint.recordSeq) is the audit.checkpoint record that confirms `c`; the
 * reason when not. The failure's seq is the first record the checkpoint would hide or expose.
 */
export function confirmCheckpoint(
  c: Checkpoint,
  record: AuditRecord,
): { ok: true } | { ok: false; seq: number; reason: string } {
  const isCheckpoint = record.event === CHECKPOINT_EVENT && record.actor.kind === "system" &&
    record.actor.id === AUDIT_ACTOR.id;
  if (isCheckpoint && canonicalJson(record.data) === checkpointDataJson(c)) return { ok: true };
  const recorded = isCheckpoint && typeof record.data.seq === "number" ? record.data.seq : null;
  if (recorded === null) {
    return {
      ok: false,
      seq: record.seq,
      reason: `checkpoint not confirmed: ${CHECKPOINT_FILE} names record ${record.seq} as its ` +
        `${CHECKPOINT_EVENT} record, but that record is a "${record.event}"`,
    };
  }
  return {
    ok: false,
    seq: Math.min(recorded, c.seq) + 1,
    reason:
      `checkpoint forged: ${CHECKPOINT_FILE} says records through seq ${c.seq} were pruned, ` +
      `but record ${record.seq} says pruning went through seq ${recorded}`,
  };
}

/** Where a segment's walk ended. */
export interface SegmentWalk {
  /** The last good record (unchanged when there was none). */
  head: ChainHead;
  /** Good records in this segment. */
  records: number;
  /** Bytes of the good lines, newlines included: where a torn tail starts. */
  goodBytes: number;
  /** Trailing bytes without a newline: a write that never completed. */
  torn: { line: number; bytes: number } | null;
  /** The first bad line; nothing after it was checked. */
  broken: { seq: number; line: number; reason: string } | null;
}

/** A check run on each good record (e.g. the checkpoint confirmation); a failure stops the walk. */
export type RecordHook = (record: AuditRecord) => { seq: number; reason: string } | null;

const LF = 0x0a;

/**
 * Checks every complete line of one segment, continuing from `head`. Stops at the first bad line.
 * Trailing bytes without a newline are reported as `torn`, not judged: whether that is tolerated
 * depends on the segment being the last one.
 */
export function walkSegment(bytes: Uint8Array, head: ChainHead, hook?: RecordHook): SegmentWalk {
  const walk: SegmentWalk = { head, records: 0, goodBytes: 0, torn: null, broken: null };
  let start = 0;
  let line = 0;
  while (start < bytes.length) {
    line++;
    const end = bytes.indexOf(LF, start);
    if (end < 0) {
      walk.torn = { line, bytes: bytes.length - start };
      return walk;
    }
    const check = checkLine(bytes.subarray(start, end), walk.head);
    if (!check.ok) {
      walk.broken = { seq: check.seq, line, reason: check.reason };
      return walk;
    }
    const hooked = hook?.(check.record) ?? null;
    if (hooked !== null) {
      walk.broken = { ...hooked, line };
      return walk;
    }
    walk.head = { seq: check.record.seq, hash: check.record.hash };
    walk.records++;
    walk.goodBytes = end + 1;
    start = end + 1;
  }
  return walk;
}
