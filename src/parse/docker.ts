/**
 * `docker ps` / `docker container ls` (docker 20 → 27): the default table (columns found by
 * the header's offsets, so empty PORTS cells and multi-word STATUS stay in place, `-a`, `-s`,
 * `--no-trunc`) and `--format '{{json .}}'` / `--format json` (one JSON object per line).
 */
import { compact, flags, type Line, ParseContext, ParseFailure } from "./_text.ts";
import type { ContainerEntry, ContainerList } from "./schema.ts";

export type DockerFormat = "table" | "json";

/** The format this `docker …` argv prints, or undefined when it is not a listing we read. */
export function dockerFormat(args: readonly string[]): DockerFormat | undefined {
  const f = flags(args, "fn", [
    "filter",
    "format",
    "last",
    "context",
    "host",
    "config",
    "log-level",
  ]);
  const [a, b] = f.operands;
  const ps = a === "ps" || (a === "container" && (b === "ls" || b === "list" || b === "ps"));
  if (!ps || f.short.has("q") || f.long.has("quiet") || f.long.has("help")) return undefined;
  const fmt = f.values.get("format") ?? shortFormat(args);
  if (fmt === undefined || fmt === "table") return "table";
  const compactFmt = fmt.replace(/ /g, "");
  if (compactFmt === "json" || compactFmt === "{{json.}}") return "json";
  return undefined;
}

function shortFormat(args: readonly string[]): string | undefined {
  for (let i = 0; i < args.length; i++) {
    if (args[i] === "--format") return args[i + 1];
  }
  return undefined;
}

export function dockerMatches(args: readonly string[]): boolean {
  return dockerFormat(args) !== undefined;
}

const TABLE_COLUMNS: Record<string, keyof ContainerEntry> = {
  "CONTAINER ID": "id",
  IMAGE: "image",
  COMMAND: "command",
  CREATED: "created",
  STATUS: "status",
  PORTS: "ports",
  NAMES: "names",
  SIZE: "size",
};

export function parseDocker(ctx: ParseContext, argv: readonly string[]): ContainerList {
  const lines = ctx.lines.filter((l) => l.text.trim() !== "");
  const first = lines[0];
  if (first === undefined) throw new ParseFailure("The output is empty");
  const format = dockerFormat(argv.slice(1)) ??
    (first.text.trimStart().startsWith("{") ? "json" : "table");
  const containers = format === "json" ? readJson(ctx, lines) : readTable(ctx, lines);
  if (containers.length === 0 && ctx.unparsedCount > 0) {
    throw new ParseFailure("No container line could be read", ctx.firstUnparsed);
  }
  return { kind: "container_list", format, containers };
}

interface Column {
  name: string;
  start: number;
}

function readTable(ctx: ParseContext, lines: Line[]): ContainerEntry[] {
  const header = lines[0]!;
  const cols: Column[] = [];
  const h = header.text;
  // header names are separated by two or more spaces (names themselves hold single spaces)
  let i = 0;
  while (i < h.length) {
    while (i < h.length && h[i] === " ") i++;
    if (i >= h.length) break;
    const start = i;
    while (i < h.length && !(h[i] === " " && (h[i + 1] === " " || i + 1 === h.length))) i++;
    cols.push({ name: h.slice(start, i), start });
  }
  if (cols[0]?.name !== "CONTAINER ID" || !cols.some((c) => c.name === "NAMES")) {
    throw new ParseFailure(
      "The first line is not a docker ps header (CONTAINER ID … NAMES)",
      header.n,
    );
  }
  const out: ContainerEntry[] = [];
  for (const line of lines.slice(1)) {
    const t = line.text;
    const cells: Record<string, string> = {};
    let aligned = true;
    for (let c = 0; c < cols.length; c++) {
      const { name, start } = cols[c]!;
      const end = c + 1 < cols.length ? cols[c + 1]!.start : t.length;
      if (start > 0 && start < t.length && t[start - 1] !== " ") aligned = false;
      cells[name] = t.slice(start, Math.max(start, end)).trim();
    }
    const id = cells["CONTAINER ID"] ?? "";
    const names = cells["NAMES"] ?? "";
    if (!aligned || !/^[0-9a-f]{12,64}$/.test(id) || names === "") {
      ctx.unparsed(line);
      continue;
    }
    const e: Record<string, unknown> = {};
    const extra: Record<string, string> = {};
    for (const [name, value] of Object.entries(cells)) {
      const key = TABLE_COLUMNS[name];
      if (key === undefined) {
        if (value !== "") extra[ctx.short(name)] = ctx.clip(value);
        continue;
      }
      e[key] = value;
    }
    if (Object.keys(extra).length > 0) e.extra = extra;
    if (ctx.room(out)) out.push(entry(ctx, e as Record<string, string>));
  }
  return out;
}

/** Typed fields from the raw cells (table) or JSON keys. */
function entry(
  ctx: ParseContext,
  raw: Record<string, string | Record<string, string>>,
): ContainerEntry {
  const s = (k: string) => typeof raw[k] === "string" ? raw[k] as string : undefined;
  let command = s("command");
  if (
    command !== undefined && command.length >= 2 && command.startsWith('"') && command.endsWith('"')
  ) {
    command = command.slice(1, -1);
  }
  const status = s("status");
  const derived = status === undefined ? {} : stateOf(status);
  const ports = s("ports");
  return compact({
    id: ctx.short(s("id") ?? ""),
    image: ctx.clip(s("image") ?? ""),
    command: command === undefined || command === "" ? undefined : ctx.clip(command),
    created: s("created") ? ctx.short(s("created")!) : undefined,
    status: status ? ctx.short(status) : undefined,
    state: s("state") ? ctx.short(s("state")!) : derived.state,
    exit_code: derived.exit,
    health: derived.health,
    ports: ports ? ports.split(", ").slice(0, 1000).map((p) => ctx.short(p)) : undefined,
    names: (s("names") ?? "").split(",").filter((n) => n !== "").slice(0, 1000).map((n) =>
      ctx.short(n)
    ),
    size: s("size") ? ctx.short(s("size")!) : undefined,
    extra: raw.extra as Record<string, string> | undefined,
  });
}

/** "Up 3 days (healthy)", "Exited (137) 4 weeks ago", "Up 2 days (Paused)", "Restarting (1) …". */
function stateOf(status: string): { state?: string; exit?: number; health?: string } {
  const paren = (from: number) => {
    const a = status.indexOf("(", from);
    const b = a < 0 ? -1 : status.indexOf(")", a);
    return a < 0 || b < 0 ? undefined : status.slice(a + 1, b);
  };
  if (status.startsWith("Up ")) {
    const p = paren(0);
    if (p === "Paused") return { state: "paused" };
    if (p !== undefined && ["healthy", "unhealthy", "health: starting"].includes(p)) {
      return { state: "running", health: p === "health: starting" ? "starting" : p };
    }
    return { state: "running" };
  }
  const code = (p: string | undefined) =>
    p !== undefined && /^-?\d{1,5}$/.test(p) ? Number(p) : undefined;
  if (status.startsWith("Exited ")) return compact({ state: "exited", exit: code(paren(0)) });
  if (status.startsWith("Restarting ")) {
    return compact({ state: "restarting", exit: code(paren(0)) });
  }
  if (status === "Created") return { state: "created" };
  if (status.startsWith("Removal In Progress")) return { state: "removing" };
  if (status === "Dead") return { state: "dead" };
  return {};
}

const JSON_KEYS: Record<string, string> = {
  ID: "id",
  Image: "image",
  Command: "command",
  RunningFor: "created",
  Status: "status",
  State: "state",
  Ports: "ports",
  Names: "names",
  Size: "size",
};

function readJson(ctx: ParseContext, lines: Line[]): ContainerEntry[] {
  const out: ContainerEntry[] = [];
  for (const line of lines) {
    let o: unknown;
    try {
      o = JSON.parse(line.text);
    } catch {
      ctx.unparsed(line); // not a JSON line: counted, the others still count
      continue;
    }
    if (
      o === null || typeof o !== "object" || Array.isArray(o) ||
      typeof (o as Record<string, unknown>).ID !== "string"
    ) {
      ctx.unparsed(line);
      continue;
    }
    const raw: Record<string, string | Record<string, string>> = {};
    const extra: Record<string, string> = {};
    for (const [k, v] of Object.entries(o as Record<string, unknown>)) {
      const key = JSON_KEYS[k];
      const text = typeof v === "string" ? v : JSON.stringify(v) ?? "null";
      if (key !== undefined) raw[key] = text;
      else if (text !== "" && Object.keys(extra).length < 1000) {
        extra[ctx.short(k)] = ctx.clip(text);
      }
    }
    if (Object.keys(extra).length > 0) raw.extra = extra;
    if (ctx.room(out)) out.push(entry(ctx, raw));
  }
  return out;
}
