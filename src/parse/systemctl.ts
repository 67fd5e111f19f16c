/**
 * `systemctl status UNIT…` (systemd 245 → 257 layouts): the header line, the `Key: value`
 * block (Loaded, Active, Main PID, Tasks, Memory, CPU, CGroup with its process tree, Drop-In,
 * Docs, Process, Trigger…), then the journal excerpt. Several units are separated by blank
 * lines; "Unit x could not be found." lines are collected as errors.
 */
import { compact, flags, humanBytes, ParseContext, ParseFailure, tokens, toUint } from "./_text.ts";
import type { CgroupProcess, JournalLine, UnitStatus, UnitStatusList } from "./schema.ts";

const INDICATORS = ["●", "○", "×", "↻", "◌", "*", "x"];

export function systemctlMatches(args: readonly string[]): boolean {
  const f = flags(args, "HMnopst", [
    "host",
    "machine",
    "lines",
    "output",
    "property",
    "type",
    "state",
  ]);
  if (f.operands[0] !== "status" || f.operands.length < 2) return false;
  return !(f.short.has("o") || f.long.has("output") || f.long.has("help"));
}

const MONTHS = new Set([
  "Jan",
  "Feb",
  "Mar",
  "Apr",
  "May",
  "Jun",
  "Jul",
  "Aug",
  "Sep",
  "Oct",
  "Nov",
  "Dec",
]);

export function parseSystemctl(ctx: ParseContext, _argv: readonly string[]): UnitStatusList {
  const units: UnitStatus[] = [];
  const errors: string[] = [];
  let unit: UnitStatus | undefined;
  const st: KeyState = { lastKey: "", dropInDir: "" };
  let inLogs = false;
  for (const line of ctx.lines) {
    const t = line.text;
    if (t.trim() === "") {
      if (unit !== undefined) inLogs = true;
      st.lastKey = "";
      continue;
    }
    if (
      (t.startsWith("Unit ") && t.includes(" could not be found")) || t.startsWith("Warning: ") ||
      t.startsWith("Failed to ")
    ) {
      if (ctx.room(errors, 1000)) errors.push(ctx.clip(t));
      continue;
    }
    const head = headerLine(ctx, t);
    if (head !== undefined) {
      unit = head;
      inLogs = false;
      st.lastKey = "";
      if (ctx.room(units, 10_000)) units.push(unit);
      continue;
    }
    if (unit === undefined) {
      ctx.unparsed(line);
      continue;
    }
    if (inLogs) {
      const logs = (unit.logs ??= []);
      if (ctx.room(logs, 10_000)) logs.push(journal(ctx, t));
      continue;
    }
    if (!property(ctx, unit, t, st)) ctx.unparsed(line);
  }
  if (units.length === 0) {
    throw new ParseFailure(
      errors.length > 0 ? errors[0]!.slice(0, 500) : "No unit header line (● name.service - …)",
      ctx.firstUnparsed,
    );
  }
  return compact({
    kind: "unit_status" as const,
    units,
    errors: errors.length > 0 ? errors : undefined,
  });
}

/** "● nginx.service - A high performance web server" → a new unit. */
function headerLine(ctx: ParseContext, t: string): UnitStatus | undefined {
  const ind = INDICATORS.find((i) => t.startsWith(`${i} `));
  if (ind === undefined) return undefined;
  const rest = t.slice(ind.length + 1);
  const dash = rest.indexOf(" - ");
  const name = dash < 0 ? rest.trim() : rest.slice(0, dash);
  if (name === "" || name.includes(" ") || !name.includes(".")) return undefined;
  return compact({
    unit: ctx.short(name),
    description: dash < 0 ? undefined : ctx.clip(rest.slice(dash + 3)),
    indicator: ind,
  });
}

/** Where the key block is: the key continuation lines belong to, the Drop-In directory. */
interface KeyState {
  lastKey: string;
  dropInDir: string;
}

/** One line of the key block; continuation lines (no key) belong to `st.lastKey`. */
function property(ctx: ParseContext, u: UnitStatus, t: string, st: KeyState): boolean {
  const lastKey = st.lastKey;
  const colon = t.indexOf(": ");
  const keyPart = colon < 0 ? "" : t.slice(0, colon);
  const isKey = keyPart.length > 0 && keyPart.length <= 48 && keyPart.startsWith(" ") &&
    /^ *[A-Z][A-Za-z -]{0,30}$/.test(keyPart);
  if (!isKey) {
    if (!t.startsWith(" ") || lastKey === "") return false;
    const v = t.trim();
    if (lastKey === "CGroup") {
      // sub-cgroup lines ("├─app.slice") only shape the tree: the processes are what count
      const p = cgroupProcess(ctx, v);
      const list = (u.cgroup_processes ??= []);
      if (p !== undefined && ctx.room(list, 10_000)) list.push(p);
      return true;
    }
    if (lastKey === "Drop-In") {
      // "Drop-In: /etc/…/x.service.d" then "└─override.conf, 10-limits.conf"; a line that is
      // a path starts the next directory
      if (v.startsWith("/")) st.dropInDir = v;
      else {
        for (const file of stripTree(v).split(", ")) {
          if (file !== "" && ctx.room(u.drop_ins ??= [], 1000)) {
            u.drop_ins.push(ctx.clip(`${st.dropInDir.replace(/\/$/, "")}/${file}`));
          }
        }
      }
    } else if (lastKey === "Docs") pushBounded(ctx, u.docs ??= [], v);
    else if (lastKey === "Process") pushBounded(ctx, u.processes ??= [], v);
    else {
      const props = (u.properties ??= {});
      props[lastKey] = ctx.clip(`${props[lastKey] ?? ""}\n${v}`);
    }
    return true;
  }
  const key = keyPart.trim();
  const v = t.slice(colon + 2).trim();
  st.lastKey = key;
  switch (key) {
    case "Loaded":
      loaded(ctx, u, v);
      return true;
    case "Active":
      active(ctx, u, v);
      return true;
    case "Main PID": {
      const sp = v.indexOf(" ");
      const pid = toUint(sp < 0 ? v : v.slice(0, sp));
      if (pid !== undefined) u.main_pid = pid;
      if (sp > 0 && v.endsWith(")")) {
        const inner = v.slice(sp + 2, -1);
        // "2201 (code=exited, status=1/FAILURE)": the process is gone; keep how it ended
        if (inner.startsWith("code=")) (u.properties ??= {})["Main PID"] = ctx.clip(v);
        else u.main_process = ctx.short(inner);
      }
      return true;
    }
    case "Tasks": {
      const sp = v.indexOf(" ");
      const n = toUint(sp < 0 ? v : v.slice(0, sp));
      if (n !== undefined) u.tasks = n;
      const lim = v.indexOf("(limit: ");
      if (lim >= 0) {
        const l = toUint(v.slice(lim + 8, v.indexOf(")", lim)));
        if (l !== undefined) u.tasks_limit = l;
      }
      return true;
    }
    case "Memory": {
      const sp = v.indexOf(" ");
      const m = sp < 0 ? v : v.slice(0, sp);
      u.memory = ctx.short(m);
      const b = humanBytes(m, 1024);
      if (b !== undefined) u.memory_bytes = b;
      const peak = v.indexOf("peak: ");
      if (peak >= 0) {
        const end = v.slice(peak + 6).search(/[ ,)]/);
        u.memory_peak = ctx.short(end < 0 ? v.slice(peak + 6) : v.slice(peak + 6, peak + 6 + end));
      }
      return true;
    }
    case "CPU":
      u.cpu = ctx.short(v);
      return true;
    case "Status":
      u.status = ctx.clip(v.startsWith('"') && v.endsWith('"') ? v.slice(1, -1) : v);
      return true;
    case "CGroup":
      u.cgroup = ctx.clip(v);
      return true;
    case "Drop-In":
      st.dropInDir = v;
      return true;
    case "Docs":
      pushBounded(ctx, u.docs ??= [], v);
      return true;
    case "Process":
      pushBounded(ctx, u.processes ??= [], v);
      return true;
    case "Trigger":
      u.trigger = ctx.clip(v);
      return true;
    case "Triggers":
      u.triggers = ctx.clip(v);
      return true;
    default: {
      const props = (u.properties ??= {});
      if (Object.keys(props).length < 1000) props[ctx.short(key)] = ctx.clip(v);
      return true;
    }
  }
}

function pushBounded(ctx: ParseContext, list: string[], v: string): void {
  if (ctx.room(list, 1000)) list.push(ctx.clip(v));
}

/** "loaded (/lib/systemd/system/nginx.service; enabled; vendor preset: enabled)". */
function loaded(ctx: ParseContext, u: UnitStatus, v: string): void {
  const paren = v.indexOf(" (");
  u.loaded = ctx.short(paren < 0 ? v : v.slice(0, paren));
  if (paren < 0 || !v.endsWith(")")) return;
  const inner = v.slice(paren + 2, -1);
  if (inner.startsWith("Reason: ")) {
    // "not-found (Reason: Unit x.service not found.)", "bad-setting (Reason: …)"
    (u.properties ??= {}).Reason = ctx.clip(inner.slice(8));
    return;
  }
  const parts = inner.split("; ");
  if (parts[0] !== undefined) u.unit_file = ctx.clip(parts[0]);
  if (parts[1] !== undefined) u.unit_file_state = ctx.short(parts[1]);
  for (const p of parts.slice(2)) {
    if (p.startsWith("vendor preset: ")) u.preset = ctx.short(p.slice(15));
    else if (p.startsWith("preset: ")) u.preset = ctx.short(p.slice(8));
  }
}

/** "active (running) since Mon 2023-05-15 10:21:33 UTC; 2 days ago", "failed (Result: exit-code) since …". */
function active(ctx: ParseContext, u: UnitStatus, v: string): void {
  const sinceAt = v.indexOf(" since ");
  const state = sinceAt < 0 ? v : v.slice(0, sinceAt);
  const paren = state.indexOf(" (");
  u.active = ctx.short(paren < 0 ? state : state.slice(0, paren));
  if (paren >= 0 && state.endsWith(")")) {
    // "activating (auto-restart) (Result: exit-code)": one or more groups
    for (const inner of state.slice(paren + 2, -1).split(") (")) {
      if (inner.startsWith("Result: ")) u.result = ctx.short(inner.slice(8));
      else if (u.sub_state === undefined) {
        const semi = inner.indexOf("; ");
        u.sub_state = ctx.short(semi < 0 ? inner : inner.slice(0, semi));
      }
    }
  }
  if (sinceAt >= 0) {
    const rest = v.slice(sinceAt + 7);
    const semi = rest.indexOf("; ");
    const since = semi < 0 ? rest : rest.slice(0, semi);
    u.since = ctx.short(since);
    if (semi >= 0) u.since_relative = ctx.short(rest.slice(semi + 2));
    const iso = sinceIso(since);
    if (iso !== undefined) u.since_iso = iso;
  }
}

/** "Mon 2023-05-15 10:21:33 UTC" → "2023-05-15T10:21:33Z" (UTC only: other zones are ambiguous). */
function sinceIso(s: string): string | undefined {
  const p = s.split(" ");
  if (p.length !== 4 || (p[3] !== "UTC" && p[3] !== "GMT")) return undefined;
  if (!/^\d{4}-\d\d-\d\d$/.test(p[1]!) || !/^\d\d:\d\d:\d\d$/.test(p[2]!)) return undefined;
  return `${p[1]}T${p[2]}Z`;
}

function stripTree(v: string): string {
  let i = 0;
  while (i < v.length && "├└│─ |`-".includes(v[i]!)) i++;
  return v.slice(i);
}

/** "├─846 nginx: master process …" / "└─640 \"sshd: …\"" → pid and command. */
function cgroupProcess(ctx: ParseContext, v: string): CgroupProcess | undefined {
  const s = stripTree(v);
  const sp = s.indexOf(" ");
  const pid = toUint(sp < 0 ? s : s.slice(0, sp));
  if (pid === undefined || sp < 0) return undefined;
  let cmd = s.slice(sp + 1);
  if (cmd.length >= 2 && cmd.startsWith('"') && cmd.endsWith('"')) cmd = cmd.slice(1, -1);
  return { pid, command: ctx.clip(cmd) };
}

/** "Jun 12 14:03:11 srv systemd[1]: Started …" → parts; anything else keeps only `line`. */
function journal(ctx: ParseContext, t: string): JournalLine {
  const line = ctx.clip(t);
  const tok = tokens(t, 5);
  if (tok.length < 5 || !MONTHS.has(tok[0]!.text) || toUint(tok[1]!.text) === undefined) {
    return { line };
  }
  const time = tok[2]!.text;
  const ident = tok[4]!.text;
  if (!/^\d\d:\d\d:\d\d(?:\.\d{1,6})?$/.test(time) || !ident.endsWith(":")) return { line };
  const bracket = ident.indexOf("[");
  const name = bracket > 0 ? ident.slice(0, bracket) : ident.slice(0, -1);
  const pid = bracket > 0 && ident.endsWith("]:")
    ? toUint(ident.slice(bracket + 1, -2))
    : undefined;
  return compact({
    line,
    time: ctx.short(`${tok[0]!.text} ${tok[1]!.text} ${time}`),
    host: ctx.short(tok[3]!.text),
    identifier: ctx.short(name),
    pid,
    message: ctx.clip(t.slice(tok[4]!.end).trimStart()),
  });
}
