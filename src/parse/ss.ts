/**
 * `ss` socket tables (`-tlnp`, `-tunlp`, `-tan`, `-a`, with or without `-n`): Netid (when
 * printed), State, Recv-Q, Send-Q, the local and peer `address:port`, and `users:((…))`
 * process lists. Options that add lines per socket (`-i`, `-m`) or change the table (`-s`,
 * `-E`, `-H`) are not matched.
 */
import { compact, flags, ParseContext, ParseFailure, tokens, toUint } from "./_text.ts";
import type { SocketAddress, SocketEntry, SocketList, SocketProcess } from "./schema.ts";

export function ssMatches(args: readonly string[]): boolean {
  const f = flags(args, "fAFN", ["family", "query", "socket", "filter", "net", "kill"]);
  const bad = ["x", "i", "m", "s", "E", "H", "K", "D", "Z", "z", "b", "T", "M", "S", "h", "V"];
  return !(bad.some((c) => f.short.has(c)) || f.long.has("info") || f.long.has("memory") ||
    f.long.has("summary") || f.long.has("events") || f.long.has("no-header") ||
    f.long.has("kill") || f.long.has("unix") || f.long.has("help") || f.long.has("version"));
}

export function parseSs(ctx: ParseContext, _argv: readonly string[]): SocketList {
  const lines = ctx.lines.filter((l) => l.text.trim() !== "");
  const header = lines[0];
  if (header === undefined) throw new ParseFailure("The output is empty");
  const h = header.text.trimStart();
  const netid = h.startsWith("Netid");
  if (!(netid || h.startsWith("State")) || !h.includes("Recv-Q")) {
    throw new ParseFailure("The first line is not an ss header (Netid/State Recv-Q …)", header.n);
  }
  const sockets: SocketEntry[] = [];
  const fixed = netid ? 6 : 5;
  for (const line of lines.slice(1)) {
    const tok = tokens(line.text, fixed);
    if (tok.length < fixed) {
      ctx.unparsed(line);
      continue;
    }
    const f = tok.map((t) => t.text);
    const o = netid ? 1 : 0;
    const recv = toUint(f[o + 1]);
    const send = toUint(f[o + 2]);
    const local = address(ctx, f[o + 3]!);
    const peer = address(ctx, f[o + 4]!);
    if (recv === undefined || send === undefined || !local || !peer) {
      ctx.unparsed(line);
      continue;
    }
    const rest = line.text.slice(tok[fixed - 1]!.end).trim();
    let processes: SocketProcess[] | undefined;
    let extra: string | undefined;
    if (rest.startsWith("users:(")) {
      const end = rest.indexOf("))");
      const users = end < 0 ? rest : rest.slice(0, end + 2);
      processes = users_(ctx, users);
      const after = end < 0 ? "" : rest.slice(end + 2).trim();
      if (after !== "") extra = ctx.clip(after);
      if (processes === undefined) {
        ctx.unparsed(line);
        continue;
      }
    } else if (rest !== "") extra = ctx.clip(rest);
    const e: SocketEntry = compact({
      netid: netid ? ctx.short(f[0]!) : undefined,
      state: ctx.short(f[o]!),
      recv_q: recv,
      send_q: send,
      local,
      peer,
      processes,
      extra,
    });
    if (ctx.room(sockets)) sockets.push(e);
  }
  if (sockets.length === 0 && ctx.unparsedCount > 0) {
    throw new ParseFailure("No socket line could be read", ctx.firstUnparsed);
  }
  return { kind: "socket_list", sockets };
}

/** "0.0.0.0:22", "[::]:80", "127.0.0.53%lo:53", "*:*", "[::ffff:1.2.3.4]:9000", "[fe80::1]%eth0:5353". */
function address(ctx: ParseContext, s: string): SocketAddress | undefined {
  const colon = s.lastIndexOf(":");
  if (colon <= 0 || colon === s.length - 1) return undefined;
  let host = s.slice(0, colon);
  const port = s.slice(colon + 1);
  let iface: string | undefined;
  const pct = host.lastIndexOf("%");
  if (pct > 0 && !host.slice(pct).includes("]")) {
    iface = host.slice(pct + 1);
    host = host.slice(0, pct);
  }
  if (host.startsWith("[") && host.endsWith("]")) host = host.slice(1, -1);
  const n = toUint(port);
  return compact({
    text: ctx.short(s),
    address: ctx.short(host),
    interface: iface === undefined ? undefined : ctx.short(iface),
    port: ctx.short(port),
    port_number: n !== undefined && n <= 65535 ? n : undefined,
  });
}

/** `users:(("nginx",pid=1044,fd=7),("nginx",pid=1043,fd=7))` → processes; a scan, no regex. */
function users_(ctx: ParseContext, s: string): SocketProcess[] | undefined {
  const out: SocketProcess[] = [];
  let i = "users:(".length;
  while (i < s.length && ctx.room(out, 1000)) {
    if (s[i] === ",") i++;
    if (s[i] === ")") break;
    if (s[i] !== "(" || s[i + 1] !== '"') return undefined;
    const close = s.indexOf('",', i + 2);
    const closeEnd = s.indexOf('")', i + 2);
    const q = close < 0 ? closeEnd : closeEnd < 0 ? close : Math.min(close, closeEnd);
    if (q < 0) return undefined;
    const p: SocketProcess = { name: ctx.clip(s.slice(i + 2, q)) };
    const end = s.indexOf(")", q + 1);
    if (end < 0) return undefined;
    for (const kv of s.slice(q + 2, end).split(",")) {
      if (kv.startsWith("pid=")) p.pid = toUint(kv.slice(4));
      else if (kv.startsWith("fd=")) p.fd = toUint(kv.slice(3));
    }
    out.push(compact(p));
    i = end + 1;
  }
  return out;
}
