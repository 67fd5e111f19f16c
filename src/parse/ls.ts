/**
 * `ls -l` and its relatives (`-la`, `-ln`, `-li`, `-ls`, `-lh`, `-lR`, `-g`/`-o`/`-G`,
 * `--time-style=long-iso|full-iso|iso`): GNU coreutils, busybox, BSD/macOS (`@`/`+` after the
 * mode), both as a pipe writes them and as a terminal does (shell-escape quoting, colours).
 */
import {
  compact,
  type Flags,
  flags,
  humanBytes,
  type Line,
  PARSE_LIMITS,
  ParseContext,
  ParseFailure,
  type Token,
  tokens,
  toUint,
} from "./_text.ts";
import type { DirectoryEntry, DirectoryListing, DirectorySection } from "./schema.ts";

const TYPES: Record<string, DirectoryEntry["type"]> = {
  "-": "file",
  d: "dir",
  l: "symlink",
  c: "char",
  b: "block",
  p: "fifo",
  s: "socket",
};

const MONTHS: Record<string, number> = {
  Jan: 1,
  Feb: 2,
  Mar: 3,
  Apr: 4,
  May: 5,
  Jun: 6,
  Jul: 7,
  Aug: 8,
  Sep: 9,
  Oct: 10,
  Nov: 11,
  Dec: 12,
};

/** Does argv ask ls for the long format? */
export function lsMatches(args: readonly string[]): boolean {
  const f = lsFlags(args);
  const long = ["l", "n", "g", "o"].some((c) => f.short.has(c)) ||
    ["long", "verbose"].includes(f.values.get("format") ?? "");
  const other = ["m", "x", "C", "Z"].some((c) => f.short.has(c)) || f.long.has("context") ||
    f.long.has("help") || f.long.has("version") ||
    (f.values.has("time-style") && f.values.get("time-style")!.startsWith("+"));
  return long && !other;
}

export function parseLs(ctx: ParseContext, argv: readonly string[]): DirectoryListing {
  const f = lsFlags(argv.slice(1));
  const opts: LsOptions = {
    inode: f.short.has("i") || f.long.has("inode"),
    blocks: f.short.has("s") || f.long.has("size"),
    owner: !f.short.has("g"),
    group: !(f.short.has("o") || f.short.has("G") || f.long.has("no-group")),
    numeric: f.short.has("n") || f.long.has("numeric-uid-gid"),
    human: f.short.has("h") || f.long.has("human-readable") || f.long.has("si"),
    si: f.long.has("si"),
  };
  const sections: DirectorySection[] = [];
  const errors: string[] = [];
  let current: DirectorySection | undefined;
  let previousBlank = true;
  let entries = 0;
  const section = (path?: string): DirectorySection => {
    const s: DirectorySection = compact({ path, entries: [] });
    if (ctx.room(sections, 10_000)) sections.push(s);
    return s;
  };
  for (const line of ctx.lines) {
    const t = line.text;
    if (t.trim() === "") {
      previousBlank = true;
      continue;
    }
    const wasBlank = previousBlank;
    previousBlank = false;
    if (t.startsWith("ls: ") || t.startsWith("ls:")) {
      if (ctx.room(errors, 1000)) errors.push(ctx.clip(t));
      continue;
    }
    if (t.startsWith("total ")) {
      current ??= section();
      const total = t.slice(6).trim();
      current.total = ctx.short(total);
      const n = toUint(total) ?? humanBytes(total, opts.si ? 1000 : 1024);
      if (n !== undefined) current.total_blocks = n;
      continue;
    }
    if (wasBlank && t.endsWith(":")) {
      const e = entry(ctx, line, opts);
      if (e === undefined) {
        current = section(ctx.clip(unquoteShell(t.slice(0, -1))));
        continue;
      }
    }
    const e = entry(ctx, line, opts);
    if (e === undefined) {
      ctx.unparsed(line);
      continue;
    }
    current ??= section();
    entries++;
    if (entries <= PARSE_LIMITS.maxEntries && ctx.room(current.entries)) current.entries.push(e);
    else if (entries > PARSE_LIMITS.maxEntries) ctx.room(current.entries, 0);
  }
  if (entries === 0 && sections.every((s) => s.total === undefined) && errors.length === 0) {
    throw new ParseFailure(
      ctx.lines.length === 0 ? "The output is empty" : "No line looks like an `ls -l` entry",
      ctx.firstUnparsed,
    );
  }
  return compact({
    kind: "directory_listing" as const,
    sections,
    errors: errors.length > 0 ? errors : undefined,
  });
}

function lsFlags(args: readonly string[]): Flags {
  return flags(args, "ITw", ["block-size", "hide", "ignore", "time-style", "width"]);
}

interface LsOptions {
  inode: boolean;
  blocks: boolean;
  owner: boolean;
  group: boolean;
  numeric: boolean;
  human: boolean;
  si: boolean;
}

function entry(ctx: ParseContext, line: Line, o: LsOptions): DirectoryEntry | undefined {
  const t = line.text;
  const tok = tokens(t, 16);
  let p = 0;
  let inode: number | undefined;
  let blocks: number | undefined;
  if (o.inode) {
    inode = toUint(tok[p]?.text);
    if (inode === undefined) return undefined;
    p++;
  }
  if (o.blocks) {
    const b = tok[p]?.text ?? "";
    blocks = toUint(b) ?? humanBytes(b, o.si ? 1000 : 1024);
    if (blocks === undefined) return undefined;
    p++;
  }
  const modeTok = tok[p++]?.text;
  if (modeTok === undefined) return undefined;
  const mode = parseMode(modeTok);
  if (mode === undefined) return undefined;
  const links = toUint(tok[p++]?.text);
  if (links === undefined) return undefined;
  let owner: string | undefined;
  let group: string | undefined;
  if (o.owner) owner = tok[p++]?.text;
  if (o.group) group = tok[p++]?.text;
  if ((o.owner && owner === undefined) || (o.group && group === undefined)) return undefined;
  let size: number | undefined;
  let sizeText: string | undefined;
  let major: number | undefined;
  let minor: number | undefined;
  const sz = tok[p++]?.text;
  if (sz === undefined) return undefined;
  if (mode.type === "char" || mode.type === "block") {
    const comma = sz.indexOf(",");
    if (comma < 0) {
      // a device listed with a size (some filesystems do that) is still an entry
      size = toUint(sz);
      if (size === undefined) return undefined;
    } else if (comma === sz.length - 1) {
      major = toUint(sz.slice(0, -1));
      minor = toUint(tok[p++]?.text);
    } else {
      major = toUint(sz.slice(0, comma));
      minor = toUint(sz.slice(comma + 1));
    }
    if (size === undefined && (major === undefined || minor === undefined)) return undefined;
  } else {
    size = toUint(sz);
    if (size === undefined && o.human) {
      size = humanBytes(sz, o.si ? 1000 : 1024);
      sizeText = sz;
    }
    if (size === undefined) return undefined;
  }
  const date = parseDate(tok, p, ctx.now);
  if (date === undefined) return undefined;
  const last = tok[date.next - 1]!;
  const rest = t.slice(last.end).replace(/^ +/, "");
  if (rest.length === 0) return undefined;
  let name = rest;
  let target: string | undefined;
  if (rest.startsWith("'") || rest.startsWith('"') || rest.startsWith("$'")) {
    const w = shellWord(rest, 0);
    if (w !== undefined) {
      name = w.text;
      const after = rest.slice(w.end);
      if (mode.type === "symlink" && after.startsWith(" -> ")) {
        target = unquoteShell(after.slice(4));
      } else if (after.length > 0 && !after.startsWith(" -> ")) {
        name = rest; // not one quoted word: take the name literally
      }
    }
  } else if (mode.type === "symlink") {
    const arrow = rest.indexOf(" -> ");
    if (arrow >= 0) {
      name = rest.slice(0, arrow);
      target = unquoteShell(rest.slice(arrow + 4));
    }
  }
  const uid = o.numeric && owner !== undefined ? toUint(owner) : undefined;
  const gid = o.numeric && group !== undefined ? toUint(group) : undefined;
  return compact({
    type: mode.type,
    mode: mode.mode,
    mode_bits: mode.bits,
    mode_octal: mode.bits.toString(8).padStart(4, "0"),
    acl: mode.marker === "+" ? true : undefined,
    xattr: mode.marker === "@" ? true : undefined,
    selinux: mode.marker === "." ? true : undefined,
    inode,
    blocks,
    links,
    owner: owner === undefined ? undefined : ctx.short(owner),
    group: group === undefined ? undefined : ctx.short(group),
    uid,
    gid,
    size,
    size_text: sizeText === undefined ? undefined : ctx.short(sizeText),
    major,
    minor,
    mtime: date.iso,
    mtime_text: ctx.short(t.slice(tok[p]!.start, last.end)),
    mtime_year_inferred: date.inferred ? true : undefined,
    name: ctx.clip(name),
    link_target: target === undefined ? undefined : ctx.clip(target),
  });
}

interface Mode {
  type: DirectoryEntry["type"];
  mode: string;
  bits: number;
  marker?: string;
}

/** "drwxr-sr-t+" → type, the 10 characters, the numeric bits and the marker. */
export function parseMode(s: string): Mode | undefined {
  if (s.length !== 10 && s.length !== 11) return undefined;
  const type = TYPES[s[0]!];
  if (type === undefined) return undefined;
  const marker = s.length === 11 ? s[10] : undefined;
  if (marker !== undefined && marker !== "+" && marker !== "@" && marker !== ".") return undefined;
  let bits = 0;
  for (let i = 0; i < 3; i++) {
    const r = s[1 + i * 3]!;
    const w = s[2 + i * 3]!;
    const x = s[3 + i * 3]!;
    if ((r !== "r" && r !== "-") || (w !== "w" && w !== "-")) return undefined;
    const shift = (2 - i) * 3;
    if (r === "r") bits |= 4 << shift;
    if (w === "w") bits |= 2 << shift;
    const special = i === 2 ? "tT" : "sS";
    if (x === "x") bits |= 1 << shift;
    else if (x === special[0]) bits |= (1 << shift) | (1 << (11 - i));
    else if (x === special[1] || (i < 2 && (x === "l" || x === "L"))) bits |= 1 << (11 - i);
    else if (x !== "-") return undefined;
  }
  return { type, mode: s.slice(0, 10), bits, ...(marker === undefined ? {} : { marker }) };
}

interface DateFound {
  iso: string;
  inferred: boolean;
  /** Index of the first token after the date. */
  next: number;
}

const pad = (n: number) => String(n).padStart(2, "0");

/** The date columns starting at token `p`, in any of the styles ls prints in the C locale. */
function parseDate(tok: Token[], p: number, now: Date): DateFound | undefined {
  const a = tok[p]?.text;
  const b = tok[p + 1]?.text;
  if (a === undefined || b === undefined) return undefined;
  const month = MONTHS[a];
  if (month !== undefined) {
    const day = toUint(b);
    const c = tok[p + 2]?.text;
    if (day === undefined || day < 1 || day > 31 || c === undefined) return undefined;
    const year = toUint(c);
    if (year !== undefined && c.length === 4) {
      return { iso: `${year}-${pad(month)}-${pad(day)}`, inferred: false, next: p + 3 };
    }
    if (!/^\d\d?:\d\d$/.test(c)) return undefined;
    const y = inferYear(month, day, now);
    return {
      iso: `${y}-${pad(month)}-${pad(day)}T${c.padStart(5, "0")}`,
      inferred: true,
      next: p + 3,
    };
  }
  // long-iso / full-iso / iso: "2026-12-02 00:32", "2026-12-02 00:32:48.75 +0000", "12-02 00:32"
  if (/^\d{4}-\d\d-\d\d$/.test(a)) {
    if (/^\d\d:\d\d$/.test(b)) return { iso: `${a}T${b}`, inferred: false, next: p + 2 };
    if (/^\d\d:\d\d:\d\d(?:\.\d{1,9})?$/.test(b)) {
      const z = tok[p + 2]?.text ?? "";
      if (/^[+-]\d{4}$/.test(z)) {
        return {
          iso: `${a}T${b}${z.slice(0, 3)}:${z.slice(3)}`,
          inferred: false,
          next: p + 3,
        };
      }
      return { iso: `${a}T${b}`, inferred: false, next: p + 2 };
    }
    // iso style, old file: the date alone, then the name
    return { iso: a, inferred: false, next: p + 1 };
  }
  if (/^\d\d-\d\d$/.test(a) && /^\d\d:\d\d$/.test(b)) {
    const m = Number(a.slice(0, 2));
    const d = Number(a.slice(3));
    if (m < 1 || m > 12) return undefined;
    return { iso: `${inferYear(m, d, now)}-${a}T${b}`, inferred: true, next: p + 2 };
  }
  return undefined;
}

/**
 * ls prints the time instead of the year for timestamps within the last six months (and not
 * in the future): the year is `now`'s, or the one before when that date would be ahead of now
 * (a day of slack for time zones).
 */
function inferYear(month: number, day: number, now: Date): number {
  const y = now.getUTCFullYear();
  const candidate = Date.UTC(y, month - 1, day);
  return candidate > now.getTime() + 86_400_000 ? y - 1 : y;
}

interface Word {
  text: string;
  end: number;
}

/**
 * One shell word as ls's shell-escape quoting writes it: 'lit', "dq", $'c\n', and runs of
 * them; undefined when a quote is not closed. Linear.
 */
function shellWord(s: string, from: number): Word | undefined {
  let i = from;
  let out = "";
  while (i < s.length && s[i] !== " ") {
    const c = s[i]!;
    if (c === "'") {
      const close = s.indexOf("'", i + 1);
      if (close < 0) return undefined;
      out += s.slice(i + 1, close);
      i = close + 1;
    } else if (c === "$" && s[i + 1] === "'") {
      i += 2;
      const bytes: number[] = [];
      const enc = new TextEncoder();
      while (i < s.length && s[i] !== "'") {
        if (s[i] === "\\" && i + 1 < s.length) {
          const d = s[i + 1]!;
          const simple: Record<string, number> = {
            n: 10,
            t: 9,
            r: 13,
            a: 7,
            b: 8,
            f: 12,
            v: 11,
            e: 27,
            "\\": 92,
            "'": 39,
            '"': 34,
          };
          if (d in simple) {
            bytes.push(simple[d]!);
            i += 2;
          } else if (d >= "0" && d <= "7") {
            const oct = /^[0-7]{1,3}/.exec(s.slice(i + 1, i + 4))![0];
            bytes.push(parseInt(oct, 8) & 0xff);
            i += 1 + oct.length;
          } else {
            bytes.push(...enc.encode(d));
            i += 2;
          }
        } else {
          bytes.push(...enc.encode(s[i]!));
          i++;
        }
      }
      if (i >= s.length) return undefined;
      out += new TextDecoder().decode(new Uint8Array(bytes));
      i++;
    } else if (c === '"') {
      i++;
      while (i < s.length && s[i] !== '"') {
        if (s[i] === "\\" && i + 1 < s.length) i++;
        out += s[i];
        i++;
      }
      if (i >= s.length) return undefined;
      i++;
    } else if (c === "\\" && i + 1 < s.length) {
      out += s[i + 1];
      i += 2;
    } else {
      out += c;
      i++;
    }
  }
  return { text: out, end: i };
}

/** A whole string that is one quoted shell word → its text; anything else as it is. */
function unquoteShell(s: string): string {
  if (!(s.startsWith("'") || s.startsWith('"') || s.startsWith("$'"))) return s;
  const w = shellWord(s, 0);
  return w !== undefined && w.end === s.length ? w.text : s;
}
