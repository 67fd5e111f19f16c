/**
 * The plaintext inside the age file: `{"termada_vault":1,"entries":[…]}` (see mod.ts), encoded
 * and strictly validated here. Pure functions; no I/O, no crypto.
 */
import { badArgument, VaultError } from "./errors.ts";

export type VaultKind = "secret" | "ssh_key" | "password";
export const VAULT_KINDS: readonly VaultKind[] = Object.freeze(["secret", "ssh_key", "password"]);

export const VAULT_LIMITS = Object.freeze(
  {
    entries: 256,
    nameChars: 64,
    valueBytes: 64 * 1024,
    descriptionChars: 256,
    /** The age file, and the plaintext inside it. 256 full entries take about 22 MiB. */
    fileBytes: 32 * 1024 * 1024,
  } as const,
);

export const VAULT_NAME_PATTERN: RegExp = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** The format version this code reads and writes (`termada_vault`). */
export const FORMAT_VERSION = 1;

/** What `list()` shows of an entry: everything but the value. */
export interface VaultEntryInfo {
  name: string;
  kind: VaultKind;
  description?: string;
  /** ISO 8601 (UTC), when the name was first set. */
  created: string;
  /** ISO 8601 (UTC), when the value was last set. */
  updated: string;
  /** Length of the value. */
  bytes: number;
}

/** An entry with its value; the value is owned by the vault that holds it. */
export interface VaultEntry {
  info: VaultEntryInfo;
  value: Uint8Array;
}

const ISO_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/;
const BASE64_RE = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
// deno-lint-ignore no-control-regex -- control characters are exactly what is refused
const CONTROL_RE = /[\u0000-\u001f\u007f-\u009f]/;
const ENTRY_KEYS = new Set(["name", "kind", "description", "created", "updated", "value_b64"]);

/** Problem with a name, or undefined when it is valid. */
export function nameProblem(name: unknown): string | undefined {
  if (typeof name !== "string") return "it is not a string";
  if (!VAULT_NAME_PATTERN.test(name)) {
    return `it must be 1–${VAULT_LIMITS.nameChars} of A-Z a-z 0-9 . _ - and start with a letter or digit`;
  }
  return undefined;
}

function descriptionProblem(d: unknown): string | undefined {
  if (typeof d !== "string") return "it is not a string";
  if ([...d].length > VAULT_LIMITS.descriptionChars) {
    return `it is longer than ${VAULT_LIMITS.descriptionChars} characters`;
  }
  if (CONTROL_RE.test(d)) return "it contains control characters";
  return undefined;
}

/** Checks what `set` is given; throws INVALID_ARGUMENT naming the problem. */
export function checkSetArguments(
  name: string,
  value: Uint8Array,
  opts: { kind: VaultKind; description?: string },
): void {
  const np = nameProblem(name);
  if (np) {
    throw badArgument(
      `Cannot set vault entry ${JSON.stringify(String(name))}: ${np}`,
      "Pick a name like github-token or prod.db_password",
    );
  }
  if (!(value instanceof Uint8Array)) {
    throw badArgument(
      `Cannot set vault entry "${name}": the value is not bytes`,
      "Pass the value as a Uint8Array",
    );
  }
  if (value.length > VAULT_LIMITS.valueBytes) {
    throw badArgument(
      `Cannot set vault entry "${name}": the value has ${value.length} bytes, more than ${VAULT_LIMITS.valueBytes}`,
      "Store large files elsewhere; the vault is for keys, tokens and passwords",
    );
  }
  if (!VAULT_KINDS.includes(opts.kind)) {
    throw badArgument(
      `Cannot set vault entry "${name}": unknown kind ${JSON.stringify(String(opts.kind))}`,
      `Use one of ${VAULT_KINDS.join(", ")}`,
    );
  }
  if (opts.description !== undefined) {
    const dp = descriptionProblem(opts.description);
    if (dp) {
      throw badArgument(
        `Cannot set vault entry "${name}": the description is bad: ${dp}`,
        `Keep it to one line of at most ${VAULT_LIMITS.descriptionChars} characters`,
      );
    }
  }
}

/** The plaintext of a vault holding `entries` (sorted by name; UTF-8 JSON). */
export function encodeVault(entries: Iterable<VaultEntry>): Uint8Array {
  const list = [...entries].sort((a, b) => compareNames(a.info.name, b.info.name)).map((e) => ({
    name: e.info.name,
    kind: e.info.kind,
    ...(e.info.description === undefined ? {} : { description: e.info.description }),
    created: e.info.created,
    updated: e.info.updated,
    value_b64: e.value.toBase64(),
  }));
  const json = JSON.stringify({ termada_vault: FORMAT_VERSION, entries: list }, null, 2) + "\n";
  return new TextEncoder().encode(json);
}

export function compareNames(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * Parses and validates decrypted plaintext. Anything off (not UTF-8 JSON, other version,
 * unknown field or kind, bad name, duplicate, over a limit) throws VAULT_CORRUPT naming it.
 */
export function decodeVault(plaintext: Uint8Array, path: string): Map<string, VaultEntry> {
  const corrupt = (what: string) =>
    new VaultError("VAULT_CORRUPT", `Vault file "${path}" holds bad contents: ${what}`, {
      hint:
        "Inspect it with `age -d` (see docs), fix it by hand and re-encrypt, or restore a backup",
    });
  if (plaintext.length > VAULT_LIMITS.fileBytes) {
    throw corrupt(`the plaintext is larger than ${VAULT_LIMITS.fileBytes} bytes`);
  }
  let doc: unknown;
  try {
    doc = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(plaintext));
  } catch (err) {
    throw corrupt(`it is not UTF-8 JSON (${err instanceof Error ? err.message : err})`);
  }
  if (typeof doc !== "object" || doc === null || Array.isArray(doc)) {
    throw corrupt("the top level is not a JSON object");
  }
  const top = doc as Record<string, unknown>;
  for (const k of Object.keys(top)) {
    if (k !== "termada_vault" && k !== "entries") throw corrupt(`unknown field "${k}"`);
  }
  if (top.termada_vault !== FORMAT_VERSION) {
    throw corrupt(
      `"termada_vault" is ${
        JSON.stringify(top.termada_vault)
      }, this version reads ${FORMAT_VERSION}`,
    );
  }
  const raw = top.entries;
  if (!Array.isArray(raw)) throw corrupt(`"entries" is not an array`);
  if (raw.length > VAULT_LIMITS.entries) {
    throw corrupt(`it has ${raw.length} entries, more than ${VAULT_LIMITS.entries}`);
  }
  const out = new Map<string, VaultEntry>();
  raw.forEach((item: unknown, i) => {
    const entry = decodeEntry(item, (what) => corrupt(`entry ${i} ${what}`));
    if (out.has(entry.info.name)) throw corrupt(`entry ${i}: duplicate name "${entry.info.name}"`);
    out.set(entry.info.name, entry);
  });
  return out;
}

function decodeEntry(item: unknown, corrupt: (what: string) => VaultError): VaultEntry {
  if (typeof item !== "object" || item === null || Array.isArray(item)) {
    throw corrupt("is not a JSON object");
  }
  const e = item as Record<string, unknown>;
  const np = nameProblem(e.name);
  if (np) throw corrupt(`has a bad name ${JSON.stringify(e.name)}: ${np}`);
  const name = e.name as string;
  const bad = (what: string) => corrupt(`("${name}") ${what}`);
  for (const k of Object.keys(e)) if (!ENTRY_KEYS.has(k)) throw bad(`has unknown field "${k}"`);
  if (!VAULT_KINDS.includes(e.kind as VaultKind)) {
    throw bad(`has unknown kind ${JSON.stringify(e.kind)} (known: ${VAULT_KINDS.join(", ")})`);
  }
  if (e.description !== undefined) {
    const dp = descriptionProblem(e.description);
    if (dp) throw bad(`has a bad description: ${dp}`);
  }
  for (const k of ["created", "updated"] as const) {
    const v = e[k];
    if (typeof v !== "string" || !ISO_RE.test(v) || Number.isNaN(Date.parse(v))) {
      throw bad(`has a bad "${k}" time ${JSON.stringify(v)} (want ISO 8601)`);
    }
  }
  const b64 = e.value_b64;
  if (typeof b64 !== "string" || !BASE64_RE.test(b64)) {
    throw bad(`has a "value_b64" that is not standard padded base64`);
  }
  if (b64.length > Math.ceil(VAULT_LIMITS.valueBytes / 3) * 4) {
    throw bad(`has a value larger than ${VAULT_LIMITS.valueBytes} bytes`);
  }
  let value: Uint8Array;
  try {
    value = Uint8Array.fromBase64(b64, { lastChunkHandling: "strict" });
  } catch {
    throw bad(`has a "value_b64" that is not standard padded base64`);
  }
  if (value.length > VAULT_LIMITS.valueBytes) {
    throw bad(`has a value larger than ${VAULT_LIMITS.valueBytes} bytes`);
  }
  return {
    info: {
      name,
      kind: e.kind as VaultKind,
      ...(e.description === undefined ? {} : { description: e.description as string }),
      created: e.created as string,
      updated: e.updated as string,
      bytes: value.length,
    },
    value,
  };
}
