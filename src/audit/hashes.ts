/**
 * The hashes of chosen records of an audit directory (for checking anchors against the chain):
 * the chain is verified first, then read again for the records asked for; those pruned behind a
 * checkpoint are reported as pruned, with the checkpoint's own record.
 */

import { listDir } from "./_files.ts";
import {
  type ChainHead,
  type Checkpoint,
  CHECKPOINT_FILE,
  GENESIS,
  parseCheckpoint,
  segmentName,
  walkSegment,
} from "./record.ts";
import { verifyAudit, type VerifyResult } from "./verify.ts";

/** The audit hashes of some records, read from the part of the chain that verifies. */
export interface AuditHashes {
  /** The whole-directory check, as `verifyAudit` returns it. */
  verify: VerifyResult;
  /** The last pruned record (from a checkpoint.json that verified), or null: earlier ones are gone. */
  pruned: { seq: number; hash: string } | null;
  /** seq → hash of the wanted records up to `verify.head.seq` (records past a break are absent). */
  hashes: Map<number, string>;
}

/**
 * Verifies the log in `dir` (as `verifyAudit`) and returns the hash of each wanted record that lies
 * in the verified part of the chain: the check behind signed anchors kept elsewhere. Read-only.
 * The chain is read twice (the verdict, then the lookup); a writer that prunes in between can make
 * a wanted record absent, never a wrong hash.
 */
export function auditHashesAt(dir: string, seqs: Iterable<number>): AuditHashes {
  const verify = verifyAudit(dir);
  const wanted = new Set(seqs);
  const hashes = new Map<number, string>();
  const listing = listDir(dir);
  let checkpoint: Checkpoint | null = null;
  if (listing.checkpoint) {
    const parsed = parseCheckpoint(Deno.readFileSync(`${dir}/${CHECKPOINT_FILE}`));
    // A checkpoint verify refused: nothing after it can be trusted, so nothing is looked up.
    if (typeof parsed === "string") return { verify, pruned: null, hashes };
    checkpoint = parsed;
  }
  let head: ChainHead = checkpoint ?? { seq: 0, hash: GENESIS };
  const first = checkpoint === null ? 1 : checkpoint.prunedThrough + 1;
  const live = listing.segments.filter((n) => n >= first).sort((a, b) => a - b);
  const limit = verify.head.seq;
  for (const n of live) {
    if (head.seq >= limit) break;
    const walk = walkSegment(Deno.readFileSync(`${dir}/${segmentName(n)}`), head, (record) => {
      if (record.seq <= limit && wanted.has(record.seq)) hashes.set(record.seq, record.hash);
      return null;
    });
    head = walk.head;
    if (walk.broken !== null) break;
  }
  const pruned = checkpoint === null ? null : { seq: checkpoint.seq, hash: checkpoint.hash };
  return { verify, pruned, hashes };
}
