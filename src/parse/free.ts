/**
 * `free` (procps-ng 3.3 and 4, busybox): the header names the columns, each row (`Mem:`,
 * `Swap:`, `Total:`, `Low:`, `High:`, the old `-/+ buffers/cache:`) becomes bytes in the unit
 * free was told to use (KiB by default; `-h` values carry their own unit).
 */
import { compact, flags, humanBytes, ParseContext, ParseFailure, tokens, toUint } from "./_text.ts";
import type { MemoryRow, MemoryUsage } from "./schema.ts";

const COLUMN: Record<string, keyof MemoryRow> = {
  total: "total",
  used: "used",
  free: "free",
  shared: "shared",
  "buff/cache": "buff_cache",
  buffers: "buffers",
  cache: "cache",
  cached: "cache",
  available: "available",
};

const ROW: Record<string, "mem" | "swap" | "total" | "low" | "high" | "buffers_cache"> = {
  "Mem:": "mem",
  "Swap:": "swap",
  "Total:": "total",
  "Low:": "low",
  "High:": "high",
  "-/+ buffers/cache:": "buffers_cache",
  "-/+": "buffers_cache",
};

export function freeMatches(args: readonly string[]): boolean {
  const f = flags(args, "sc", ["seconds", "count"]);
  return !(f.short.has("s") || f.short.has("c") || f.long.has("seconds") || f.long.has("count") ||
    f.long.has("help") || f.short.has("V") || f.long.has("version"));
}

function unitOf(argv: readonly string[]): { unit?: number; base: number } {
  const f = flags(argv.slice(1), "sc", ["seconds", "count"]);
  const si = f.long.has("si");
  const base = si ? 1000 : 1024;
  if (f.short.has("h") || f.long.has("human")) return { base };
  const steps: [string, string, number][] = [
    ["b", "bytes", 0],
    ["k", "kibi", 1],
    ["m", "mebi", 2],
    ["g", "gibi", 3],
    ["", "tebi", 4],
    ["", "pebi", 5],
  ];
  for (const [s, l, p] of steps) {
    if ((s !== "" && f.short.has(s)) || f.long.has(l)) return { unit: base ** p, base };
  }
  if (f.long.has("kilo")) return { unit: 1000, base };
  if (f.long.has("mega")) return { unit: 1000 ** 2, base };
  if (f.long.has("giga")) return { unit: 1000 ** 3, base };
  return { unit: base, base };
}

export function parseFree(ctx: ParseContext, argv: readonly string[]): MemoryUsage {
  const { unit, base } = unitOf(argv);
  const lines = ctx.lines.filter((l) => l.text.trim() !== "");
  const header = lines[0];
  if (header === undefined) throw new ParseFailure("The output is empty");
  const cols = tokens(header.text, 16).map((t) => t.text);
  if (cols.length === 0 || !cols.every((c) => c in COLUMN)) {
    throw new ParseFailure("The first line is not a free header (total used free …)", header.n);
  }
  const out: MemoryUsage = { kind: "memory_usage", approximate: unit !== 1, unit };
  let rows = 0;
  for (const line of lines.slice(1)) {
    const t = line.text.trimStart();
    let label: string;
    let rest: string;
    if (t.startsWith("-/+ buffers/cache:")) {
      label = "-/+ buffers/cache:";
      rest = t.slice(label.length);
    } else {
      const sp = t.indexOf(" ");
      label = sp < 0 ? t : t.slice(0, sp);
      rest = sp < 0 ? "" : t.slice(sp);
    }
    const key = ROW[label];
    const values = tokens(rest, 17).map((v) => v.text);
    if (key === undefined || values.length === 0 || values.length > cols.length) {
      ctx.unparsed(line);
      continue;
    }
    // the old buffers/cache line has only used and free
    const names = key === "buffers_cache" ? ["used", "free"] : cols;
    const row: MemoryRow = {};
    let ok = true;
    for (let i = 0; i < values.length && ok; i++) {
      const v = values[i]!;
      const n = toUint(v);
      const bytes = n !== undefined
        ? (unit === undefined ? n : n * unit)
        : unit === undefined
        ? humanBytes(v, base)
        : undefined;
      if (bytes === undefined || names[i] === undefined) ok = false;
      else row[COLUMN[names[i]!]!] = bytes;
    }
    if (!ok) {
      ctx.unparsed(line);
      continue;
    }
    out[key] = row;
    rows++;
  }
  if (rows === 0) throw new ParseFailure("No Mem:/Swap: row could be read", ctx.firstUnparsed);
  return compact(out);
}
