/**
 * HTTP response heads as `curl -I` / `curl -sI` / `curl -sIL` print them: one block per
 * response (redirects, `100 Continue`, a proxy's CONNECT reply), each a status line and
 * `Name: value` lines, ended by a blank line. Obsolete line folding is joined to the value.
 */
import { compact, flags, type Line, ParseContext, ParseFailure, toUint } from "./_text.ts";
import type { HttpResponseHeader, HttpResponses } from "./schema.ts";

/** curl's short options that take an argument (the rest of the cluster or the next word). */
const CURL_VALUE = "AbcCdDeEFHKmoQrTuUwxXYyzt";

export function curlMatches(args: readonly string[]): boolean {
  const f = flags(args, CURL_VALUE, [
    "header",
    "output",
    "request",
    "user",
    "data",
    "write-out",
    "user-agent",
    "cookie",
    "proxy",
    "max-time",
    "connect-timeout",
    "config",
    "url",
  ]);
  const head = f.short.has("I") || f.long.has("head");
  const noisy = f.short.has("v") || f.long.has("verbose") || f.short.has("w") ||
    f.long.has("write-out") || f.long.has("trace") || f.long.has("trace-ascii") ||
    f.short.has("K") || f.long.has("config") || f.long.has("help");
  return head && !noisy;
}

const MAX_MAP_VALUE = 65_536;

export function parseHttpHeaders(ctx: ParseContext, _argv: readonly string[]): HttpResponses {
  const responses: HttpResponseHeader[] = [];
  let cur: HttpResponseHeader | undefined;
  let afterHeaders: Line[] = [];
  for (const line of ctx.lines) {
    const t = line.text;
    if (t === "") {
      cur = undefined;
      continue;
    }
    if (cur === undefined) {
      const status = statusLine(t);
      if (status === undefined) {
        afterHeaders.push(line);
        continue;
      }
      for (const l of afterHeaders) ctx.unparsed(l);
      afterHeaders = [];
      cur = compact({
        status_line: ctx.clip(t),
        http_version: status.version,
        status_code: status.code,
        reason: status.reason === "" ? undefined : ctx.short(status.reason),
        headers: [],
        header_map: {},
      });
      if (ctx.room(responses, 1000)) responses.push(cur);
      continue;
    }
    if ((t.startsWith(" ") || t.startsWith("\t")) && cur.headers.length > 0) {
      const last = cur.headers[cur.headers.length - 1]!;
      last[1] = ctx.clip(`${last[1]} ${t.trim()}`);
      continue;
    }
    const colon = t.indexOf(":");
    const name = colon > 0 ? t.slice(0, colon) : "";
    if (name === "" || name.includes(" ") || name.includes("\t")) {
      ctx.unparsed(line);
      continue;
    }
    if (ctx.room(cur.headers, 10_000)) {
      cur.headers.push([ctx.short(name), ctx.clip(t.slice(colon + 1).trim())]);
    }
  }
  if (afterHeaders.length > 0) {
    ctx.note({
      message:
        `${afterHeaders.length} line(s) after the last header block were not parsed (a body?)`,
      lines: afterHeaders.slice(0, 10).map((l) => l.n),
      count: afterHeaders.length,
    });
  }
  if (responses.length === 0) {
    throw new ParseFailure("No HTTP status line (HTTP/x NNN …) in the output", ctx.firstUnparsed);
  }
  for (const r of responses) {
    const map: Record<string, string> = {};
    for (const [n, v] of r.headers) {
      const k = n.toLowerCase();
      const prev = map[k];
      const joined = prev === undefined ? v : `${prev}${k === "set-cookie" ? "\n" : ", "}${v}`;
      map[k] = joined.length > MAX_MAP_VALUE ? joined.slice(0, MAX_MAP_VALUE) : joined;
    }
    r.header_map = map;
  }
  return { kind: "http_responses", responses };
}

/** "HTTP/1.1 301 Moved Permanently", "HTTP/2 200", "HTTP/3 204 " → parts. */
function statusLine(t: string): { version: string; code: number; reason: string } | undefined {
  if (!t.startsWith("HTTP/")) return undefined;
  const sp = t.indexOf(" ");
  if (sp < 0 || sp > 16) return undefined;
  const version = t.slice(5, sp);
  if (!/^\d(?:\.\d)?$/.test(version)) return undefined;
  const codeText = t.slice(sp + 1, sp + 4);
  const code = toUint(codeText);
  if (code === undefined || codeText.length !== 3) return undefined;
  const after = t.slice(sp + 4);
  if (after !== "" && !after.startsWith(" ")) return undefined;
  return { version, code, reason: after.trim() };
}
