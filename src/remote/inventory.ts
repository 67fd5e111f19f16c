/**
 * The servers agents may reach by name: the config file's `servers` (read-only here) plus those
 * an operator adds live (`termada servers add`, the dashboard, the API), kept in
 * `<state>/servers.json` (written whole: temp file, fsync, rename). What a call gets is a
 * pinned copy (ServerBinding): editing the inventory never redirects work already admitted.
 * Reachability is remembered per server from the last connection attempt (never keys).
 */
import { dirname } from "node:path";
import { ServerEntry } from "../config/mod.ts";
import { TermadaError } from "../shared/mod.ts";
import type { ServerBinding } from "./binding.ts";

/** Most servers in the inventory (config and live together). */
export const MAX_SERVERS = 1024;
/** Most bytes of servers.json read (beyond: refused as malformed). */
const MAX_FILE_BYTES = 1 << 20;

export interface ServerStatus {
  reachable?: boolean;
  last_error?: string;
  checked_at?: string;
}

export interface InventoryEntry {
  entry: ServerEntry;
  source: "config" | "live";
  status: ServerStatus;
}

export interface InventoryOptions {
  config: readonly ServerEntry[];
  /** `<state>/servers.json`; undefined keeps live additions in memory only (tests). */
  file?: string;
}

export class Inventory {
  readonly #config: readonly ServerEntry[];
  readonly #file: string | undefined;
  #live: ServerEntry[] = [];
  readonly #status = new Map<string, ServerStatus>();
  /** Writes one at a time, in order. */
  #writing: Promise<void> = Promise.resolve();

  constructor(o: InventoryOptions) {
    this.#config = o.config;
    this.#file = o.file;
    this.#live = this.#load();
  }

  /** Every server, config ones first, by name within each. */
  list(): InventoryEntry[] {
    const out: InventoryEntry[] = [];
    for (const e of this.#config) out.push({ entry: e, source: "config", status: this.#st(e) });
    for (const e of this.#live) out.push({ entry: e, source: "live", status: this.#st(e) });
    return out;
  }

  get size(): number {
    return this.#config.length + this.#live.length;
  }

  has(name: string): boolean {
    return this.#find(name) !== undefined;
  }

  /** A pinned copy of the server named `name`; NOT_FOUND (listing the known names) otherwise. */
  bind(name: string): ServerBinding {
    const e = this.#find(name);
    if (!e) {
      const names = [...this.#config, ...this.#live].map((s) => s.name).slice(0, 20);
      throw new TermadaError("NOT_FOUND", `Unknown server "${name}"`, {
        details: { server: name },
        hint: names.length > 0
          ? `Known servers: ${names.join(", ")} (server_list shows them all)`
          : "No servers are registered: an operator adds them (termada servers add, or " +
            "`servers:` in the config)",
      });
    }
    return bindingOf(e);
  }

  /** Servers named, or carrying any of the tags (union), in inventory order, each once. */
  select(
    names: readonly string[] | undefined,
    tags: readonly string[] | undefined,
  ): ServerBinding[] {
    const out: ServerBinding[] = [];
    const seen = new Set<string>();
    for (const n of names ?? []) {
      if (seen.has(n)) continue;
      seen.add(n);
      out.push(this.bind(n));
    }
    if (tags && tags.length > 0) {
      for (const e of [...this.#config, ...this.#live]) {
        if (seen.has(e.name) || !e.tags.some((t) => tags.includes(t))) continue;
        seen.add(e.name);
        out.push(bindingOf(e));
      }
    }
    return out;
  }

  /** Adds a live server (an operator's). A name in use is INVALID_ARGUMENT. */
  async add(input: unknown): Promise<ServerEntry> {
    const entry = this.check(input);
    await this.#save([...this.#live, entry]);
    return entry;
  }

  /** Removing `name` is possible (a live server that exists); throws otherwise. */
  checkRemovable(name: string): void {
    if (this.#config.some((s) => s.name === name)) {
      throw new TermadaError(
        "INVALID_ARGUMENT",
        `Server "${name}" is defined in the config file`,
        { details: { server: name }, hint: "Remove it from `servers:` in the config and restart" },
      );
    }
    if (!this.#live.some((s) => s.name === name)) this.bind(name); // NOT_FOUND
  }

  /** The entry `input` would add, checked (schema, name free, room left); nothing is written. */
  check(input: unknown): ServerEntry {
    const parsed = ServerEntry.safeParse(input);
    if (!parsed.success) {
      const problems = parsed.error.issues.map((i) =>
        `${i.path.join(".") || "server"}: ${i.message}`
      );
      throw new TermadaError("INVALID_ARGUMENT", `Invalid server: ${problems[0]}`, {
        details: { problems },
      });
    }
    const entry = parsed.data;
    if (this.has(entry.name)) {
      throw new TermadaError("INVALID_ARGUMENT", `Server "${entry.name}" already exists`, {
        details: { server: entry.name },
        hint: "Remove it first, or choose another name",
      });
    }
    if (this.size >= MAX_SERVERS) {
      throw new TermadaError("QUOTA_EXCEEDED", `At most ${MAX_SERVERS} servers can be registered`);
    }
    return entry;
  }

  /** Removes a live server; a config one must be removed from the config file. */
  async remove(name: string): Promise<void> {
    this.checkRemovable(name);
    await this.#save(this.#live.filter((s) => s.name !== name));
    this.#status.delete(name);
  }

  /** The outcome of the last connection attempt to `name`. */
  noteStatus(name: string, reachable: boolean, error?: string): void {
    if (!this.has(name)) return;
    this.#status.set(name, {
      reachable,
      ...(error ? { last_error: error.slice(0, 500) } : {}),
      checked_at: new Date().toISOString(),
    });
  }

  #st(e: ServerEntry): ServerStatus {
    return { ...this.#status.get(e.name) };
  }

  #find(name: string): ServerEntry | undefined {
    return this.#config.find((s) => s.name === name) ?? this.#live.find((s) => s.name === name);
  }

  #load(): ServerEntry[] {
    if (!this.#file) return [];
    let text: string;
    try {
      const st = Deno.statSync(this.#file);
      if (st.size > MAX_FILE_BYTES) throw new Error(`larger than ${MAX_FILE_BYTES} bytes`);
      text = Deno.readTextFileSync(this.#file);
    } catch (err) {
      if (err instanceof Deno.errors.NotFound) return [];
      throw invalidFile(this.#file, (err as Error).message);
    }
    let doc: unknown;
    try {
      doc = JSON.parse(text);
    } catch (err) {
      throw invalidFile(this.#file, (err as Error).message);
    }
    const list = (doc as { servers?: unknown })?.servers;
    if (!Array.isArray(list)) throw invalidFile(this.#file, 'no "servers" list');
    const out: ServerEntry[] = [];
    for (const [i, item] of list.entries()) {
      const p = ServerEntry.safeParse(item);
      if (!p.success) {
        throw invalidFile(this.#file, `servers[${i}]: ${p.error.issues[0]?.message ?? "invalid"}`);
      }
      if (
        this.#config.some((c) => c.name === p.data.name) || out.some((o) => o.name === p.data.name)
      ) {
        throw invalidFile(this.#file, `servers[${i}]: "${p.data.name}" is defined twice`);
      }
      out.push(p.data);
    }
    return out;
  }

  #save(next: ServerEntry[]): Promise<void> {
    const run = this.#writing.then(async () => {
      if (this.#file) {
        await writeAtomic(this.#file, JSON.stringify({ servers: next }, null, 2) + "\n");
      }
      this.#live = next;
    });
    this.#writing = run.catch(() => {});
    return run;
  }
}

function bindingOf(e: ServerEntry): ServerBinding {
  return Object.freeze({
    name: e.name,
    host: e.host,
    port: e.port,
    user: e.user,
    tags: Object.freeze([...e.tags]),
    ...(e.auth ? { auth: e.auth } : {}),
    ...(e.host_key ? { hostKey: e.host_key } : {}),
  });
}

function invalidFile(path: string, why: string): TermadaError {
  return new TermadaError("INVALID_ARGUMENT", `Server list "${path}" is not valid: ${why}`, {
    details: { file: path },
    hint: "Fix or remove the file (it holds the servers added with `termada servers add`)",
  });
}

/** Whole-file write: a temp file beside it, fsynced, renamed over it, the directory synced. */
export async function writeAtomic(path: string, text: string): Promise<void> {
  const dir = dirname(path);
  await Deno.mkdir(dir, { recursive: true, mode: 0o700 });
  const tmp = `${path}.${crypto.randomUUID().slice(0, 8)}.tmp`;
  try {
    const f = await Deno.open(tmp, { write: true, createNew: true, mode: 0o600 });
    try {
      await f.write(new TextEncoder().encode(text));
      await f.syncData();
    } finally {
      f.close();
    }
    await Deno.rename(tmp, path);
  } catch (err) {
    await Deno.remove(tmp).catch(() => {/* never created, or already renamed */});
    throw err;
  }
  try {
    const d = await Deno.open(dir, { read: true });
    try {
      await d.syncData();
    } finally {
      d.close();
    }
  } catch {
    // Some filesystems refuse to sync a directory; the rename is still in place.
  }
}
