/**
 * `termada servers …`: the operator's server inventory (the config file's servers and those
 * added live) and the open port forwards, through the running daemon's operator API
 * (`/api/servers`, `/api/forwards`) over its Unix socket, like the other operator commands.
 * The daemon validates what is added; this file only parses the command line and prints.
 */
import { TermadaError } from "../shared/mod.ts";
import { call, type OperatorContext, paths } from "./operator.ts";
import type { ForwardList, OperatorServerList, ServerAddInput } from "../wire/mod.ts";

import { type Options, strictArgs, subcommand, table } from "./_args.ts";

const COMMON = {
  config: { type: "string" },
  json: { type: "boolean" },
  help: { type: "boolean", short: "h" },
} as const satisfies Options;

const USAGE = {
  list: `Usage: termada servers [list] [--json] [--config FILE]
  Every server agents may reach by name: the config file's and those added live, with what
  the last connection attempt found (reachable, or its error).
`,
  add: `Usage: termada servers add <name> --host HOST --user USER [--port PORT] [--tag TAG]...
                           [--host-key KEY] [--auth ENTRY] [--json] [--config FILE]
  Registers a server live (kept in the state directory; config-file servers stay read-only).
  --host-key pins the server's public key ("ssh-ed25519 AAAA…" as in a .pub file, or its
  "SHA256:…" fingerprint); without it the first connection records the key it sees.
  --auth names a vault entry (answers NOT_SUPPORTED until the vault exists).
  --tag may repeat (or take a comma-separated list).
`,
  rm: `Usage: termada servers rm <name> [--json] [--config FILE]
  Removes a server added live: its port forwards close; open sessions keep running.
  Servers from the config file are removed by editing the config.
`,
  forget: `Usage: termada servers forget <name> [--json] [--config FILE]
  Forgets the recorded host key of a server (after it was really re-keyed): the next
  connection records the key it then sees.
`,
  forwards: `Usage: termada servers forwards [--json] [--config FILE]
  Every open port forward of every agent: owner, server, remote and local ends, traffic.
`,
} as const;
type Sub = keyof typeof USAGE;

const HELP = `Usage: termada servers <command> [options]
  list       Every server and its reachability (the default)
  add        Register a server live
  rm         Remove a live server
  forget     Forget a server's recorded host key
  forwards   The open port forwards
Run termada servers <command> --help for one command's options.
`;

const ADD_OPTIONS = {
  ...COMMON,
  host: { type: "string" },
  user: { type: "string" },
  port: { type: "string" },
  tag: { type: "string", multiple: true },
  "host-key": { type: "string" },
  auth: { type: "string" },
} as const satisfies Options;

function parse<O extends Options>(sub: Sub, args: string[], options: O, positionals: number) {
  return strictArgs(`servers ${sub}`, args, options, positionals);
}

/** The one server name `add`, `rm` and `forget` take. */
function nameOf(sub: Sub, positionals: string[]): string {
  const name = positionals[0];
  if (!name) {
    throw new TermadaError(
      "INVALID_ARGUMENT",
      `Missing server name: termada servers ${sub} <name>`,
    );
  }
  return name;
}

function address(s: { user: string; host: string; port: number }): string {
  const host = s.host.includes(":") ? `[${s.host}]` : s.host;
  return `${s.user}@${host}:${s.port}`;
}

function reachability(s: OperatorServerList["servers"][number]): string {
  if (s.reachable === undefined) return "not tried yet";
  if (s.reachable) return "reachable";
  return `unreachable${s.last_error ? `: ${s.last_error.replace(/\s+/g, " ")}` : ""}`;
}

function bytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1 << 20) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / (1 << 20)).toFixed(1)} MiB`;
}

const json = (v: unknown) => JSON.stringify(v, null, 2) + "\n";

/**
 * `termada servers [list] | add | rm | forget | forwards`: resolves with the exit code; bad usage
 * throws INVALID_ARGUMENT (exit 2), a daemon that is not running SERVER_UNREACHABLE.
 */
export async function serversCommand(args: string[], ctx: OperatorContext): Promise<number> {
  const picked = subcommand<Sub>("servers", args, USAGE, "list");
  if (!picked) return await help(ctx, HELP);
  const { sub, rest, explicit } = picked;
  switch (sub) {
    case "list": {
      const { values } = parse("list", rest, COMMON, 0);
      // `termada servers --help` is the overview; `termada servers list --help` the command's.
      if (values.help) return await help(ctx, explicit ? USAGE.list : HELP);
      const r = await call(await paths(values.config), "GET", "/servers") as OperatorServerList;
      if (values.json) await ctx.out(json(r.servers));
      else if (r.servers.length === 0) {
        await ctx.out(
          "No servers. Add one with termada servers add <name> --host HOST --user USER\n",
        );
      } else {
        await ctx.out(table(
          ["NAME", "ADDRESS", "TAGS", "SOURCE", "STATUS"],
          r.servers.map((s) => [
            s.name,
            address(s),
            s.tags.join(",") || "-",
            s.source,
            reachability(s),
          ]),
        ));
      }
      return 0;
    }
    case "add": {
      const { values, positionals } = parse("add", rest, ADD_OPTIONS, 1);
      if (values.help) return await help(ctx, USAGE.add);
      const name = nameOf("add", positionals);
      for (const flag of ["host", "user"] as const) {
        if (values[flag] === undefined) {
          throw new TermadaError(
            "INVALID_ARGUMENT",
            `Missing "--${flag}": termada servers add ${name} --host HOST --user USER`,
          );
        }
      }
      let port: number | undefined;
      if (values.port !== undefined) {
        port = Number(values.port);
        if (!/^\d+$/.test(values.port) || port < 1 || port > 65535) {
          throw new TermadaError(
            "INVALID_ARGUMENT",
            `"--port" must be 1 to 65535, not "${values.port}"`,
          );
        }
      }
      const tags = (values.tag ?? []).flatMap((t) => t.split(",")).map((t) => t.trim())
        .filter((t) => t !== "");
      const body: ServerAddInput = {
        name,
        host: values.host!,
        user: values.user!,
        ...(port === undefined ? {} : { port }),
        ...(tags.length === 0 ? {} : { tags }),
        ...(values["host-key"] === undefined ? {} : { host_key: values["host-key"] }),
        ...(values.auth === undefined ? {} : { auth: values.auth }),
      };
      const r = await call(
        await paths(values.config),
        "POST",
        "/servers",
        body,
      ) as OperatorServerList;
      const added = r.servers.find((s) => s.name === name);
      if (values.json) await ctx.out(json(added ?? r.servers));
      else {
        await ctx.out(
          `Added server "${name}"${added ? ` (${address(added)})` : ""}${
            added?.host_key ? "; host key pinned" : "; its host key is recorded on first connect"
          }\n`,
        );
      }
      return 0;
    }
    case "rm": {
      const { values, positionals } = parse("rm", rest, COMMON, 1);
      if (values.help) return await help(ctx, USAGE.rm);
      const name = nameOf("rm", positionals);
      const r = await call(
        await paths(values.config),
        "DELETE",
        `/servers/${encodeURIComponent(name)}`,
      ) as OperatorServerList;
      if (values.json) await ctx.out(json(r.servers));
      else await ctx.out(`Removed server "${name}"\n`);
      return 0;
    }
    case "forget": {
      const { values, positionals } = parse("forget", rest, COMMON, 1);
      if (values.help) return await help(ctx, USAGE.forget);
      const name = nameOf("forget", positionals);
      const r = await call(
        await paths(values.config),
        "POST",
        `/servers/${encodeURIComponent(name)}/forget-host-key`,
        {},
      ) as { ok: boolean; server: string; removed: number };
      if (values.json) await ctx.out(json(r));
      else if (r.removed === 0) await ctx.out(`No host key was recorded for "${name}"\n`);
      else {
        await ctx.out(
          `Forgot ${r.removed} host key entr${r.removed === 1 ? "y" : "ies"} of "${name}": ` +
            "the next connection records the key it sees\n",
        );
      }
      return 0;
    }
    case "forwards": {
      const { values } = parse("forwards", rest, COMMON, 0);
      if (values.help) return await help(ctx, USAGE.forwards);
      const r = await call(await paths(values.config), "GET", "/forwards") as ForwardList;
      if (values.json) await ctx.out(json(r.forwards));
      else if (r.forwards.length === 0) await ctx.out("No open forwards.\n");
      else {
        await ctx.out(table(
          ["FORWARD", "OWNER", "SERVER", "REMOTE", "LOCAL", "CONNS", "IN/OUT", "STATE"],
          r.forwards.map((f) => [
            f.forward_id,
            f.owner ?? "-",
            f.server,
            `${f.remote_host}:${f.remote_port}`,
            `${f.local_address}:${f.local_port}`,
            `${f.connections} (${f.total_connections} total)`,
            `${bytes(f.bytes_in)}/${bytes(f.bytes_out)}`,
            f.state === "open" ? "open" : `closed${f.closed_reason ? `: ${f.closed_reason}` : ""}`,
          ]),
        ));
      }
      return 0;
    }
  }
}

async function help(ctx: OperatorContext, text: string): Promise<number> {
  await ctx.out(text);
  return 0;
}
