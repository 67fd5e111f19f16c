/**
 * The parser table, `auto` selection by argv, and `parseOutput`, the one entry point: it never
 * throws, whatever the input, and always names the parser it used.
 */
import type { z } from "zod";
import { basename, PARSE_LIMITS, ParseContext, ParseFailure } from "./_text.ts";
import { dfMatches, parseDf } from "./df.ts";
import { dockerMatches, parseDocker } from "./docker.ts";
import { duMatches, parseDu } from "./du.ts";
import { freeMatches, parseFree } from "./free.ts";
import { gitLogMatches, gitStatusMatches, parseGitLog, parseGitStatus } from "./git.ts";
import { curlMatches, parseHttpHeaders } from "./http_headers.ts";
import { ipMatches, parseIpAddr, parseIpLink, parseIpRoute } from "./ip.ts";
import { lsMatches, parseLs } from "./ls.ts";
import { parsePs, psMatches } from "./ps.ts";
import {
  ContainerList,
  DirectoryListing,
  DiskUsage,
  FilesystemList,
  GitLog,
  GitStatus,
  HttpResponses,
  IpAddrList,
  IpLinkList,
  IpRouteList,
  jsonSchemaOf,
  MemoryUsage,
  type ParseResult,
  ProcessList,
  SocketList,
  UnitStatusList,
} from "./schema.ts";
import { parseSs, ssMatches } from "./ss.ts";
import { parseSystemctl, systemctlMatches } from "./systemctl.ts";

/** The environment a parsed command should run with: the C locale, where output depends on it. */
export const C_LOCALE: Readonly<Record<string, string>> = Object.freeze({ LC_ALL: "C" });
const NO_ENV: Readonly<Record<string, string>> = Object.freeze({});

interface ParserDef {
  name: string;
  description: string;
  /** What `auto` looks for in argv, for people. */
  matcher: string;
  /** The command names this parser applies to (argv[0] basename). */
  commands: readonly string[];
  /** argv after the command name → does this parser read what it prints? */
  match: (args: readonly string[]) => boolean;
  parse: (ctx: ParseContext, argv: readonly string[]) => unknown;
  schema: z.ZodType;
  /** Output depends on the locale: run with LC_ALL=C. */
  locale: boolean;
  keepNul?: boolean;
}

const DEFS: readonly ParserDef[] = [
  {
    name: "ls",
    description:
      "ls -l long listings: type, mode, links, owner, group, size or device, mtime, name, symlink target; `dir:` sections and totals",
    matcher:
      "ls with -l, -n, -g or -o (any cluster: -la, -lah, -ln, -li, -ls, -lR); not -m/-x/-C/-Z or --time-style=+FORMAT",
    commands: ["ls"],
    match: lsMatches,
    parse: parseLs,
    schema: DirectoryListing,
    locale: true,
  },
  {
    name: "ps",
    description:
      "ps tables read by header (aux, -ef, -elf, -eo …): typed pid, ppid, user, %cpu, %mem, vsz, rss, tty, stat, start, time; the command keeps its spaces",
    matcher: "ps with a header (not --no-headers, BSD h, or lstart columns)",
    commands: ["ps"],
    match: psMatches,
    parse: parsePs,
    schema: ProcessList,
    locale: true,
  },
  {
    name: "df",
    description:
      "df tables (-h, -H, -k, -P, -T, -i, BSD/macOS): filesystem, type, sizes in bytes, use%, inodes, mount point (spaces kept)",
    matcher: "df (not --output)",
    commands: ["df"],
    match: dfMatches,
    parse: parseDf,
    schema: FilesystemList,
    locale: true,
  },
  {
    name: "du",
    description:
      "du lines: size (bytes from the unit du used, -h/--si units) and path; the -c total",
    matcher: "du (not -0/--null, --time, --inodes)",
    commands: ["du"],
    match: duMatches,
    parse: parseDu,
    schema: DiskUsage,
    locale: true,
  },
  {
    name: "free",
    description:
      "free (-b/-k/-m/-g/-h/--si, -w, -t, -l, old -/+ buffers/cache): Mem, Swap, Total rows in bytes",
    matcher: "free (not -s/-c repeats)",
    commands: ["free"],
    match: freeMatches,
    parse: parseFree,
    schema: MemoryUsage,
    locale: true,
  },
  {
    name: "http_headers",
    description:
      "HTTP response heads (curl -I, -sI, -sIL): one entry per response with status line, version, code, reason, ordered headers and a lower-cased map",
    matcher: "curl with -I/--head (not -v, -w, --trace, -K)",
    commands: ["curl"],
    match: curlMatches,
    parse: parseHttpHeaders,
    schema: HttpResponses,
    locale: false,
  },
  {
    name: "git_status",
    description:
      "git status: --porcelain v1 (-b, -z), -s, --porcelain=v2 (--branch, -z) and the long format: branch, upstream, ahead/behind, changed/renamed/unmerged/untracked/ignored entries",
    matcher: "git [global options] status (not -v, --column)",
    commands: ["git"],
    match: gitStatusMatches,
    parse: parseGitStatus,
    schema: GitStatus,
    locale: true,
    keepNul: true,
  },
  {
    name: "git_log",
    description:
      "git log --oneline (--decorate, --graph): hash, decorations (HEAD branch, tags, refs), subject",
    matcher:
      "git [global options] log with --oneline or --pretty=oneline (not -p, --stat, --name-*, other --format)",
    commands: ["git"],
    match: gitLogMatches,
    parse: parseGitLog,
    schema: GitLog,
    locale: false,
  },
  {
    name: "ip_addr",
    description:
      "ip -j addr: interfaces with flags, mtu, state, MAC and addr_info, validated field by field; other keys kept in extra",
    matcher: "ip with -j/-json and the object address (any prefix: a, addr), show/list",
    commands: ["ip"],
    match: ipMatches("addr"),
    parse: parseIpAddr,
    schema: IpAddrList,
    locale: false,
  },
  {
    name: "ip_link",
    description: "ip -j link: interfaces with flags, mtu, state, MAC; other keys kept in extra",
    matcher: "ip with -j/-json and the object link (l, li…), show/list",
    commands: ["ip"],
    match: ipMatches("link"),
    parse: parseIpLink,
    schema: IpLinkList,
    locale: false,
  },
  {
    name: "ip_route",
    description:
      "ip -j route: dst, gateway, dev, protocol, scope, prefsrc, metric, flags; other keys kept in extra",
    matcher: "ip with -j/-json and the object route (r, ro…), show/list/get",
    commands: ["ip"],
    match: ipMatches("route"),
    parse: parseIpRoute,
    schema: IpRouteList,
    locale: false,
  },
  {
    name: "ss",
    description:
      "ss socket tables (-tlnp, -tunlp, -tan): netid, state, queues, local and peer address/port, users:((…)) processes",
    matcher: "ss (not -x, -i, -m, -s, -E, -H, -K)",
    commands: ["ss"],
    match: ssMatches,
    parse: parseSs,
    schema: SocketList,
    locale: false,
  },
  {
    name: "systemctl_status",
    description:
      "systemctl status UNIT…: unit, description, loaded/unit file/preset, active state and sub-state, since, main pid, tasks, memory, CPU, cgroup processes, journal lines",
    matcher: "systemctl [options] status with at least one unit (not -o/--output)",
    commands: ["systemctl"],
    match: systemctlMatches,
    parse: parseSystemctl,
    schema: UnitStatusList,
    locale: true,
  },
  {
    name: "docker_ps",
    description:
      "docker ps / container ls: the default table (-a, -s, --no-trunc) and --format '{{json .}}' / json lines: id, image, command, created, status, state, exit code, health, ports, names, size",
    matcher:
      "docker ps or docker container ls|list|ps, default or json format (not -q, other --format templates)",
    commands: ["docker"],
    match: dockerMatches,
    parse: parseDocker,
    schema: ContainerList,
    locale: false,
  },
];

const BY_NAME = new Map(DEFS.map((d) => [d.name, d]));

/** What `capabilities` lists for each parser. */
export interface ParserInfo {
  name: string;
  description: string;
  /** What `auto` looks for in argv. */
  matches: string;
  /** Environment the command should run with for this parser (e.g. `{LC_ALL: "C"}`). */
  env: Readonly<Record<string, string>>;
  /** JSON Schema (draft 2020-12) of `parsed`. */
  result_schema: Record<string, unknown>;
}

/** Every parser, for `capabilities` (JSON Schemas computed once, at first use). */
export const PARSERS: readonly ParserInfo[] = DEFS.map((d) => {
  let schema: Record<string, unknown> | undefined;
  return {
    name: d.name,
    description: d.description,
    matches: d.matcher,
    env: d.locale ? C_LOCALE : NO_ENV,
    get result_schema() {
      return schema ??= jsonSchemaOf(d.schema);
    },
  };
});

/** Names `parseOutput` accepts besides "auto". */
export const PARSER_NAMES: readonly string[] = DEFS.map((d) => d.name);

/** The outcome of picking a parser from argv. */
export type ParserChoice = { parser: string; argv: string[] } | { reason: string };

/** Options of `parseOutput`. */
export interface ParseOptions {
  /** "Now" for ls dates printed without a year (default: the current time). */
  now?: Date;
}

/**
 * The argv a command ran as: an exact argv (several words) as it is; one word is a shell line,
 * split here when it is one simple command (quotes and backslashes understood) and refused
 * when it has a pipe, redirection, list, substitution, expansion or subshell.
 */
export function commandArgv(argv: readonly string[]): { argv: string[] } | { reason: string } {
  if (!Array.isArray(argv) || argv.length === 0) return { reason: "The command is empty" };
  if (argv.some((a) => typeof a !== "string")) {
    return { reason: "The command is not a list of strings" };
  }
  if (argv.length > 1) return { argv: [...argv] };
  return splitShellLine(argv[0]!);
}

/** A shell line → words, or why it is not one simple command. Linear, bounded to 64 KiB. */
export function splitShellLine(line: string): { argv: string[] } | { reason: string } {
  if (line.length > 65_536) return { reason: "The shell line is too long to inspect" };
  const words: string[] = [];
  let word = "";
  let inWord = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (c === " " || c === "\t") {
      if (inWord) words.push(word);
      word = "";
      inWord = false;
      continue;
    }
    if (c === "'") {
      const close = line.indexOf("'", i + 1);
      if (close < 0) return { reason: "The shell line has an unclosed quote" };
      word += line.slice(i + 1, close);
      inWord = true;
      i = close;
      continue;
    }
    if (c === '"') {
      let j = i + 1;
      for (; j < line.length && line[j] !== '"'; j++) {
        const d = line[j]!;
        if (d === "$" || d === "`") {
          return { reason: "The shell line expands variables or commands: not a simple command" };
        }
        if (d === "\\" && j + 1 < line.length && '"\\$`'.includes(line[j + 1]!)) j++;
        word += line[j];
      }
      if (j >= line.length) return { reason: "The shell line has an unclosed quote" };
      inWord = true;
      i = j;
      continue;
    }
    if (c === "\\") {
      if (i + 1 < line.length && line[i + 1] !== "\n") word += line[++i];
      inWord = true;
      continue;
    }
    if ("|&;<>()\n".includes(c)) {
      return {
        reason:
          `The shell line is not one simple command (it has "${c}": a pipeline, list, redirection or subshell)`,
      };
    }
    if (c === "$" || c === "`") {
      return { reason: "The shell line expands variables or commands: not a simple command" };
    }
    if ((c === "#") && !inWord) break; // a comment
    word += c;
    inWord = true;
  }
  if (inWord) words.push(word);
  if (words.length === 0) return { reason: "The command is empty" };
  return { argv: words };
}

/** `VAR=x sudo ls -l` → `ls -l` (assignments and a bare sudo/command/exec/nice are not the program). */
function programArgv(argv: string[]): string[] {
  let i = 0;
  while (i < argv.length && /^[A-Za-z_][A-Za-z0-9_]*=/.test(argv[i]!.slice(0, 256))) i++;
  while (i < argv.length && ["sudo", "command", "exec", "nice", "nohup"].includes(argv[i]!)) {
    i++;
    while (i < argv.length && /^[A-Za-z_][A-Za-z0-9_]*=/.test(argv[i]!.slice(0, 256))) i++;
  }
  return argv.slice(i);
}

/** Which parser `auto` would use for this command, or why none. */
export function chooseParser(argv: readonly string[]): ParserChoice {
  const split = commandArgv(argv);
  if ("reason" in split) return { reason: `No parser matches: ${lower(split.reason)}` };
  const words = programArgv(split.argv);
  const cmd = basename(words[0] ?? "");
  if (cmd === "") return { reason: "No parser matches: the command is empty" };
  const args = words.slice(1);
  const candidates = DEFS.filter((d) => d.commands.includes(cmd));
  for (const d of candidates) {
    if (d.match(args)) return { parser: d.name, argv: words };
  }
  if (candidates.length === 0) {
    return {
      reason: `No parser matches "${cmd.slice(0, 64)}" (parsers: ${PARSER_NAMES.join(", ")})`,
    };
  }
  return {
    reason: `No parser matches these "${cmd.slice(0, 64)}" options (${
      candidates.map((d) => `${d.name}: ${d.matcher}`).join("; ")
    })`,
  };
}

const lower = (s: string) => s.charAt(0).toLowerCase() + s.slice(1);

/**
 * The environment to run a command with so `parser` reads its output (the C locale for
 * locale-dependent tools); `{}` when none is needed or the parser is unknown. For "auto" the
 * parser is chosen from `argv` first.
 */
export function parserEnv(
  parser: string,
  argv: readonly string[] = [],
): Readonly<Record<string, string>> {
  try {
    const name = parser === "auto"
      ? (() => {
        const c = chooseParser(argv);
        return "parser" in c ? c.parser : undefined;
      })()
      : parser;
    const def = name === undefined ? undefined : BY_NAME.get(name);
    return def?.locale ? C_LOCALE : NO_ENV;
  } catch {
    return NO_ENV; // a malformed argv needs no environment
  }
}

/**
 * Parses a command's output. `parser` is a name from `PARSERS` or "auto" (chosen by argv;
 * see `chooseParser`). Never throws: a result names its parser, or carries `parse_error`.
 * Lines that could not be read are reported in `warnings`; `parse_error` comes only when
 * nothing useful was parsed.
 */
export function parseOutput(
  parser: string | "auto",
  argv: readonly string[],
  output: string,
  options: ParseOptions = {},
): ParseResult {
  let name: string | undefined;
  try {
    if (typeof output !== "string") {
      return { parse_error: { message: "The output is not text" } };
    }
    let words: readonly string[];
    let def: ParserDef | undefined;
    if (parser === "auto") {
      const choice = chooseParser(argv);
      if ("reason" in choice) return { parse_error: { message: choice.reason.slice(0, 4000) } };
      def = BY_NAME.get(choice.parser);
      words = choice.argv;
    } else {
      def = typeof parser === "string" ? BY_NAME.get(parser) : undefined;
      if (def === undefined) {
        return {
          parse_error: {
            message: `Unknown parser "${String(parser).slice(0, 64)}" (known: auto, ${
              PARSER_NAMES.join(", ")
            })`,
          },
        };
      }
      const split = commandArgv(argv);
      words = "argv" in split ? programArgv(split.argv) : [];
    }
    name = def!.name;
    const now = options.now instanceof Date && !isNaN(options.now.getTime())
      ? options.now
      : new Date();
    const ctx = new ParseContext(output, now, def!.keepNul === true);
    let parsed: unknown;
    try {
      parsed = def!.parse(ctx, words);
    } catch (e) {
      if (e instanceof ParseFailure) {
        return {
          parser: name,
          parse_error: compactError(e.message, e.line ?? ctx.firstUnparsed, ctx.unparsedCount),
        };
      }
      throw e;
    }
    const warnings = ctx.warnings();
    return {
      parser: name,
      parsed: parsed as never,
      ...(warnings.length > 0 ? { warnings } : {}),
    } as ParseResult;
  } catch (e) {
    return {
      ...(name === undefined ? {} : { parser: name }),
      parse_error: {
        message: `The parser failed: ${String(e instanceof Error ? e.message : e).slice(0, 500)}`,
      },
    };
  }
}

function compactError(message: string, line: number | undefined, unparsed: number) {
  return {
    message: message.slice(0, PARSE_LIMITS.maxField),
    ...(line === undefined ? {} : { line }),
    ...(unparsed > 0 ? { unparsed_lines: unparsed } : {}),
  };
}
