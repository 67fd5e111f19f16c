/**
 * `du` lines: size, a TAB, the path (`du`, `-s`, `-a`, `-c`, `-h`, `--si`, `-k`, `-m`, `-b`,
 * `-B N`). Sizes become bytes from the unit du was told to use (1024-byte blocks by default).
 */
import { compact, flags, humanBytes, ParseContext, ParseFailure, toUint } from "./_text.ts";
import type { DiskUsage, DiskUsageEntry } from "./schema.ts";

const DU_VALUE = "BdtX";
const DU_LONG_VALUE = [
  "block-size",
  "max-depth",
  "threshold",
  "exclude",
  "exclude-from",
  "files0-from",
];

export function duMatches(args: readonly string[]): boolean {
  const f = flags(args, DU_VALUE, DU_LONG_VALUE);
  return !(f.short.has("0") || f.long.has("null") || f.long.has("time") || f.long.has("help") ||
    f.long.has("version") || f.long.has("inodes"));
}

/** Bytes per printed unit, or undefined for human sizes. */
function unitOf(argv: readonly string[]): { unit?: number; human: boolean; base: number } {
  const f = flags(argv.slice(1), DU_VALUE, DU_LONG_VALUE);
  if (f.long.has("si")) return { human: true, base: 1000 };
  if (f.short.has("h") || f.long.has("human-readable")) return { human: true, base: 1024 };
  if (f.short.has("b") || f.long.has("bytes")) return { unit: 1, human: false, base: 1024 };
  if (f.short.has("m")) return { unit: 1024 * 1024, human: false, base: 1024 };
  const bs = f.values.get("block-size") ?? blockArg(argv);
  if (bs !== undefined) {
    const n = humanBytes(bs, 1024);
    if (n !== undefined) return { unit: n, human: false, base: 1024 };
  }
  return { unit: 1024, human: false, base: 1024 };
}

/** `-B 1M` / `-B1M`. */
function blockArg(argv: readonly string[]): string | undefined {
  for (let i = 1; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === "-B") return argv[i + 1];
    if (a.startsWith("-B") && !a.startsWith("--")) return a.slice(2);
  }
  return undefined;
}

export function parseDu(ctx: ParseContext, argv: readonly string[]): DiskUsage {
  const { unit, human, base } = unitOf(argv);
  const entries: DiskUsageEntry[] = [];
  for (const line of ctx.lines) {
    const t = line.text;
    if (t.trim() === "") continue;
    const tab = t.indexOf("\t");
    if (tab <= 0 || t.startsWith("du:")) {
      ctx.unparsed(line);
      continue;
    }
    const sizeText = t.slice(0, tab).trim();
    const path = t.slice(tab + 1);
    const n = toUint(sizeText);
    let size: number | undefined;
    if (n !== undefined) size = human ? n : n * (unit ?? 1);
    else if (human) size = humanBytes(sizeText, base);
    if (size === undefined || path.length === 0 || sizeText.length > 32) {
      ctx.unparsed(line);
      continue;
    }
    const e: DiskUsageEntry = compact({
      size,
      size_text: sizeText,
      path: ctx.clip(path),
      total: path === "total" && line === ctx.lines.at(-1) ? true : undefined,
    });
    if (ctx.room(entries)) entries.push(e);
  }
  if (entries.length === 0) {
    throw new ParseFailure(
      ctx.lines.length === 0 ? "The output is empty" : "No line is a du entry (size, TAB, path)",
      ctx.firstUnparsed,
    );
  }
  return compact({
    kind: "disk_usage" as const,
    unit: human ? undefined : unit,
    approximate: human || (unit ?? 1) > 1,
    entries,
  });
}
