/**
 * `termada setup`: registers Termada as a user-scoped MCP server in the agents' own config files
 * (Claude Code `~/.claude.json`, Codex `~/.codex/config.toml`, Cursor `~/.cursor/mcp.json`), so
 * they launch `termada serve --stdio`. Every file is parsed and its new text computed before any
 * is written; each is then replaced atomically (temp file + rename, its mode kept). A file that
 * already says the same is not rewritten. Also owns the command resolution `termada service`
 * shares: which program starts Termada on this machine.
 */
import { basename, dirname, isAbsolute, join, resolve } from "node:path";
import { TermadaError } from "../shared/mod.ts";
import { strictArgs } from "./_args.ts";
import type { OperatorContext } from "./operator.ts";
import { selfCommand } from "./serve.ts";

export type Env = Record<string, string | undefined>;

export const CLIENTS = ["claude", "codex", "cursor"] as const;
export type ClientName = typeof CLIENTS[number];

/** A program and its arguments, as a client or a service manager starts it. */
export interface Launch {
  command: string;
  args: string[];
  /** Where the command came from: `--command`, a `termada` on PATH, this binary, or source. */
  source: "flag" | "path" | "binary" | "source";
}

export interface ResolveOptions {
  /** `--command`: an executable file (relative paths are taken from the working directory). */
  command?: string;
  env: Env;
  /** The running program (default `Deno.execPath()`): a compiled `termada` is used as is. */
  execPath?: string;
  /** How to start this same program from source (default: serve.ts `selfCommand`). */
  self?: (extra: string[]) => { program: string; args: string[] };
}

/** The absolute path of an executable `name` in the PATH of `env`, if any. */
export function findOnPath(name: string, env: Env): string | undefined {
  for (const dir of (env.PATH ?? "").split(":")) {
    if (!isAbsolute(dir)) continue; // "" or "." would depend on the working directory
    const path = join(dir, name);
    try {
      const st = Deno.statSync(path);
      if (st.isFile && ((st.mode ?? 0) & 0o111) !== 0) return path;
    } catch {
      // not in this directory
    }
  }
  return undefined;
}

/**
 * Which program starts Termada with `extra` arguments: `--command`, else this binary when it
 * is a compiled `termada`, else a `termada` on PATH (kept as found, not resolved through
 * symlinks, so an upgrade behind the link is picked up), else this checkout run by Deno.
 */
export function resolveLaunch(extra: string[], options: ResolveOptions): Launch {
  if (options.command !== undefined) {
    const path = resolve(options.command);
    let st: Deno.FileInfo;
    try {
      st = Deno.statSync(path);
    } catch (err) {
      throw new TermadaError("INVALID_ARGUMENT", `Cannot use --command "${options.command}"`, {
        cause: err,
        hint: "Give the path of the termada executable",
      });
    }
    if (!st.isFile || ((st.mode ?? 0) & 0o111) === 0) {
      throw new TermadaError(
        "INVALID_ARGUMENT",
        `Cannot use --command "${options.command}": it is not an executable file`,
        { hint: `chmod +x ${path}, or give the path of the termada executable` },
      );
    }
    return { command: path, args: [...extra], source: "flag" };
  }
  const exe = options.execPath ?? Deno.execPath();
  if (!/(^|\/)deno(\.exe)?$/.test(exe)) return { command: exe, args: [...extra], source: "binary" };
  const onPath = findOnPath("termada", options.env);
  if (onPath) return { command: onPath, args: [...extra], source: "path" };
  const self = (options.self ?? selfCommand)(extra);
  return { command: self.program, args: self.args, source: "source" };
}

/** `path` with the home directory shown as `~`. */
export function tildify(path: string, home: string): string {
  return home && (path === home || path.startsWith(home + "/"))
    ? "~" + path.slice(home.length)
    : path;
}

/**
 * Replaces `path` with `text` atomically: a temp file beside it (same filesystem) renamed over
 * it. The mode is the existing file's, else `mode`. Missing parent directories are created 0700.
 */
export async function writeAtomic(path: string, text: string, mode = 0o600): Promise<void> {
  const dir = dirname(path);
  await Deno.mkdir(dir, { recursive: true, mode: 0o700 });
  let keep = mode;
  try {
    keep = (Deno.statSync(path).mode ?? mode) & 0o7777;
  } catch {
    // a new file: `mode`
  }
  const tmp = join(dir, `.${basename(path)}.termada-${crypto.randomUUID().slice(0, 8)}.tmp`);
  try {
    const f = await Deno.open(tmp, { write: true, createNew: true, mode: keep });
    try {
      const bytes = new TextEncoder().encode(text);
      let off = 0;
      while (off < bytes.length) off += await f.write(bytes.subarray(off));
      await f.sync();
    } finally {
      f.close();
    }
    await Deno.chmod(tmp, keep); // the umask may have narrowed the create mode
    await Deno.rename(tmp, path);
  } catch (err) {
    await Deno.remove(tmp).catch(() => {}); // nothing half-written is left behind
    throw new TermadaError("INTERNAL", `Cannot write "${path}": ${(err as Error).message}`, {
      cause: err,
    });
  }
}

/** The text of `path`, or undefined when there is no such file. */
export function readIfExists(path: string): string | undefined {
  try {
    return Deno.readTextFileSync(path);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return undefined;
    throw new TermadaError("INVALID_ARGUMENT", `Cannot read "${path}": ${(err as Error).message}`, {
      cause: err,
    });
  }
}

export type Action = "added" | "updated" | "unchanged";

/** What one client's file becomes: its new text (undefined when unchanged). */
export interface Edit {
  action: Action;
  text?: string;
}

const SERVER_NAME = "termada";

/**
 * Sets `mcpServers.termada` in a JSON config (Claude Code, Cursor) to `entry`, keeping every
 * other key. Unchanged when the entry already has the same command and args (other fields the
 * user added to it are then left alone); a malformed file is an error, never overwritten.
 */
export function editJsonServers(
  text: string | undefined,
  file: string,
  entry: Record<string, unknown> & { command: string; args: string[] },
): Edit {
  let doc: Record<string, unknown> = {};
  if (text !== undefined && text.trim() !== "") {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch (err) {
      throw new TermadaError(
        "INVALID_ARGUMENT",
        `Cannot update "${file}": it is not valid JSON (${(err as Error).message})`,
        { hint: "Fix or move the file, then run termada setup again; it was left as it is" },
      );
    }
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
      throw new TermadaError(
        "INVALID_ARGUMENT",
        `Cannot update "${file}": it is not a JSON object`,
        {
          hint: "Fix or move the file, then run termada setup again; it was left as it is",
        },
      );
    }
    doc = parsed as Record<string, unknown>;
  }
  const servers = doc.mcpServers ?? {};
  if (typeof servers !== "object" || servers === null || Array.isArray(servers)) {
    throw new TermadaError(
      "INVALID_ARGUMENT",
      `Cannot update "${file}": its "mcpServers" is not an object`,
      { hint: "Fix the file, then run termada setup again; it was left as it is" },
    );
  }
  const current = (servers as Record<string, unknown>)[SERVER_NAME] as
    | Record<string, unknown>
    | undefined;
  if (
    current && current.command === entry.command &&
    JSON.stringify(current.args) === JSON.stringify(entry.args)
  ) return { action: "unchanged" };
  const next = { ...doc, mcpServers: { ...servers, [SERVER_NAME]: entry } };
  // Keep the file's own ending (Claude Code writes none).
  const ending = text === undefined || text.endsWith("\n") ? "\n" : "";
  return {
    action: current ? "updated" : "added",
    text: JSON.stringify(next, null, 2) + ending,
  };
}

// ---- Codex: TOML, edited as text (no TOML library here) -------------------------------------

/** What one line of a TOML file is, as far as editing tables needs to know. */
interface TomlLine {
  /** A table header (`[a.b]` or `[[a.b]]`): its key path. */
  header?: string[];
  /** The key of the `key = value` this line belongs to (its first line or a continuation). */
  key?: string[];
}

/** The dotted key of a header or key line: `a."b.c".d` → ["a", "b.c", "d"]; undefined if odd. */
function parseKeyPath(raw: string): string[] | undefined {
  const keys: string[] = [];
  const re = /\s*(?:"((?:[^"\\]|\\.)*)"|'([^']*)'|([A-Za-z0-9_-]+))\s*(\.|$)/y;
  let at = 0;
  while (at < raw.length) {
    re.lastIndex = at;
    const m = re.exec(raw);
    if (!m) return undefined;
    keys.push(m[1] !== undefined ? JSON.parse(`"${m[1]}"`) : m[2] ?? m[3]!);
    at = re.lastIndex;
    if (m[4] === "") break;
  }
  return keys.length > 0 ? keys : undefined;
}

/**
 * Classifies TOML lines, tracking multi-line strings and the brackets of values, so that a `[`
 * inside an array or a string is never taken for a table header, and a value spanning lines
 * stays with its key.
 */
function scanToml(lines: string[]): TomlLine[] {
  const out: TomlLine[] = [];
  let depth = 0; // open [ and { of a value spanning lines
  let multi: '"""' | "'''" | undefined;
  let key: string[] | undefined;
  for (const line of lines) {
    let i = 0;
    if (multi === undefined && depth === 0) {
      key = undefined;
      const header = /^\s*\[\[?([^\]]*)\]\]?\s*(#.*)?$/.exec(line);
      if (header) {
        out.push({ header: parseKeyPath(header[1]!) ?? [] });
        continue;
      }
      const m = /^\s*((?:"(?:[^"\\]|\\.)*"|'[^']*'|[A-Za-z0-9_.\s-])+?)\s*=/.exec(line);
      if (m) {
        key = parseKeyPath(m[1]!);
        i = m[0].length;
      }
    }
    out.push(key ? { key } : {});
    while (i < line.length) {
      if (multi !== undefined) {
        const end = line.indexOf(multi, i);
        if (end < 0) break;
        i = end + 3;
        multi = undefined;
        continue;
      }
      const c = line[i]!;
      if (c === "#") break;
      if (line.startsWith('"""', i) || line.startsWith("'''", i)) {
        multi = line.slice(i, i + 3) as '"""' | "'''";
        i += 3;
      } else if (c === '"') {
        i++;
        while (i < line.length && line[i] !== '"') i += line[i] === "\\" ? 2 : 1;
        i++;
      } else if (c === "'") {
        const end = line.indexOf("'", i + 1);
        i = end < 0 ? line.length : end + 1;
      } else {
        if (c === "[" || c === "{") depth++;
        else if ((c === "]" || c === "}") && depth > 0) depth--;
        i++;
      }
    }
  }
  return out;
}

/** A TOML basic string (JSON's escapes are valid TOML ones). */
const tomlString = (s: string) => JSON.stringify(s);

/**
 * Sets the `[mcp_servers.termada]` table of a Codex `config.toml`: its `command` and `args` are
 * replaced (other keys of the table, its sub-tables such as `[mcp_servers.termada.env]` and
 * every other table are kept as they are), or the table is appended. A `termada` defined
 * another way (an inline table, dotted keys) is an error: setup does not rewrite what it
 * cannot edit safely.
 */
export function editCodexToml(
  text: string | undefined,
  file: string,
  launch: { command: string; args: string[] },
): Edit {
  const source = text ?? "";
  const eol = source.includes("\r\n") ? "\r\n" : "\n";
  const lines = source === "" ? [] : source.split(/\r?\n/);
  const scan = scanToml(lines);
  const isOurs = (keys: string[] | undefined) =>
    keys !== undefined && keys[0] === "mcp_servers" && keys[1] === SERVER_NAME;
  const refuse = (line: number, how: string) =>
    new TermadaError(
      "INVALID_ARGUMENT",
      `Cannot update "${file}": line ${line + 1} defines the termada server ${how}`,
      { hint: "Remove that definition (setup writes a [mcp_servers.termada] table), then rerun" },
    );
  let table: string[] = [];
  const starts: number[] = [];
  scan.forEach((l, n) => {
    if (l.header) {
      table = l.header;
      if (l.header.length === 2 && isOurs(l.header)) starts.push(n);
    } else if (l.key && !isOurs(table) && isOurs([...table, ...l.key])) {
      // `[mcp_servers]` + `termada = {…}`, or `mcp_servers.termada.command = …`
      if (scan[n - 1]?.key !== l.key) throw refuse(n, "with dotted keys or an inline table");
    }
  });
  if (starts.length > 1) throw refuse(starts[1]!, "twice");
  const command = `command = ${tomlString(launch.command)}`;
  const args = `args = [${launch.args.map(tomlString).join(", ")}]`;
  const block = [`[mcp_servers.${SERVER_NAME}]`, command, args];
  const start = starts[0];
  if (start === undefined) {
    const body = lines.slice();
    while (body.length > 0 && body.at(-1)!.trim() === "") body.pop();
    const out = body.length > 0 ? [...body, "", ...block, ""] : [...block, ""];
    return { action: "added", text: out.join(eol) };
  }
  let end = start + 1;
  while (end < lines.length && !scan[end]!.header) end++;
  const keyOf = (n: number) => scan[n]!.key?.join(".");
  const body = lines.slice(start + 1, end);
  const linesOf = (k: string) =>
    body.filter((_, i) => keyOf(start + 1 + i) === k).map((l) => l.trim());
  if (linesOf("command").join("\n") === command && linesOf("args").join("\n") === args) {
    return { action: "unchanged" };
  }
  // Keys the user added (env, startup_timeout_sec…), comments and blank lines stay after ours.
  const kept = body.filter((_, i) => !["command", "args"].includes(keyOf(start + 1 + i) ?? ""));
  const out = [...lines.slice(0, start), ...block, ...kept, ...lines.slice(end)];
  return { action: "updated", text: out.join(eol) };
}

// ---- clients ---------------------------------------------------------------------------------

interface ClientSpec {
  /** The file setup edits. */
  file(home: string, env: Env): string;
  /** Evidence that the client is installed: a directory or file of its own. */
  marks(home: string, env: Env): string[];
  edit(text: string | undefined, file: string, launch: Launch): Edit;
}

const CLIENT_SPECS: Record<ClientName, ClientSpec> = {
  claude: {
    // Claude Code keeps its user scope in ~/.claude.json ($CLAUDE_CONFIG_DIR/.claude.json).
    file: (home, env) => join(env.CLAUDE_CONFIG_DIR || home, ".claude.json"),
    marks: (
      home,
      env,
    ) => [join(env.CLAUDE_CONFIG_DIR || home, ".claude.json"), join(home, ".claude")],
    edit: (text, file, l) =>
      editJsonServers(text, file, { type: "stdio", command: l.command, args: l.args, env: {} }),
  },
  codex: {
    file: (home, env) => join(env.CODEX_HOME || join(home, ".codex"), "config.toml"),
    marks: (home, env) => [env.CODEX_HOME || join(home, ".codex")],
    edit: (text, file, l) => editCodexToml(text, file, l),
  },
  cursor: {
    file: (home) => join(home, ".cursor", "mcp.json"),
    marks: (home) => [join(home, ".cursor")],
    edit: (text, file, l) => editJsonServers(text, file, { command: l.command, args: l.args }),
  },
};

/** `stat` of `path`, or undefined when it cannot be had (absent, unreadable). */
export function statIfExists(path: string): Deno.FileInfo | undefined {
  try {
    return Deno.statSync(path);
  } catch {
    return undefined;
  }
}

/** The clients installed for this user: a config directory or file, or the binary on PATH. */
export function detectClients(home: string, env: Env): ClientName[] {
  return CLIENTS.filter((c) =>
    CLIENT_SPECS[c].marks(home, env).some((m) => statIfExists(m) !== undefined) ||
    findOnPath(c, env) !== undefined
  );
}

export interface SetupResult {
  client: ClientName;
  file: string;
  action: Action;
}

export interface SetupOptions {
  home: string;
  env: Env;
  launch: Launch;
  clients: readonly ClientName[];
  dryRun?: boolean;
}

/**
 * Plans every client's edit first (so a malformed file stops the whole run before anything is
 * written), then writes the files that change.
 */
export async function setupClients(options: SetupOptions): Promise<SetupResult[]> {
  const plans = options.clients.map((client) => {
    const spec = CLIENT_SPECS[client];
    const file = spec.file(options.home, options.env);
    return { client, file, edit: spec.edit(readIfExists(file), file, options.launch) };
  });
  if (!options.dryRun) {
    for (const p of plans) {
      if (p.edit.text !== undefined) await writeAtomic(p.file, p.edit.text, 0o600);
    }
  }
  return plans.map((p) => ({ client: p.client, file: p.file, action: p.edit.action }));
}

const USAGE = "Usage: termada setup [--client claude|codex|cursor]... [--command PATH] " +
  "[--dry-run] [--json]\n" +
  "Registers Termada (`termada serve --stdio`) as a user-scoped MCP server for the MCP clients\n" +
  "found here (Claude Code ~/.claude.json, Codex ~/.codex/config.toml, Cursor\n" +
  "~/.cursor/mcp.json), or the ones named with --client. The command written is --command,\n" +
  "else this termada binary, else a termada on PATH, else this checkout run by Deno.\n" +
  "Running it again changes nothing; --dry-run shows what it would change.\n";

const WOULD: Record<Action, string> = {
  added: "would add",
  updated: "would update",
  unchanged: "unchanged",
};

/** A command line as a shell would need it (for display). */
export function shellLine(words: readonly string[]): string {
  return words.map((w) =>
    /^[A-Za-z0-9_@%+=:,./-]+$/.test(w) ? w : `'${w.replaceAll("'", `'\\''`)}'`
  )
    .join(" ");
}

export async function setupCommand(args: string[], ctx: OperatorContext): Promise<number> {
  const { values } = strictArgs("setup", args, {
    client: { type: "string", multiple: true },
    command: { type: "string" },
    "dry-run": { type: "boolean" },
    json: { type: "boolean" },
    help: { type: "boolean" },
  }, 0);
  if (values.help) {
    await ctx.out(USAGE);
    return 0;
  }
  const env = Deno.env.toObject();
  const home = env.HOME;
  if (!home || !isAbsolute(home)) {
    throw new TermadaError(
      "INVALID_ARGUMENT",
      "Cannot find the MCP clients' config: HOME is not set",
    );
  }
  const asked = values.client ?? [];
  for (const c of asked) {
    if (!(CLIENTS as readonly string[]).includes(c)) {
      throw new TermadaError("INVALID_ARGUMENT", `Unknown client "${c}"`, {
        hint: `--client ${CLIENTS.join(" | ")}`,
      });
    }
  }
  const clients = asked.length > 0 ? [...new Set(asked as ClientName[])] : detectClients(home, env);
  if (clients.length === 0) {
    throw new TermadaError("NOT_FOUND", "No MCP client found (claude, codex or cursor)", {
      hint: "Name one to configure anyway: termada setup --client claude",
    });
  }
  const launch = resolveLaunch(["serve", "--stdio"], { command: values.command, env });
  const dryRun = values["dry-run"] === true;
  const results = await setupClients({ home, env, launch, clients, dryRun });
  if (values.json) {
    await ctx.out(
      JSON.stringify(
        {
          dry_run: dryRun,
          command: launch.command,
          args: launch.args,
          source: launch.source,
          clients: results,
        },
        null,
        2,
      ) + "\n",
    );
    return 0;
  }
  const lines = results.map((r) => {
    const where = tildify(r.file, home);
    if (r.action === "unchanged") return `${r.client}: unchanged (${where})`;
    const verb = dryRun ? WOULD[r.action] : r.action;
    return `${r.client}: ${verb} termada ${r.action === "added" ? "to" : "in"} ${where}`;
  });
  await ctx.out(
    lines.join("\n") + "\n" +
      `command: ${shellLine([launch.command, ...launch.args])}\n` +
      (results.some((r) => r.action !== "unchanged") && !dryRun
        ? "Restart the client (or start a new session) to pick it up.\n"
        : ""),
  );
  return 0;
}
