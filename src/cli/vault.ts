/**
 * `termada vault init|set|list|rm|reset`, `termada unlock`, `termada lock`: the operator's vault.
 *
 * While the daemon runs, `set`, `list` and `rm` go through its operator API (it must be
 * unlocked: it holds the key, writes the file, audits the change and masks the new value at
 * once); `unlock`/`lock` always do. With no daemon running they work on the file directly with
 * the key given here (`--identity FILE`, `--passphrase-file FILE`, or a hidden prompt). `init`
 * and `reset` always work on the file (a running daemon is locked after a reset).
 *
 * Values are read from stdin or a hidden prompt, never from argv (argv is visible in `ps` and
 * kept in shell history). Nothing here prints a value.
 */
import { join } from "node:path";
import { daemonAlive } from "../client/mod.ts";
import { encodeBase64, TermadaError } from "../shared/mod.ts";
import {
  generateIdentity,
  parseIdentityFile,
  type UnlockedVault,
  VAULT_KINDS,
  VAULT_LIMITS,
  VAULT_NAME_PATTERN,
  type VaultEntryInfo,
  VaultFile,
  type VaultKey,
  type VaultKind,
} from "../vault/mod.ts";
import type { TermadaPaths } from "../config/mod.ts";
import { call, type OperatorContext, paths } from "./operator.ts";
import { type Options, strictArgs, subcommand, table } from "./_args.ts";

const parse = strictArgs;

const KEY_OPTIONS = {
  config: { type: "string" },
  json: { type: "boolean" },
  help: { type: "boolean", short: "h" },
  identity: { type: "string" },
  "passphrase-file": { type: "string" },
} as const satisfies Options;

const SET_OPTIONS = {
  ...KEY_OPTIONS,
  kind: { type: "string" },
  description: { type: "string" },
} as const satisfies Options;

const RESET_OPTIONS = { ...KEY_OPTIONS, yes: { type: "boolean" } } as const satisfies Options;

const KEYS = `  Without a running daemon the key comes from --identity FILE (an age identity file),
  --passphrase-file FILE (its first line), or a hidden prompt.`;

const USAGE = {
  init: `Usage: termada vault init [--identity FILE] [--passphrase-file FILE] [--config FILE]
  Creates <state>/vault.age, an age file the age CLI reads too. With --identity FILE it is
  encrypted to that age identity (made there, 0600, when FILE does not exist); otherwise to a
  passphrase (asked twice, hidden; or the first line of --passphrase-file).
`,
  set: `Usage: termada vault set <name> [--kind secret|ssh_key|password] [--description TEXT]
  Adds or replaces an entry. The value is read from stdin (all of it; one final newline is
  dropped for secret and password), or from a hidden prompt when stdin is a terminal —
  never from the command line. Through the running daemon when there is one (unlocked).
${KEYS}
`,
  list: `Usage: termada vault [list] [--json] [--config FILE]
  Entry names, kinds, sizes and dates (never values).
${KEYS}
`,
  rm: `Usage: termada vault rm <name> [--config FILE]
  Removes an entry.
${KEYS}
`,
  reset: `Usage: termada vault reset --yes [--config FILE]
  Deletes the vault file and every entry in it (for a lost passphrase). A running daemon is
  locked. There is no undo.
`,
} as const;
type Sub = keyof typeof USAGE;

const HELP = `Usage: termada vault <command> [options]
  init     Create the vault (passphrase or age identity)
  set      Add or replace an entry (value from stdin or a hidden prompt)
  list     Entry names and kinds (the default)
  rm       Remove an entry
  reset    Delete the vault
  termada unlock / termada lock: give the running daemon the key, or make it forget it.
Run termada vault <command> --help for one command's options.
`;

const UNLOCK_USAGE =
  `Usage: termada unlock [--identity FILE | --passphrase-file FILE] [--config FILE]
  Gives the running daemon the vault's key (kept in its memory only, until termada lock or
  a restart). Without options the passphrase is asked (hidden), or read from stdin.
`;
const LOCK_USAGE = `Usage: termada lock [--config FILE]
  Makes the running daemon forget the vault's key: agents' vault references get VAULT_LOCKED.
`;

function nameOf(sub: Sub, positionals: string[]): string {
  const name = positionals[0];
  if (!name) {
    throw new TermadaError("INVALID_ARGUMENT", `Missing entry name: termada vault ${sub} <name>`);
  }
  if (!VAULT_NAME_PATTERN.test(name)) {
    throw new TermadaError(
      "INVALID_ARGUMENT",
      `"${name}" is not a vault entry name (1-64 letters, digits, '.', '_', '-')`,
    );
  }
  return name;
}

function kindOf(text: string | undefined): VaultKind {
  const k = (text ?? "secret") as VaultKind;
  if (!VAULT_KINDS.includes(k)) {
    throw new TermadaError("INVALID_ARGUMENT", `Unknown kind "${text}"`, {
      hint: `Use one of ${VAULT_KINDS.join(", ")}`,
    });
  }
  return k;
}

// ── reading secrets without echo ────────────────────────────────────────────────────────────

const MAX_PROMPT_BYTES = 4096;

/** Reads one line from a terminal without echo (Ctrl-C / Ctrl-D abort). */
async function hiddenLine(prompt: string): Promise<string> {
  await Deno.stderr.write(new TextEncoder().encode(prompt));
  Deno.stdin.setRaw(true);
  const got: number[] = [];
  const buf = new Uint8Array(64);
  try {
    for (;;) {
      const n = await Deno.stdin.read(buf);
      if (n === null) break;
      for (const b of buf.subarray(0, n)) {
        if (b === 0x03 || b === 0x04) {
          throw new TermadaError("INVALID_ARGUMENT", "Cancelled");
        }
        if (b === 0x0d || b === 0x0a) return new TextDecoder().decode(new Uint8Array(got));
        if (b === 0x7f || b === 0x08) got.pop();
        else if (got.length < MAX_PROMPT_BYTES) got.push(b);
        else {
          throw new TermadaError(
            "INVALID_ARGUMENT",
            `More than ${MAX_PROMPT_BYTES} bytes typed: pipe a longer value on stdin instead`,
          );
        }
      }
    }
    return new TextDecoder().decode(new Uint8Array(got));
  } finally {
    Deno.stdin.setRaw(false);
    await Deno.stderr.write(new TextEncoder().encode("\n"));
  }
}

/** All of stdin, bounded. */
async function readStdin(limit: number): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  let total = 0;
  const buf = new Uint8Array(65536);
  for (;;) {
    const n = await Deno.stdin.read(buf);
    if (n === null) break;
    total += n;
    if (total > limit) {
      throw new TermadaError("INVALID_ARGUMENT", `The value is larger than ${limit} bytes`);
    }
    parts.push(buf.slice(0, n));
  }
  const out = new Uint8Array(total);
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

function firstLine(text: string): string {
  return text.split(/\r?\n/)[0] ?? "";
}

async function readFileText(path: string, what: string): Promise<string> {
  try {
    return await Deno.readTextFile(path);
  } catch (err) {
    throw new TermadaError("INVALID_ARGUMENT", `Cannot read ${what} "${path}"`, { cause: err });
  }
}

/** The key from --identity / --passphrase-file, a hidden prompt, or (no terminal) stdin. */
async function keyFrom(
  values: { identity?: string; "passphrase-file"?: string },
  opts: { confirm?: boolean; stdinFree?: boolean } = {},
): Promise<VaultKey> {
  if (values.identity !== undefined && values["passphrase-file"] !== undefined) {
    throw new TermadaError(
      "INVALID_ARGUMENT",
      'Give one of "--identity" and "--passphrase-file", not both',
    );
  }
  if (values.identity !== undefined) {
    return { identity: parseIdentityFile(await readFileText(values.identity, "identity file")) };
  }
  if (values["passphrase-file"] !== undefined) {
    const p = firstLine(await readFileText(values["passphrase-file"], "passphrase file"));
    if (p === "") throw new TermadaError("INVALID_ARGUMENT", "The passphrase file is empty");
    return { passphrase: p };
  }
  if (Deno.stdin.isTerminal()) {
    const p = await hiddenLine("Vault passphrase: ");
    if (p === "") throw new TermadaError("INVALID_ARGUMENT", "Empty passphrase");
    if (opts.confirm) {
      const again = await hiddenLine("Again: ");
      if (again !== p) throw new TermadaError("INVALID_ARGUMENT", "The passphrases differ");
    }
    return { passphrase: p };
  }
  if (opts.stdinFree === false) {
    throw new TermadaError(
      "INVALID_ARGUMENT",
      "stdin holds the value: give the key with --identity FILE or --passphrase-file FILE",
    );
  }
  const p = firstLine(new TextDecoder().decode(await readStdin(MAX_PROMPT_BYTES)));
  if (p === "") throw new TermadaError("INVALID_ARGUMENT", "No passphrase on stdin");
  return { passphrase: p };
}

// ── output ──────────────────────────────────────────────────────────────────────────────────

function listing(entries: VaultEntryInfo[]): string {
  if (entries.length === 0) return "The vault is empty. Add an entry: termada vault set <name>\n";
  return table(
    ["NAME", "KIND", "BYTES", "UPDATED", "DESCRIPTION"],
    entries.map((e) => [e.name, e.kind, String(e.bytes), e.updated, e.description ?? ""]),
  );
}

// ── commands ────────────────────────────────────────────────────────────────────────────────

/** `<state>/vault.age` for the duration of `f` (its worker ends after). */
async function withFile<T>(
  p: TermadaPaths,
  f: (file: VaultFile) => Promise<T>,
): Promise<T> {
  const file = new VaultFile(join(p.stateDir, "vault.age"));
  try {
    return await f(file);
  } finally {
    await file.close();
  }
}

/** The vault opened with `key` for `f` (no daemon running: the CLI works on the file). */
function withOpenVault<T>(
  p: TermadaPaths,
  key: VaultKey,
  f: (v: UnlockedVault) => T | Promise<T>,
): Promise<T> {
  return withFile(p, async (file) => {
    const v = await file.open(key);
    try {
      return await f(v);
    } finally {
      v.lock();
    }
  });
}

export async function vaultCommand(args: string[], ctx: OperatorContext): Promise<number> {
  const picked = subcommand<Sub>("vault", args, USAGE, "list");
  if (!picked) return await help(ctx, HELP);
  const { sub, rest, explicit } = picked;
  switch (sub) {
    case "init": {
      const { values } = parse("vault init", rest, KEY_OPTIONS, 0);
      if (values.help) return await help(ctx, USAGE.init);
      const p = await paths(values.config);
      const path = join(p.stateDir, "vault.age");
      let key: VaultKey;
      let made = "";
      if (values.identity !== undefined && !(await exists(values.identity))) {
        const id = await generateIdentity();
        await Deno.writeTextFile(
          values.identity,
          `# created: ${
            new Date().toISOString()
          } by termada vault init\n# public key: ${id.recipient}\n${id.identity}\n`,
          { mode: 0o600, createNew: true },
        );
        key = { identity: id.identity };
        made = `Wrote a new age identity to ${values.identity} (public key ${id.recipient}).\n`;
      } else key = await keyFrom(values, { confirm: true });
      await Deno.mkdir(p.stateDir, { recursive: true, mode: 0o700 });
      await withFile(p, (f) => f.init(key));
      await ctx.out(
        `${made}Created ${path}. Add entries with termada vault set <name>; ` +
          `a running daemon needs termada unlock.\n`,
      );
      return 0;
    }
    case "set": {
      const { values, positionals } = parse("vault set", rest, SET_OPTIONS, 1);
      if (values.help) return await help(ctx, USAGE.set);
      const name = nameOf("set", positionals);
      const kind = kindOf(values.kind);
      const p = await paths(values.config);
      const live = await daemonAlive(p.socketPath);
      // The key first (it may need stdin when there is no terminal and no key file).
      const key = live ? undefined : await keyFrom(values, { stdinFree: false });
      let value: Uint8Array;
      if (Deno.stdin.isTerminal()) {
        value = new TextEncoder().encode(await hiddenLine(`Value of "${name}": `));
      } else {
        value = await readStdin(VAULT_LIMITS.valueBytes);
        if (kind !== "ssh_key" && value.at(-1) === 0x0a) {
          value = value.subarray(0, value.at(-2) === 0x0d ? -2 : -1);
        }
      }
      if (value.length < 4) {
        throw new TermadaError(
          "INVALID_ARGUMENT",
          `The value of "${name}" has ${value.length} bytes: at least 4 are needed to redact it`,
        );
      }
      let info: VaultEntryInfo;
      if (live) {
        info = await call(p, "PUT", `/vault/entries/${name}`, {
          kind,
          value_b64: encodeBase64(value),
          ...(values.description !== undefined ? { description: values.description } : {}),
        }) as unknown as VaultEntryInfo;
      } else {
        info = await withOpenVault(p, key!, (v) =>
          v.set(name, value, {
            kind,
            ...(values.description !== undefined ? { description: values.description } : {}),
          }));
      }
      value.fill(0);
      if (values.json) await ctx.out(JSON.stringify(info, null, 2) + "\n");
      else await ctx.out(`Stored "${info.name}" (${info.kind}, ${info.bytes} bytes).\n`);
      return 0;
    }
    case "list": {
      const { values } = parse("vault list", rest, KEY_OPTIONS, 0);
      if (values.help) return await help(ctx, explicit ? USAGE.list : HELP);
      const p = await paths(values.config);
      let entries: VaultEntryInfo[];
      if (await daemonAlive(p.socketPath)) {
        const r = await call(p, "GET", "/vault") as { unlocked: boolean; list: VaultEntryInfo[] };
        if (!r.unlocked) {
          throw new TermadaError("VAULT_LOCKED", "The daemon's vault is locked", {
            hint: "termada unlock",
          });
        }
        entries = r.list;
      } else {
        const key = await keyFrom(values);
        entries = await withOpenVault(p, key, (v) => v.list());
      }
      await ctx.out(values.json ? JSON.stringify(entries, null, 2) + "\n" : listing(entries));
      return 0;
    }
    case "rm": {
      const { values, positionals } = parse("vault rm", rest, KEY_OPTIONS, 1);
      if (values.help) return await help(ctx, USAGE.rm);
      const name = nameOf("rm", positionals);
      const p = await paths(values.config);
      if (await daemonAlive(p.socketPath)) {
        await call(p, "DELETE", `/vault/entries/${name}`);
      } else {
        const key = await keyFrom(values);
        const removed = await withOpenVault(p, key, (v) => v.remove(name));
        if (!removed) throw new TermadaError("NOT_FOUND", `The vault has no entry "${name}"`);
      }
      await ctx.out(`Removed "${name}".\n`);
      return 0;
    }
    case "reset": {
      const { values } = parse("vault reset", rest, RESET_OPTIONS, 0);
      if (values.help) return await help(ctx, USAGE.reset);
      if (!values.yes) {
        throw new TermadaError(
          "INVALID_ARGUMENT",
          "vault reset deletes every entry: confirm with --yes",
        );
      }
      const p = await paths(values.config);
      if (await daemonAlive(p.socketPath)) await call(p, "POST", "/vault/lock", {});
      const had = await withFile(p, (f) => f.reset());
      await ctx.out(had ? "The vault is deleted.\n" : "There was no vault.\n");
      return 0;
    }
  }
}

export async function unlockCommand(args: string[], ctx: OperatorContext): Promise<number> {
  const { values } = parse("unlock", args, KEY_OPTIONS, 0);
  if (values.help) return await help(ctx, UNLOCK_USAGE);
  const p = await paths(values.config);
  if (!(await daemonAlive(p.socketPath))) {
    throw new TermadaError("SERVER_UNREACHABLE", "No Termada daemon is running", {
      hint: "Start it with termada serve; the vault is unlocked in the running daemon",
    });
  }
  const key = await keyFrom(values);
  const r = await call(p, "POST", "/vault/unlock", key as Record<string, unknown>);
  await ctx.out(
    values.json
      ? JSON.stringify(r, null, 2) + "\n"
      : `The vault is unlocked (${r.entries ?? 0} entries).\n`,
  );
  return 0;
}

export async function lockCommand(args: string[], ctx: OperatorContext): Promise<number> {
  const { values } = parse("lock", args, { config: KEY_OPTIONS.config, help: KEY_OPTIONS.help }, 0);
  if (values.help) return await help(ctx, LOCK_USAGE);
  await call(await paths(values.config), "POST", "/vault/lock", {});
  await ctx.out("The vault is locked.\n");
  return 0;
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.lstat(path);
    return true;
  } catch {
    return false;
  }
}

async function help(ctx: OperatorContext, text: string): Promise<number> {
  await ctx.out(text);
  return 0;
}
