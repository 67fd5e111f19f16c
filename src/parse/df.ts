/**
 * `df` tables, read by their header: GNU (`df`, `-k`, `-h`, `-H`, `-T`, `-i`, `-P`), busybox and
 * BSD/macOS (`512-blocks`, `Capacity`, `iused`/`ifree`/`%iused`, `Gi` units). The run of value
 * columns in the middle anchors each row, so filesystem names and mount points keep their
 * spaces; a filesystem name alone on its line (old df wrapping) joins the next line.
 */
import {
  compact,
  flags,
  humanBytes,
  type Line,
  ParseContext,
  ParseFailure,
  type Token,
  tokens,
  toUint,
} from "./_text.ts";
import type { FilesystemEntry, FilesystemList } from "./schema.ts";

type Kind = "size" | "used" | "available" | "percent" | "inodes" | "iused" | "ifree" | "ipercent";

const HEADERS: Record<string, Kind> = {
  Size: "size",
  Used: "used",
  Avail: "available",
  Available: "available",
  "Use%": "percent",
  Capacity: "percent",
  Inodes: "inodes",
  IUsed: "iused",
  IFree: "ifree",
  "IUse%": "ipercent",
  iused: "iused",
  ifree: "ifree",
  "%iused": "ipercent",
};

const FIELD: Record<Kind, keyof FilesystemEntry> = {
  size: "size",
  used: "used",
  available: "available",
  percent: "use_percent",
  inodes: "inodes",
  iused: "inodes_used",
  ifree: "inodes_free",
  ipercent: "inodes_use_percent",
};

export function dfMatches(args: readonly string[]): boolean {
  const f = flags(args, "Btx", ["block-size", "type", "exclude-type", "output"]);
  return !(f.long.has("help") || f.long.has("version") || f.long.has("output"));
}

/** "1K-blocks" → 1024, "512-blocks" → 512, "1M-blocks" → 1048576, "1B-blocks" → 1. */
function blockHeader(h: string): number | undefined {
  if (!h.endsWith("-blocks")) return undefined;
  const n = h.slice(0, -7);
  if (n === "1B") return 1;
  return humanBytes(n, 1024);
}

export function parseDf(ctx: ParseContext, argv: readonly string[]): FilesystemList {
  const f = flags(argv.slice(1), "Btx", ["block-size", "type", "exclude-type"]);
  const si = f.short.has("H") || f.long.has("si");
  const lines = ctx.lines.filter((l) => l.text.trim() !== "");
  const header = lines[0];
  if (header === undefined) throw new ParseFailure("The output is empty");
  const head = tokens(header.text, 32).map((t) => t.text);
  if (head[0] !== "Filesystem" || head[head.length - 2] !== "Mounted" || head.at(-1) !== "on") {
    throw new ParseFailure("The first line is not a df header (Filesystem … Mounted on)", header.n);
  }
  const hasType = head[1] === "Type";
  const middle: Kind[] = [];
  let blockSize: number | undefined;
  let human = false;
  for (const h of head.slice(hasType ? 2 : 1, -2)) {
    const b = blockHeader(h);
    if (b !== undefined) {
      blockSize = b;
      middle.push("size");
      continue;
    }
    const k = HEADERS[h];
    if (k === undefined) {
      throw new ParseFailure(`Unknown df column "${h.slice(0, 64)}"`, header.n);
    }
    if (k === "size") human = true;
    middle.push(k);
  }
  const base = si ? 1000 : 1024;
  const filesystems: FilesystemEntry[] = [];
  let pending: Line | undefined;
  for (const line of lines.slice(1)) {
    let text = line.text;
    if (pending !== undefined) {
      text = `${pending.text.trim()} ${text.trim()}`;
    }
    const tok = tokens(text, 64);
    const row = readRow(ctx, text, tok, middle, hasType, blockSize, base);
    if (row === undefined) {
      if (pending === undefined && tok.length === 1) {
        pending = line;
        continue;
      }
      if (pending !== undefined) ctx.unparsed(pending);
      pending = undefined;
      ctx.unparsed(line);
      continue;
    }
    pending = undefined;
    if (ctx.room(filesystems)) filesystems.push(row);
  }
  if (pending !== undefined) ctx.unparsed(pending);
  if (filesystems.length === 0 && ctx.unparsedCount > 0) {
    throw new ParseFailure("No df row could be read", ctx.firstUnparsed);
  }
  return compact({
    kind: "filesystem_list" as const,
    block_size: human ? undefined : blockSize,
    approximate: human,
    filesystems,
  });
}

function readRow(
  ctx: ParseContext,
  text: string,
  tok: Token[],
  middle: Kind[],
  hasType: boolean,
  blockSize: number | undefined,
  base: number,
): FilesystemEntry | undefined {
  const m = middle.length;
  const first = hasType ? 2 : 1;
  for (let k = first; k + m < tok.length; k++) {
    const values: Partial<Record<keyof FilesystemEntry, number>> = {};
    let ok = true;
    for (let i = 0; i < m && ok; i++) {
      const v = value(tok[k + i]!.text, middle[i]!, blockSize, base);
      if (v === null) ok = false;
      else if (v !== undefined) values[FIELD[middle[i]!]] = v;
    }
    if (!ok) continue;
    const fsEnd = tok[hasType ? k - 2 : k - 1]!.end;
    const mount = text.slice(tok[k + m - 1]!.end).trim();
    if (mount.length === 0) return undefined;
    return compact({
      filesystem: ctx.clip(text.slice(0, fsEnd).trim()),
      type: hasType ? ctx.short(tok[k - 1]!.text) : undefined,
      ...values,
      mounted_on: ctx.clip(mount),
    }) as FilesystemEntry;
  }
  return undefined;
}

/** A cell's value: a number, undefined for "-", or null when it is not a value of that column. */
function value(
  s: string,
  kind: Kind,
  blockSize: number | undefined,
  base: number,
): number | undefined | null {
  if (s === "-") return undefined;
  if (kind === "percent" || kind === "ipercent") {
    if (!s.endsWith("%")) return null;
    const n = toUint(s.slice(0, -1));
    return n === undefined || n > 100 ? null : n;
  }
  const n = toUint(s);
  if (n !== undefined) {
    if (kind === "inodes" || kind === "iused" || kind === "ifree") return n;
    return blockSize === undefined ? n : n * blockSize;
  }
  return humanBytes(s, base) ?? null;
}
