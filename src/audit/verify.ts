/**
 * The whole-directory check behind `termada audit verify`: every retained segment in order, every
 * hash and prev link, seq continuity across segment boundaries, checkpoint.json and the chain
 * record that confirms it, no missing, renamed or extra segment. Read-only: it never repairs.
 */
import { TermadaError } from "../shared/mod.ts";
import { listDir, type Listing } from "./_files.ts";
import {
  type ChainHead,
  type Checkpoint,
  CHECKPOINT_FILE,
  confirmCheckpoint,
  GENESIS,
  parseCheckpoint,
  type RecordHook,
  segmentName,
  walkSegment,
} from "./record.ts";

export interface VerifyResult {
  ok: boolean;
  /** Records checked and found good (from the checkpoint on, or from the genesis). */
  records: number;
  /** Segments read. */
  segments: number;
  /**
   * The first problem. `seq` is the record at fault (for a missing record or segment: the first
   * seq that is missing); null when the problem is not a record (checkpoint.json, a stray file).
   * `line` is 1-based in `segment`; 0 when the problem is the file as a whole.
   */
  firstBroken?: { seq: number | null; segment: string; line: number; reason: string };
  /** The last good record: compare it with an anchor kept elsewhere to detect a cut-off tail. */
  head: { seq: number; hash: string };
  /**
   * A last line without its newline at the end of the last segment: an append that crashed before
   * it returned (so nothing ran on its behalf). Tolerated: `ok` stays true; the next open cuts it
   * off and records an `audit.recovered` record.
   */
  tornTail?: { segment: string; line: number; bytes: number; reason: "truncated record" };
}

/** Verifies the audit log in `dir`; NOT_FOUND when there is no such directory. */
export function verifyAudit(dir: string): VerifyResult {
  let listing: Listing;
  try {
    listing = listDir(dir);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) {
      throw new TermadaError("NOT_FOUND", `No audit directory "${dir}"`, {
        hint: "Pass the audit directory under the state directory",
      });
    }
    throw err;
  }

  let head: ChainHead = { seq: 0, hash: GENESIS };
  let records = 0;
  let segments = 0;
  const fail = (seq: number | null, segment: string, line: number, reason: string) => ({
    ok: false,
    records,
    segments,
    head,
    firstBroken: { seq, segment, line, reason },
  });

  let checkpoint: Checkpoint | null = null;
  if (listing.checkpoint) {
    let parsed: Checkpoint | string;
    try {
      parsed = parseCheckpoint(Deno.readFileSync(`${dir}/${CHECKPOINT_FILE}`));
    } catch (err) {
      parsed = `checkpoint invalid: ${(err as Error).message}`;
    }
    if (typeof parsed === "string") return fail(null, CHECKPOINT_FILE, 1, parsed);
    checkpoint = parsed;
    head = { seq: parsed.seq, hash: parsed.hash };
  }

  // Segments up to the checkpoint are leftovers of an interrupted prune: covered, not read.
  const firstSegment = checkpoint === null ? 1 : checkpoint.prunedThrough + 1;
  const live = listing.segments.filter((n) => n >= firstSegment).sort((a, b) => a - b);
  const hook: RecordHook | undefined = checkpoint === null ? undefined : (record) => {
    if (record.seq !== checkpoint.recordSeq) return null;
    const confirmed = confirmCheckpoint(checkpoint, record);
    return confirmed.ok ? null : confirmed;
  };

  let tornTail: VerifyResult["tornTail"];
  let lastName = segmentName(firstSegment);
  let lastLines = 0;
  for (let i = 0; i < live.length; i++) {
    const expected = firstSegment + i;
    const name = segmentName(expected);
    if (live[i] !== expected) {
      return fail(
        head.seq + 1,
        name,
        0,
        `missing segment: "${name}" is not in the directory (removed or renamed?)`,
      );
    }
    const bytes = Deno.readFileSync(`${dir}/${name}`);
    const isLast = i === live.length - 1;
    segments++;
    if (bytes.length === 0 && !isLast) {
      return fail(head.seq + 1, name, 0, "empty segment: only the last segment may be empty");
    }
    const walk = walkSegment(bytes, head, hook);
    records += walk.records;
    head = walk.head;
    if (walk.broken !== null) {
      return fail(walk.broken.seq, name, walk.broken.line, walk.broken.reason);
    }
    if (walk.torn !== null) {
      if (!isLast) {
        return fail(
          head.seq + 1,
          name,
          walk.torn.line,
          "truncated record: a segment before the last one ends inside a record",
        );
      }
      tornTail = {
        segment: name,
        line: walk.torn.line,
        bytes: walk.torn.bytes,
        reason: "truncated record",
      };
    }
    lastName = name;
    lastLines = walk.records;
  }

  if (checkpoint !== null) {
    if (live.length === 0) {
      return fail(
        head.seq + 1,
        lastName,
        0,
        `missing segment: ${CHECKPOINT_FILE} continues in "${lastName}", which is not in the ` +
          "directory",
      );
    }
    if (checkpoint.recordSeq > head.seq) {
      return fail(
        head.seq + 1,
        lastName,
        lastLines + 1,
        `truncated tail: ${CHECKPOINT_FILE} was announced by record ${checkpoint.recordSeq}, ` +
          `but the log ends at seq ${head.seq}`,
      );
    }
  }
  const stray = listing.unexpected[0];
  if (stray !== undefined) {
    return fail(
      null,
      stray,
      0,
      `unexpected file: "${stray}" is not a segment Termada writes (renamed or copied in?)`,
    );
  }
  return { ok: true, records, segments, head, ...(tornTail === undefined ? {} : { tornTail }) };
}
