/**
 * Manifests: `manifests/<id>.jsonl`, one JSON object per line — the header (`SnapshotInfo`),
 * then entries (parents first), then skipped records, then `{"end":true,…}`. JSON Lines so a
 * listing reads only the first line of each, and a truncated file is detectable.
 */
import { corruptManifest, snapshotNotFound } from "./errors.ts";
import { writeAtomic } from "./_fs.ts";
import { badRelPath, type Layout, relParent } from "./_paths.ts";
import {
  ManifestEnd,
  SkippedEntry,
  SNAPSHOT_ID_PATTERN,
  SNAPSHOT_LIMITS,
  SnapshotEntry,
  SnapshotInfo,
  type SnapshotManifest,
} from "./schema.ts";

const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8", { fatal: true });

export function encodeManifest(m: SnapshotManifest): Uint8Array {
  const lines = [JSON.stringify(m.info)];
  for (const e of m.entries) lines.push(JSON.stringify(e));
  for (const s of m.skipped) lines.push(JSON.stringify(s));
  lines.push(JSON.stringify({ end: true, entries: m.entries.length, skipped: m.skipped.length }));
  return encoder.encode(lines.join("\n") + "\n");
}

export async function writeManifest(layout: Layout, bytes: Uint8Array, id: string): Promise<void> {
  await writeAtomic(layout.manifests, layout.manifest(id), bytes);
}

/** Ids of the manifests in the store (any order). */
export async function manifestIds(layout: Layout): Promise<string[]> {
  const ids: string[] = [];
  try {
    for await (const e of Deno.readDir(layout.manifests)) {
      if (!e.isFile || !e.name.endsWith(".jsonl")) continue;
      const id = e.name.slice(0, -".jsonl".length);
      if (SNAPSHOT_ID_PATTERN.test(id)) ids.push(id);
    }
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  }
  return ids;
}

async function readBounded(path: string, max: number, id: string): Promise<Uint8Array> {
  let file: Deno.FsFile;
  try {
    file = await Deno.open(path, { read: true });
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) throw snapshotNotFound(id);
    throw err;
  }
  try {
    const buf = new Uint8Array(Math.min(max, (await file.stat()).size) + 1);
    let n = 0;
    while (n < buf.length) {
      const got = await file.read(buf.subarray(n));
      if (got === null) break;
      n += got;
    }
    return buf.subarray(0, n);
  } finally {
    file.close();
  }
}

function parseLine<T>(
  schema: { safeParse(v: unknown): { success: true; data: T } | { success: false } },
  line: string,
): T | undefined {
  let v: unknown;
  try {
    v = JSON.parse(line);
  } catch {
    return undefined; // not JSON: the caller reports the line
  }
  const r = schema.safeParse(v);
  return r.success ? r.data : undefined;
}

/** Walk order: segment by segment (so "a/b" sorts before "a-b", as a preorder walk yields). */
export function comparePaths(a: string, b: string): number {
  const x = a.split("/");
  const y = b.split("/");
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    if (x[i]! < y[i]!) return -1;
    if (x[i]! > y[i]!) return 1;
  }
  return x.length - y.length;
}

function checkId(id: string): void {
  if (!SNAPSHOT_ID_PATTERN.test(id)) throw snapshotNotFound(id);
}

/** The header of snapshot `id` alone (cheap: the first line). */
export async function readInfo(layout: Layout, id: string): Promise<SnapshotInfo> {
  checkId(id);
  const bytes = await readBounded(layout.manifest(id), SNAPSHOT_LIMITS.headerBytes, id);
  const nl = bytes.indexOf(10);
  if (nl < 0) throw corruptManifest(id, "its header line is missing or too long");
  let text: string;
  try {
    text = decoder.decode(bytes.subarray(0, nl));
  } catch {
    throw corruptManifest(id, "its header is not UTF-8");
  }
  const info = parseLine(SnapshotInfo, text);
  if (info === undefined || info.id !== id) throw corruptManifest(id, "its header is invalid");
  return info;
}

/**
 * The whole manifest of `id`, validated: every path relative and confined (no `..`, absolute
 * or empty segment), unique, in order, under a directory entry of its own; counts consistent.
 */
export async function readManifest(layout: Layout, id: string): Promise<SnapshotManifest> {
  checkId(id);
  const bytes = await readBounded(layout.manifest(id), SNAPSHOT_LIMITS.manifestBytes, id);
  if (bytes.length > SNAPSHOT_LIMITS.manifestBytes) throw corruptManifest(id, "it is too large");
  let text: string;
  try {
    text = decoder.decode(bytes);
  } catch {
    throw corruptManifest(id, "it is not UTF-8");
  }
  if (!text.endsWith("\n")) throw corruptManifest(id, "it is truncated");
  const lines = text.slice(0, -1).split("\n");
  const info = parseLine(SnapshotInfo, lines[0] ?? "");
  if (info === undefined || info.id !== id) throw corruptManifest(id, "its header is invalid");
  const end = parseLine(ManifestEnd, lines[lines.length - 1] ?? "");
  if (end === undefined || lines.length !== end.entries + end.skipped + 2) {
    throw corruptManifest(id, "it is truncated");
  }
  const entries: SnapshotEntry[] = [];
  const dirs = new Set<string>([""]);
  let prev = "";
  for (let i = 1; i <= end.entries; i++) {
    const e = parseLine(SnapshotEntry, lines[i]!);
    if (e === undefined) throw corruptManifest(id, `line ${i + 1} is not a valid entry`);
    const bad = badRelPath(e.path);
    if (bad !== undefined) throw corruptManifest(id, `entry path "${e.path}" is unsafe: ${bad}`);
    if (!dirs.has(relParent(e.path))) {
      throw corruptManifest(id, `entry "${e.path}" has no directory entry for its parent`);
    }
    if (i > 1 && comparePaths(prev, e.path) >= 0) {
      throw corruptManifest(id, `entry "${e.path}" is out of order or repeated`);
    }
    prev = e.path;
    if (e.type === "dir") dirs.add(e.path);
    entries.push(e);
  }
  const skipped: SkippedEntry[] = [];
  for (let i = end.entries + 1; i <= end.entries + end.skipped; i++) {
    const s = parseLine(SkippedEntry, lines[i]!);
    if (s === undefined) throw corruptManifest(id, `line ${i + 1} is not a valid skipped record`);
    skipped.push(s);
  }
  const files = entries.filter((e) => e.type === "file");
  if (
    files.length !== info.files || entries.length - files.length !== info.dirs + info.symlinks
  ) {
    throw corruptManifest(id, "its counts do not match its entries");
  }
  return { info, entries, skipped };
}

/**
 * Every hash-like string in a manifest's text, for gc. Deliberately lenient: a manifest that
 * no longer parses still keeps every object it may reference.
 */
export async function referencedObjects(layout: Layout, id: string): Promise<Set<string>> {
  const out = new Set<string>();
  let text: string;
  try {
    text = new TextDecoder().decode(await Deno.readFile(layout.manifest(id)));
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return out;
    throw err;
  }
  for (const m of text.matchAll(/[0-9a-f]{64}/g)) out.add(m[0]);
  return out;
}
