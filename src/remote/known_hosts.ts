/**
 * The host key trust store of SSH connections: a trust-on-first-use `known_hosts` file in the
 * daemon's state dir, in OpenSSH's format, and pinned keys from the inventory.
 *
 * Format (what `ssh-keygen` and `ssh` write, so lines can be pasted from `~/.ssh/known_hosts`):
 * one entry a line, `hosts keytype base64 [comment]`; `hosts` is a comma-separated list of
 * patterns (`name` for port 22, `[name]:port` otherwise, `*` and `?` wildcards, `!pattern`
 * negates) or one hashed host `|1|salt|hash` (`ssh-keygen -H`). Blank lines and `#` comments
 * are ignored. `@revoked` lines name keys that are refused for the hosts they match.
 * `@cert-authority` lines are not supported: they are skipped and give no trust (a server
 * offering a certificate-signed key is treated as a first contact, or as changed if a plain
 * entry for it exists). Any other malformed line refuses the whole file — every unpinned
 * verification fails closed until an operator fixes it — and so does a file over 1 MiB, over
 * 10 000 lines or with a line over 16 KiB.
 *
 * The file is re-read at every verification (operators' edits apply at once). Verifications
 * and `forget` run one at a time, in call order, on one promise chain, each reading the file
 * afresh, so concurrent first contacts record one line and a later, different key is refused
 * as changed.
 * One daemon owns the file; nothing guards against another process appending at the same time.
 */
import { createHash, createHmac, timingSafeEqual } from "node:crypto";
import { dirname } from "node:path";
import { TermadaError, toTermadaError } from "../shared/mod.ts";
import type { ServerBinding } from "./binding.ts";

/** A host key recorded on first contact (the caller audits it). */
export interface HostKeyEvent {
  /** The inventory name. */
  server: string;
  host: string;
  port: number;
  key_type: string;
  /** `SHA256:…`, as `ssh-keygen -l` shows it. */
  fingerprint: string;
}

export interface KnownHostsOptions {
  /** The `known_hosts` file (created 0600, its directory 0700, at the first contact). */
  path: string;
  /**
   * Called after a first contact's line is durably appended, before `verify` resolves; if it
   * throws, `verify` rejects with that error (the line stays). Runs on the store's chain: it must
   * not call back into this `KnownHosts`.
   */
  onRecorded?: (e: HostKeyEvent) => Promise<void> | void;
}

/** One entry for the operator's views. */
export interface KnownHostEntry {
  /** The host field as written (patterns, or the hashed `|1|…` form). */
  hosts: string;
  key_type: string;
  fingerprint: string;
  /** 1-based line in the file. */
  line: number;
}

const MAX_FILE_BYTES = 1024 * 1024;
const MAX_LINES = 10_000;
const MAX_LINE_BYTES = 16 * 1024;
/** Longer is no host name or address (DNS names stop at 253). */
const MAX_HOST_LENGTH = 255;
const MAX_KEY_TYPE_LENGTH = 256;
/** What a host may look like to be written to the file: names, IPv4, IPv6 (with a zone). */
const HOST_RE = /^[A-Za-z0-9._:%-]+$/;
const BASE64_RE = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const HASH_MAGIC = "|1|";
/** SHA-1 sizes of the salt and the HMAC of a hashed host. */
const HASH_BYTES = 20;
const FIX_HINT = "each entry is `hosts keytype base64 [comment]` as ssh-keygen writes it";

type Marker = "revoked" | "cert-authority";

interface Entry {
  line: number;
  marker: Marker | undefined;
  hosts: string;
  matches: (host: string) => boolean;
  keyType: string;
  blob: Uint8Array;
}

interface Parsed {
  /** Usable entries (plain and `@revoked`; `@cert-authority` lines are left out). */
  entries: Entry[];
  /** Every line as read (with a `\r` it had), so `forget` can rewrite the others unchanged. */
  raw: string[];
  endsWithNewline: boolean;
  bytes: number;
}

/** Who asks, for the details of an error about the file. */
interface Ctx {
  server?: string;
  path: string;
}

type Outcome =
  | { kind: "trusted" }
  | { kind: "new" }
  | { kind: "revoked"; entry: Entry }
  | { kind: "changed"; known: Entry };

export class KnownHosts {
  readonly #path: string;
  readonly #onRecorded: KnownHostsOptions["onRecorded"];
  /** Every unpinned verification and every `forget` runs on this chain, one at a time. */
  #chain: Promise<unknown> = Promise.resolve();

  constructor(o: KnownHostsOptions) {
    this.#path = o.path;
    this.#onRecorded = o.onRecorded;
  }

  /**
   * Checks the key a server offered (the raw SSH wire blob ssh2's hostVerifier receives).
   * Resolves when trusted (pinned match, known match, or first contact recorded); throws
   * TermadaError otherwise.
   */
  async verify(binding: ServerBinding, offered: Uint8Array): Promise<void> {
    const server = binding.name;
    const type = readKeyType(offered);
    if (type === undefined) {
      throw new TermadaError(
        "SERVER_UNREACHABLE",
        `Server "${server}" (${binding.host}:${binding.port}) offered a malformed host key; refusing to connect`,
        { retriable: false, details: { server } },
      );
    }
    if (binding.hostKey !== undefined) return checkPinned(binding, binding.hostKey, offered);
    const host = hostPattern(binding.host, binding.port, server);
    const ctx: Ctx = { server, path: this.#path };
    // Reads too run on the chain: verifications are decided in call order (of two first
    // contacts with different keys the later call is the one refused) and never see a
    // half-written line of ours. The file is small; reading it is cheap.
    await this.#serial(async () => {
      const parsed = await readParsed(ctx);
      const outcome = decide(parsed?.entries ?? [], host, offered);
      switch (outcome.kind) {
        case "trusted":
          return;
        case "revoked":
          throw revokedError(binding, offered, outcome.entry, this.#path);
        case "changed":
          throw changedError(binding, fingerprint(outcome.known.blob), fingerprint(offered));
        case "new":
          break;
      }
      const comment = `termada:${server.replace(/[^\x21-\x7e]/g, "_").slice(0, 128)}`;
      const line = `${host} ${type} ${encodeBase64(offered)} ${comment} ${
        new Date().toISOString()
      }`;
      await appendLine(ctx, parsed, line);
      const fp = fingerprint(offered);
      await this.#onRecorded?.({
        server,
        host: binding.host,
        port: binding.port,
        key_type: type,
        fingerprint: fp,
      });
    });
  }

  /**
   * Entries for the operator's views: host pattern, type, fingerprint, line. `@revoked` and
   * `@cert-authority` lines are not listed (they trust nothing). Throws the file's error when
   * it is malformed or unreadable; a missing file has no entries.
   */
  list(): KnownHostEntry[] {
    const parsed = readParsedSync({ path: this.#path });
    return (parsed?.entries ?? []).filter((e) => e.marker === undefined).map((e) => ({
      hosts: e.hosts,
      key_type: e.keyType,
      fingerprint: fingerprint(e.blob),
      line: e.line,
    }));
  }

  /**
   * Removes the entries for host:port (operator "forget"), returns how many. Like
   * `ssh-keygen -R`, a line is removed whole when any of its patterns matches (wildcards
   * included), and `@revoked`/`@cert-authority` lines are kept. The file is rewritten through a
   * temporary file and a rename; a malformed file is refused, not rewritten.
   */
  async forget(host: string, port: number): Promise<number> {
    const pattern = hostPattern(host, port, undefined);
    const ctx: Ctx = { path: this.#path };
    return await this.#serial(async () => {
      const parsed = await readParsed(ctx);
      if (parsed === undefined) return 0;
      const drop = new Set(
        parsed.entries.filter((e) => e.marker === undefined && e.matches(pattern)).map((e) =>
          e.line
        ),
      );
      if (drop.size === 0) return 0;
      const kept = parsed.raw.filter((_, i) => !drop.has(i + 1));
      const text = kept.join("\n") + (parsed.endsWithNewline && kept.length > 0 ? "\n" : "");
      await replaceFile(ctx, new TextEncoder().encode(text));
      return drop.size;
    });
  }

  #serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#chain.then(fn);
    // The chain only orders; each caller gets its own outcome from `run`.
    this.#chain = run.catch(() => {});
    return run;
  }
}

export interface HostVerifierOptions {
  /** Why a key was refused (ssh2 itself only reports "Host denied (verification failed)"). */
  onRefused?: (err: TermadaError) => void;
}

/**
 * ssh2's `hostVerifier` for `binding`, checking with `kh`. It returns nothing on purpose: ssh2
 * takes any other return value as the verdict at once, so a verifier that returns the promise
 * of `verify` (`(key, cb) => kh.verify(b, key).then(...)`) accepts every key.
 */
export function hostVerifier(
  kh: KnownHosts,
  binding: ServerBinding,
  options: HostVerifierOptions = {},
): (key: Uint8Array, verify: (ok: boolean) => void) => void {
  return (key, verify) => {
    kh.verify(binding, key).then(
      () => verify(true),
      (err: unknown) => {
        try {
          options.onRefused?.(toTermadaError(err));
        } finally {
          verify(false);
        }
      },
    );
  };
}

/** `"SHA256:"` + unpadded base64 of sha256(blob), like `ssh-keygen -l`. */
export function fingerprint(blob: Uint8Array): string {
  return "SHA256:" + createHash("sha256").update(blob).digest("base64").replace(/=+$/, "");
}

/** The key type named by a public key blob (its first SSH string, e.g. `ssh-ed25519`). */
export function keyType(blob: Uint8Array): string {
  const t = readKeyType(blob);
  if (t === undefined) {
    throw new RangeError("Not an SSH public key blob: its first string is missing or malformed");
  }
  return t;
}

// --- deciding ---------------------------------------------------------------------------------

function decide(entries: readonly Entry[], host: string, offered: Uint8Array): Outcome {
  const matching = entries.filter((e) => e.matches(host));
  const revoked = matching.find((e) => e.marker === "revoked" && sameBytes(e.blob, offered));
  if (revoked) return { kind: "revoked", entry: revoked };
  const plain = matching.filter((e) => e.marker === undefined);
  if (plain.some((e) => sameBytes(e.blob, offered))) return { kind: "trusted" };
  if (plain.length === 0) return { kind: "new" };
  // Name the key of the offered type when there is one: that is the one that changed.
  const type = readKeyType(offered);
  return { kind: "changed", known: plain.find((e) => e.keyType === type) ?? plain[0]! };
}

function checkPinned(binding: ServerBinding, pin: string, offered: Uint8Array): void {
  const text = pin.trim();
  const offeredFp = fingerprint(offered);
  if (/^SHA256:/i.test(text)) {
    const b64 = text.slice(7).replace(/=+$/, "");
    const digest = decodeBase64(padBase64(b64));
    if (digest === undefined || digest.length !== 32) {
      throw pinError(binding, "a SHA256 fingerprint is 43 base64 characters after `SHA256:`");
    }
    if (`SHA256:${b64}` !== offeredFp) throw pinnedMismatch(binding, `SHA256:${b64}`, offeredFp);
    return;
  }
  const fields = text.split(/\s+/);
  if (fields.length < 2) {
    throw pinError(binding, "expected `keytype base64 [comment]` or `SHA256:…`");
  }
  const blob = decodeBase64(fields[1]!);
  if (blob === undefined) throw pinError(binding, "the key is not valid base64");
  const type = readKeyType(blob);
  if (type !== fields[0]) {
    throw pinError(
      binding,
      type === undefined
        ? "the key is not an SSH public key"
        : `the key is of type "${type}", not "${fields[0]}"`,
    );
  }
  if (!sameBytes(blob, offered)) throw pinnedMismatch(binding, fingerprint(blob), offeredFp);
}

// --- errors -----------------------------------------------------------------------------------

function changedError(b: ServerBinding, known: string, offered: string): TermadaError {
  return new TermadaError(
    "SERVER_UNREACHABLE",
    `Host key of server "${b.name}" (${b.host}:${b.port}) changed: known ${known}, offered ${offered}; refusing to connect`,
    {
      retriable: false,
      details: { server: b.name, host_key: { known, offered } },
      hint:
        `If the server was really re-keyed, an operator removes the old entry (termada servers forget ${b.name}) and connects again`,
    },
  );
}

function pinnedMismatch(b: ServerBinding, known: string, offered: string): TermadaError {
  return new TermadaError(
    "SERVER_UNREACHABLE",
    `Host key of server "${b.name}" (${b.host}:${b.port}) does not match its pinned key: pinned ${known}, offered ${offered}; refusing to connect`,
    {
      retriable: false,
      details: { server: b.name, host_key: { known, offered } },
      hint:
        "If the server was really re-keyed, an operator updates the server's pinned host key in the inventory",
    },
  );
}

function pinError(b: ServerBinding, why: string): TermadaError {
  return new TermadaError(
    "SERVER_UNREACHABLE",
    `Pinned host key of server "${b.name}" is malformed: ${why}; refusing to connect`,
    {
      retriable: false,
      details: { server: b.name, key: "host_key" },
      hint:
        `Set it to the server's public key (\`ssh-keyscan -p ${b.port} ${b.host}\` shows it) or its SHA256 fingerprint (pipe that to \`ssh-keygen -lf -\`)`,
    },
  );
}

function revokedError(
  b: ServerBinding,
  offered: Uint8Array,
  entry: Entry,
  path: string,
): TermadaError {
  return new TermadaError(
    "SERVER_UNREACHABLE",
    `Host key of server "${b.name}" (${b.host}:${b.port}) is revoked: ${
      fingerprint(offered)
    } is marked @revoked at line ${entry.line} of known_hosts "${path}"; refusing to connect`,
    {
      retriable: false,
      details: { server: b.name, file: path, line: entry.line },
      hint:
        "The server offers a key an operator revoked: re-key the server, or remove the @revoked line if it was a mistake",
    },
  );
}

function malformed(ctx: Ctx, line: number, why: string): TermadaError {
  return new TermadaError(
    "SERVER_UNREACHABLE",
    `known_hosts "${ctx.path}" line ${line} is malformed: ${why}`,
    {
      retriable: false,
      details: {
        ...(ctx.server === undefined ? {} : { server: ctx.server }),
        line,
        file: ctx.path,
      },
      hint:
        `An operator fixes or removes line ${line} of "${ctx.path}" (${FIX_HINT}); until then no server without a pinned key can connect`,
    },
  );
}

function refusedFile(ctx: Ctx, why: string, line?: number): TermadaError {
  return new TermadaError("SERVER_UNREACHABLE", `known_hosts "${ctx.path}" is refused: ${why}`, {
    retriable: false,
    details: {
      ...(ctx.server === undefined ? {} : { server: ctx.server }),
      ...(line === undefined ? {} : { line }),
      file: ctx.path,
    },
    hint:
      `An operator removes entries no longer needed from "${ctx.path}" (at most 1 MiB, 10000 lines, 16 KiB a line); until then no server without a pinned key can connect`,
  });
}

function unreadable(ctx: Ctx, why: string, cause?: unknown): TermadaError {
  return new TermadaError("SERVER_UNREACHABLE", `Cannot read known_hosts "${ctx.path}": ${why}`, {
    retriable: false,
    cause,
    details: { ...(ctx.server === undefined ? {} : { server: ctx.server }), file: ctx.path },
    hint:
      `An operator makes "${ctx.path}" a regular file the daemon's user can read and write (mode 0600), or removes it to start trust over`,
  });
}

function cannotWrite(ctx: Ctx, err: unknown): TermadaError {
  const why = err instanceof Error ? err.message : String(err);
  return new TermadaError("SERVER_UNREACHABLE", `Cannot write known_hosts "${ctx.path}": ${why}`, {
    retriable: false,
    cause: err,
    details: { ...(ctx.server === undefined ? {} : { server: ctx.server }), file: ctx.path },
    hint: `An operator makes "${ctx.path}" and its directory writable by the daemon's user`,
  });
}

// --- reading and parsing ----------------------------------------------------------------------

/** The parsed file; undefined when it does not exist. */
async function readParsed(ctx: Ctx): Promise<Parsed | undefined> {
  let info: Deno.FileInfo;
  try {
    info = await Deno.stat(ctx.path);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return undefined;
    throw unreadable(ctx, errMessage(err), err);
  }
  checkInfo(ctx, info);
  let bytes: Uint8Array;
  try {
    using f = await Deno.open(ctx.path, { read: true });
    bytes = await readAtMost(f, MAX_FILE_BYTES + 1);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return undefined;
    throw unreadable(ctx, errMessage(err), err);
  }
  return parse(ctx, bytes);
}

function readParsedSync(ctx: Ctx): Parsed | undefined {
  let info: Deno.FileInfo;
  try {
    info = Deno.statSync(ctx.path);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return undefined;
    throw unreadable(ctx, errMessage(err), err);
  }
  checkInfo(ctx, info);
  let bytes: Uint8Array;
  try {
    using f = Deno.openSync(ctx.path, { read: true });
    bytes = readAtMostSync(f, MAX_FILE_BYTES + 1);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return undefined;
    throw unreadable(ctx, errMessage(err), err);
  }
  return parse(ctx, bytes);
}

function checkInfo(ctx: Ctx, info: Deno.FileInfo): void {
  // A FIFO or device would block or never end; a directory cannot hold entries.
  if (!info.isFile) {
    throw unreadable(ctx, info.isDirectory ? "it is a directory" : "it is not a regular file");
  }
  if (info.size > MAX_FILE_BYTES) {
    throw refusedFile(ctx, `it is ${info.size} bytes, more than ${MAX_FILE_BYTES}`);
  }
}

async function readAtMost(f: Deno.FsFile, limit: number): Promise<Uint8Array> {
  const buf = new Uint8Array(limit);
  let n = 0;
  while (n < limit) {
    const r = await f.read(buf.subarray(n));
    if (r === null) break;
    n += r;
  }
  return buf.subarray(0, n);
}

function readAtMostSync(f: Deno.FsFile, limit: number): Uint8Array {
  const buf = new Uint8Array(limit);
  let n = 0;
  while (n < limit) {
    const r = f.readSync(buf.subarray(n));
    if (r === null) break;
    n += r;
  }
  return buf.subarray(0, n);
}

const UTF8 = new TextDecoder("utf-8", { fatal: true });

function parse(ctx: Ctx, bytes: Uint8Array): Parsed {
  // Grew past the bound between stat and read.
  if (bytes.length > MAX_FILE_BYTES) {
    throw refusedFile(ctx, `it is more than ${MAX_FILE_BYTES} bytes`);
  }
  const raw: string[] = [];
  const entries: Entry[] = [];
  const endsWithNewline = bytes.length > 0 && bytes[bytes.length - 1] === 0x0a;
  let start = 0;
  while (start < bytes.length) {
    let end = bytes.indexOf(0x0a, start);
    if (end === -1) end = bytes.length;
    const lineNo = raw.length + 1;
    if (lineNo > MAX_LINES) {
      throw refusedFile(ctx, `it has more than ${MAX_LINES} lines`, lineNo);
    }
    if (end - start > MAX_LINE_BYTES) {
      throw malformed(ctx, lineNo, `it is longer than ${MAX_LINE_BYTES} bytes`);
    }
    let text: string;
    try {
      text = UTF8.decode(bytes.subarray(start, end));
    } catch {
      // The decoder's own message says nothing more than this.
      throw malformed(ctx, lineNo, "it is not valid UTF-8");
    }
    raw.push(text);
    const entry = parseLine(ctx, lineNo, text);
    if (entry) entries.push(entry);
    start = end + 1;
  }
  return { entries, raw, endsWithNewline, bytes: bytes.length };
}

/** One line's entry; undefined for blank, comment and `@cert-authority` lines. */
function parseLine(ctx: Ctx, lineNo: number, text: string): Entry | undefined {
  const trimmed = text.trim();
  if (trimmed === "" || trimmed.startsWith("#")) return undefined;
  const fields = trimmed.split(/[ \t]+/);
  let marker: Marker | undefined;
  if (fields[0]!.startsWith("@")) {
    const m = fields.shift()!;
    if (m === "@cert-authority") return undefined;
    if (m !== "@revoked") {
      throw malformed(
        ctx,
        lineNo,
        `unknown marker "${m.slice(0, 40)}" (only @revoked is supported)`,
      );
    }
    marker = "revoked";
  }
  if (fields.length < 3) {
    throw malformed(
      ctx,
      lineNo,
      `expected hosts, key type and key, found ${fields.length} field${
        fields.length === 1 ? "" : "s"
      }`,
    );
  }
  const [hosts, type, b64] = fields as [string, string, string];
  const blob = decodeBase64(b64);
  if (blob === undefined) throw malformed(ctx, lineNo, "the key is not valid base64");
  const embedded = readKeyType(blob);
  if (embedded === undefined) {
    throw malformed(ctx, lineNo, "the key is not an SSH public key (no key type inside)");
  }
  if (embedded !== type) {
    throw malformed(
      ctx,
      lineNo,
      `the key is of type "${embedded}" but the line says "${type.slice(0, 64)}"`,
    );
  }
  return {
    line: lineNo,
    marker,
    hosts,
    matches: hostMatcher(ctx, lineNo, hosts),
    keyType: type,
    blob,
  };
}

function hostMatcher(ctx: Ctx, lineNo: number, hosts: string): (host: string) => boolean {
  if (hosts.startsWith("|")) {
    if (!hosts.startsWith(HASH_MAGIC)) {
      throw malformed(ctx, lineNo, "unsupported hashed host (only |1|salt|hash is)");
    }
    const parts = hosts.slice(HASH_MAGIC.length).split("|");
    const salt = parts.length === 2 ? decodeBase64(parts[0]!) : undefined;
    const hash = parts.length === 2 ? decodeBase64(parts[1]!) : undefined;
    if (salt?.length !== HASH_BYTES || hash?.length !== HASH_BYTES) {
      throw malformed(ctx, lineNo, "a hashed host is |1|salt|hash with 20-byte base64 values");
    }
    return (host) => timingSafeEqual(createHmac("sha1", salt).update(host).digest(), hash);
  }
  const patterns = hosts.toLowerCase().split(",").filter((p) => p !== "");
  return (host) => {
    let matched = false;
    for (const p of patterns) {
      if (p.startsWith("!")) {
        // A negated match excludes the host whatever else matches (as OpenSSH does).
        if (globMatch(p.slice(1), host)) return false;
      } else if (!matched && globMatch(p, host)) {
        matched = true;
      }
    }
    return matched;
  };
}

/** `*` and `?` wildcards; linear backtracking on the last star. Both sides lowercased. */
function globMatch(p: string, s: string): boolean {
  let pi = 0, si = 0, star = -1, mark = 0;
  while (si < s.length) {
    if (pi < p.length && (p[pi] === "?" || p[pi] === s[si])) {
      pi++;
      si++;
    } else if (pi < p.length && p[pi] === "*") {
      star = pi++;
      mark = si;
    } else if (star !== -1) {
      pi = star + 1;
      si = ++mark;
    } else {
      return false;
    }
  }
  while (p[pi] === "*") pi++;
  return pi === p.length;
}

/** The host as known_hosts names it: `host` for port 22, `[host]:port` otherwise, lowercased. */
function hostPattern(host: string, port: number, server: string | undefined): string {
  const bad = (why: string) =>
    new TermadaError(
      "INVALID_ARGUMENT",
      `Cannot check host keys for ${
        server === undefined ? `host "${host.slice(0, 80)}"` : `server "${server}"`
      }: ${why}`,
      { ...(server === undefined ? {} : { details: { server } }) },
    );
  if (host.length === 0 || host.length > MAX_HOST_LENGTH || !HOST_RE.test(host)) {
    throw bad(`"${host.slice(0, 80)}" is not a host name or address`);
  }
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    throw bad(`port ${port} is not between 1 and 65535`);
  }
  const h = host.toLowerCase();
  return port === 22 ? h : `[${h}]:${port}`;
}

// --- writing ----------------------------------------------------------------------------------

/** Appends one line (after a newline if the file's last line has none), then fdatasync. */
async function appendLine(ctx: Ctx, parsed: Parsed | undefined, line: string): Promise<void> {
  const prefix = parsed !== undefined && parsed.bytes > 0 && !parsed.endsWithNewline ? "\n" : "";
  const data = new TextEncoder().encode(`${prefix}${line}\n`);
  // Refuse what would make the file refused for everyone afterwards.
  if (data.length - prefix.length - 1 > MAX_LINE_BYTES) {
    throw refusedFile(ctx, `the entry to record would be longer than ${MAX_LINE_BYTES} bytes`);
  }
  if ((parsed?.bytes ?? 0) + data.length > MAX_FILE_BYTES) {
    throw refusedFile(
      ctx,
      `recording one more entry would make it larger than ${MAX_FILE_BYTES} bytes`,
    );
  }
  if ((parsed?.raw.length ?? 0) + 1 > MAX_LINES) {
    throw refusedFile(ctx, `recording one more entry would make it longer than ${MAX_LINES} lines`);
  }
  const dir = dirname(ctx.path);
  try {
    if (parsed === undefined) await Deno.mkdir(dir, { recursive: true, mode: 0o700 });
    const f = await Deno.open(ctx.path, { append: true, create: true, mode: 0o600 });
    try {
      await writeAll(f, data);
      await f.syncData();
    } finally {
      f.close();
    }
    // A new file's directory entry must be durable too.
    if (parsed === undefined) await syncDir(dir);
  } catch (err) {
    throw cannotWrite(ctx, err);
  }
}

/** Replaces the file's content atomically (temporary file, fdatasync, rename, directory sync). */
async function replaceFile(ctx: Ctx, data: Uint8Array): Promise<void> {
  const dir = dirname(ctx.path);
  const tmp = `${ctx.path}.tmp-${crypto.randomUUID()}`;
  try {
    const f = await Deno.open(tmp, { write: true, createNew: true, mode: 0o600 });
    try {
      await writeAll(f, data);
      await f.syncData();
    } finally {
      f.close();
    }
    await Deno.rename(tmp, ctx.path);
    await syncDir(dir);
  } catch (err) {
    await Deno.remove(tmp).catch(() => {
      // Never created, or already renamed: nothing to clean up.
    });
    throw cannotWrite(ctx, err);
  }
}

async function writeAll(f: Deno.FsFile, data: Uint8Array): Promise<void> {
  let n = 0;
  while (n < data.length) n += await f.write(data.subarray(n));
}

async function syncDir(dir: string): Promise<void> {
  using d = await Deno.open(dir, { read: true });
  await d.syncData();
}

// --- bytes ------------------------------------------------------------------------------------

/** The first SSH string of a key blob when it is a plausible key type name. */
function readKeyType(blob: Uint8Array): string | undefined {
  if (blob.length < 4) return undefined;
  const len = new DataView(blob.buffer, blob.byteOffset, blob.byteLength).getUint32(0);
  if (len === 0 || len > MAX_KEY_TYPE_LENGTH || 4 + len > blob.length) return undefined;
  let s = "";
  for (let i = 4; i < 4 + len; i++) {
    const c = blob[i]!;
    if (c < 0x21 || c > 0x7e) return undefined;
    s += String.fromCharCode(c);
  }
  return s;
}

function decodeBase64(s: string): Uint8Array | undefined {
  if (s.length === 0 || !BASE64_RE.test(s)) return undefined;
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

function padBase64(s: string): string {
  return s + "=".repeat((4 - (s.length % 4)) % 4);
}

function encodeBase64(b: Uint8Array): string {
  let bin = "";
  for (let i = 0; i < b.length; i++) bin += String.fromCharCode(b[i]!);
  return btoa(bin);
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function errMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
