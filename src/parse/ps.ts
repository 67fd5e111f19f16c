/**
 * `ps` tables, read by their header: `ps aux`, `ps -ef`, `ps -elf`, `ps -eF`, `ps -eo
 * pid,user,cmd` (procps-ng 3.3 and 4, busybox). Only the last column may hold spaces (COMMAND,
 * CMD, ARGS): it keeps the rest of the line verbatim. Columns whose values have spaces in the
 * middle (`lstart`) are not supported: such lines are reported as unparsed.
 */
import { compact, flags, ParseContext, ParseFailure, tokens, toNumber, toUint } from "./_text.ts";
import type { ProcessEntry, ProcessList } from "./schema.ts";

/** Is this a `ps` whose output has a header and one line per process? */
export function psMatches(args: readonly string[]): boolean {
  const f = flags(args, "CGgopstuUNOk", ["format", "sort", "pid", "ppid", "user", "group", "cols"]);
  const first = args[0] ?? "";
  const bsdNoHeader = !first.startsWith("-") && /^[a-zA-Z]+$/.test(first) && first.includes("h");
  return !(f.long.has("no-headers") || f.long.has("no-heading") || f.long.has("help") ||
    f.short.has("V") || f.long.has("version") || bsdNoHeader || f.short.has("h") ||
    args.some((a) => a.includes("lstart")));
}

type Setter = (e: Draft, v: string) => boolean;
type Draft = Partial<ProcessEntry> & { extra?: Record<string, string> };

const str =
  (k: "user" | "tty" | "stat" | "start" | "elapsed" | "nice" | "priority"): Setter => (e, v) => {
    e[k] = v;
    return true;
  };
const uintField = (k: "pid" | "ppid" | "cpu" | "vsz_kib" | "rss_kib"): Setter => (e, v) => {
  const n = toUint(v);
  if (n === undefined) return k !== "pid" && k !== "ppid" && v === "-";
  e[k] = n;
  return true;
};
const pct = (k: "cpu_percent" | "mem_percent"): Setter => (e, v) => {
  const n = toNumber(v);
  if (n === undefined || n < 0) return false;
  e[k] = n;
  return true;
};

/** Header → typed field. Headers not listed go to `extra`. */
const COLUMNS: Record<string, Setter> = {
  USER: str("user"),
  UID: str("user"),
  RUSER: str("user"),
  EUSER: str("user"),
  PID: uintField("pid"),
  PPID: uintField("ppid"),
  "%CPU": pct("cpu_percent"),
  "%MEM": pct("mem_percent"),
  C: uintField("cpu"),
  VSZ: uintField("vsz_kib"),
  VSIZE: uintField("vsz_kib"),
  RSS: uintField("rss_kib"),
  RSZ: uintField("rss_kib"),
  TTY: str("tty"),
  TT: str("tty"),
  STAT: str("stat"),
  S: str("stat"),
  START: str("start"),
  STIME: str("start"),
  ELAPSED: str("elapsed"),
  NI: str("nice"),
  PRI: str("priority"),
  TIME: (e, v) => {
    e.time = v;
    const s = cpuSeconds(v);
    if (s !== undefined) e.cpu_time_seconds = s;
    return true;
  },
};

/** Last columns that run to the end of the line. */
const TAIL = new Set(["COMMAND", "CMD", "ARGS", "COMM", "UCOMM", "UCMD"]);

export function parsePs(ctx: ParseContext, _argv: readonly string[]): ProcessList {
  const lines = ctx.lines.filter((l) => l.text.trim() !== "");
  const header = lines[0];
  if (header === undefined) throw new ParseFailure("The output is empty");
  const columns = tokens(header.text, 64).map((t) => t.text);
  if (!columns.includes("PID")) {
    throw new ParseFailure("The first line is not a ps header with a PID column", header.n);
  }
  const last = columns[columns.length - 1]!;
  const tail = TAIL.has(last);
  const fixed = tail ? columns.length - 1 : columns.length;
  const processes: ProcessEntry[] = [];
  for (const line of lines.slice(1)) {
    const tok = tokens(line.text, fixed);
    if (tok.length < fixed) {
      ctx.unparsed(line);
      continue;
    }
    const d: Draft = {};
    let ok = true;
    for (let i = 0; i < fixed && ok; i++) {
      const name = columns[i]!;
      const v = ctx.short(tok[i]!.text);
      const set = COLUMNS[name];
      if (set) ok = set(d, v);
      else (d.extra ??= {})[ctx.short(name)] = v;
    }
    if (!ok || d.pid === undefined) {
      ctx.unparsed(line);
      continue;
    }
    if (tail) {
      const at = fixed === 0 ? 0 : tok[fixed - 1]!.end;
      const cmd = line.text.slice(at).trim();
      if (cmd.length === 0 && last !== "COMM") {
        ctx.unparsed(line);
        continue;
      }
      d.command = ctx.clip(cmd);
      if (cmd.startsWith("[") && cmd.endsWith("]") && !cmd.includes(" ")) d.kernel_thread = true;
    } else {
      // more words than columns: a value with spaces in a middle column
      if (tokens(line.text, fixed + 1).length > fixed) {
        ctx.unparsed(line);
        continue;
      }
    }
    if (ctx.room(processes)) processes.push(compact(d as ProcessEntry));
  }
  if (processes.length === 0 && ctx.unparsedCount > 0) {
    throw new ParseFailure("No process line could be read", ctx.firstUnparsed);
  }
  return { kind: "process_list", columns, processes };
}

/** "0:42", "1234:56", "00:00:42", "1-02:03:04" → seconds. */
export function cpuSeconds(v: string): number | undefined {
  if (v.length > 20) return undefined;
  let days = 0;
  let rest = v;
  const dash = v.indexOf("-");
  if (dash >= 0) {
    const d = toUint(v.slice(0, dash));
    if (d === undefined) return undefined;
    days = d;
    rest = v.slice(dash + 1);
  }
  const parts = rest.split(":").map((p) => toUint(p));
  if (parts.length < 2 || parts.length > 3 || parts.some((p) => p === undefined)) return undefined;
  const [a, b, c] = parts as number[];
  const s = parts.length === 3 ? a! * 3600 + b! * 60 + c! : a! * 60 + b!;
  return days * 86400 + s;
}
