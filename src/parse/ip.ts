/**
 * `ip -j addr`, `ip -j link`, `ip -j route` (iproute2 JSON, also `-p` pretty): the JSON is
 * checked field by field against the schema; keys without a typed field are kept in `extra`
 * as JSON text, so nothing is dropped and the result stays strictly typed.
 */
import { ParseContext, ParseFailure } from "./_text.ts";
import type {
  IpAddrInfo,
  IpAddrList,
  IpInterface,
  IpLinkList,
  IpRoute,
  IpRouteList,
} from "./schema.ts";

export type IpObject = "addr" | "link" | "route";

const OBJECTS: [IpObject, string][] = [["addr", "address"], ["link", "link"], ["route", "route"]];

/** `ip -j a`, `ip -json -4 addr show dev eth0`, `ip -j ro` → the object; undefined otherwise. */
export function ipObject(args: readonly string[]): IpObject | undefined {
  let json = false;
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a.startsWith("-")) {
      const name = a.replace(/^--?/, "");
      if (name.length > 0 && name.startsWith("j") && "json".startsWith(name)) json = true;
      if (name === "n" || name === "netns" || name === "rc" || name === "rcvbuf") i++;
      if (name === "b" || name === "batch" || name === "force") return undefined;
      continue;
    }
    if (!json) return undefined;
    for (const [obj, full] of OBJECTS) {
      if (full.startsWith(a)) {
        const sub = args[i + 1];
        return sub !== undefined && MUTATING.includes(sub) ? undefined : obj;
      }
    }
    return undefined;
  }
  return undefined;
}

/** Subcommands that change state or stream: their output is not a listing. */
const MUTATING = [
  "add",
  "del",
  "delete",
  "change",
  "replace",
  "flush",
  "set",
  "save",
  "restore",
  "monitor",
  "append",
  "prepend",
];

export function ipMatches(obj: IpObject): (args: readonly string[]) => boolean {
  return (args) => ipObject(args) === obj;
}

type Json = Record<string, unknown>;
type Spec = Record<string, "string" | "uint" | "bool" | "strings">;

const IFACE: Spec = {
  ifindex: "uint",
  ifname: "string",
  link: "string",
  flags: "strings",
  mtu: "uint",
  qdisc: "string",
  master: "string",
  operstate: "string",
  linkmode: "string",
  group: "string",
  txqlen: "uint",
  link_type: "string",
  address: "string",
  broadcast: "string",
};
const ADDR: Spec = {
  family: "string",
  local: "string",
  address: "string",
  prefixlen: "uint",
  broadcast: "string",
  scope: "string",
  label: "string",
  dynamic: "bool",
  noprefixroute: "bool",
  valid_life_time: "uint",
  preferred_life_time: "uint",
};
const ROUTE: Spec = {
  type: "string",
  dst: "string",
  gateway: "string",
  dev: "string",
  protocol: "string",
  scope: "string",
  prefsrc: "string",
  metric: "uint",
  table: "string",
  pref: "string",
  flags: "strings",
};

/** Typed keys of `spec` from `o`; the others (and mistyped ones) into `extra`. */
function pick(ctx: ParseContext, o: Json, spec: Spec, skip: string[] = []): Json {
  const out: Json = {};
  const extra: Record<string, string> = {};
  for (const [k, v] of Object.entries(o)) {
    if (skip.includes(k)) continue;
    const kind = spec[k];
    if (kind === "string" && typeof v === "string") out[k] = ctx.short(v);
    else if (kind === "uint" && Number.isSafeInteger(v) && (v as number) >= 0) out[k] = v;
    else if (kind === "bool" && typeof v === "boolean") out[k] = v;
    else if (kind === "strings" && Array.isArray(v) && v.every((s) => typeof s === "string")) {
      out[k] = v.slice(0, 256).map((s) => ctx.short(s as string));
    } else if (Object.keys(extra).length < 1000) {
      extra[ctx.short(k)] = ctx.clip(JSON.stringify(v) ?? "null");
    }
  }
  if (Object.keys(extra).length > 0) out.extra = extra;
  return out;
}

function readArray(ctx: ParseContext, what: string): Json[] {
  const text = ctx.lines.map((l) => l.text).join("\n").trim();
  if (text === "") throw new ParseFailure("The output is empty");
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (e) {
    throw new ParseFailure(
      `The output is not JSON (run ip with -j): ${String((e as Error).message).slice(0, 200)}`,
    );
  }
  if (!Array.isArray(data)) throw new ParseFailure(`Expected a JSON array of ${what}`);
  const out: Json[] = [];
  for (let i = 0; i < data.length; i++) {
    const v = data[i];
    if (v === null || typeof v !== "object" || Array.isArray(v)) {
      ctx.note({ message: `Item ${i} of the array is not an object: skipped` });
      continue;
    }
    if (ctx.room(out)) out.push(v as Json);
  }
  return out;
}

function iface(ctx: ParseContext, o: Json, withAddrs: boolean): IpInterface {
  const out = pick(ctx, o, IFACE, withAddrs ? ["addr_info"] : []) as IpInterface;
  if (withAddrs && Array.isArray(o.addr_info)) {
    const infos: IpAddrInfo[] = [];
    for (const a of o.addr_info.slice(0, 10_000)) {
      if (a !== null && typeof a === "object" && !Array.isArray(a)) {
        infos.push(pick(ctx, a as Json, ADDR) as IpAddrInfo);
      }
    }
    out.addr_info = infos;
  }
  return out;
}

export function parseIpAddr(ctx: ParseContext, _argv: readonly string[]): IpAddrList {
  return {
    kind: "ip_addr",
    interfaces: readArray(ctx, "interfaces").map((o) => iface(ctx, o, true)),
  };
}

export function parseIpLink(ctx: ParseContext, _argv: readonly string[]): IpLinkList {
  return { kind: "ip_link", interfaces: readArray(ctx, "links").map((o) => iface(ctx, o, false)) };
}

export function parseIpRoute(ctx: ParseContext, _argv: readonly string[]): IpRouteList {
  return {
    kind: "ip_route",
    routes: readArray(ctx, "routes").map((o) => pick(ctx, o, ROUTE) as IpRoute),
  };
}
