/**
 * From file bytes to validated entries and back, with the crypto in the worker and every
 * failure classified (wrong key, damaged file). Shared by VaultFile and UnlockedVault.
 */
import { type Clock, TermadaError } from "../shared/mod.ts";
import { binaryAge, headerProtection, type VaultProtection } from "./age_header.ts";
import type { CryptoWorker } from "./crypto.ts";
import { badArgument, VaultError } from "./errors.ts";
import { decodeVault, encodeVault, type VaultEntry } from "./format.ts";
import { checkIdentity, recipientOf } from "./identity.ts";

/** What unlocks a vault: a passphrase (age scrypt) or an age X25519 identity line. */
export type VaultKey = { passphrase: string } | { identity: string };

/** Longest passphrase accepted (age itself has no limit; this bounds the scrypt input). */
export const MAX_PASSPHRASE_CHARS = 1024;

/** What a VaultFile and the vaults it opens share. */
export interface VaultContext {
  path: string;
  crypto: CryptoWorker;
  clock: Clock;
  /** scrypt work factor (log2 N) for passphrase vaults written by us. */
  workFactor: number;
  lockTimeoutMs: number;
}

/** Where a write encrypts to: the passphrase, or the identity's recipient. */
export type SealTarget = { passphrase: string; workFactor: number } | { recipient: string };

/** Checks the key's shape and returns a private copy of it; INVALID_ARGUMENT otherwise. */
export function checkKey(key: VaultKey, forInit = false): VaultKey {
  const shape = "Pass { passphrase } or { identity }";
  if (typeof key !== "object" || key === null) throw badArgument("The vault key is missing", shape);
  const hasPass = "passphrase" in key;
  const hasId = "identity" in key;
  if (hasPass === hasId) {
    throw badArgument("The vault key must be either a passphrase or an identity", shape);
  }
  if (hasPass) {
    const p = key.passphrase;
    if (typeof p !== "string") throw badArgument("The vault passphrase is not a string", shape);
    if (forInit && p.length === 0) {
      throw badArgument("The vault passphrase is empty", "Choose 4–5 random words or more");
    }
    if (p.length > MAX_PASSPHRASE_CHARS) {
      throw badArgument(
        `The vault passphrase is longer than ${MAX_PASSPHRASE_CHARS} characters`,
        "Use a shorter passphrase",
      );
    }
    return { passphrase: p };
  }
  const id = (key as { identity: string }).identity;
  checkIdentity(id);
  return { identity: id };
}

export function keyProtection(key: VaultKey): VaultProtection {
  return "passphrase" in key ? "passphrase" : "identity";
}

export async function sealTarget(key: VaultKey, workFactor: number): Promise<SealTarget> {
  if ("passphrase" in key) return { passphrase: key.passphrase, workFactor };
  return { recipient: await recipientOf(key.identity) };
}

/** Encrypts `entries` to `target` (binary age). */
export function seal(
  ctx: VaultContext,
  entries: Iterable<VaultEntry>,
  target: SealTarget,
): Promise<Uint8Array> {
  return ctx.crypto.encrypt(encodeVault(entries), target);
}

/** Decrypts and validates file bytes (binary or armored). Never modifies anything. */
export async function unseal(
  ctx: VaultContext,
  bytes: Uint8Array,
  key: VaultKey,
): Promise<Map<string, VaultEntry>> {
  const { path } = ctx;
  const age = binaryAge(bytes, path);
  const protection = headerProtection(age, path);
  if (protection !== keyProtection(key)) {
    throw new VaultError(
      "VAULT_BAD_KEY",
      `Cannot open vault "${path}" with ${
        protection === "passphrase" ? "an identity" : "a passphrase"
      }: it is protected by ${protection === "passphrase" ? "a passphrase" : "an age identity"}`,
      {
        hint: protection === "passphrase"
          ? "Unlock it with its passphrase"
          : "Unlock it with the identity file it was created with",
      },
    );
  }
  const r = await ctx.crypto.decrypt(age, key);
  if (!r.ok) {
    if (r.reason === "bad_key") {
      throw "passphrase" in key
        ? new VaultError("VAULT_BAD_KEY", `Cannot open vault "${path}": wrong passphrase`, {
          hint: "Type the passphrase given at `termada vault init`; a lost passphrase cannot be " +
            "recovered (`termada vault reset` starts over)",
        })
        : new VaultError(
          "VAULT_BAD_KEY",
          `Cannot open vault "${path}": it is not encrypted to identity "${await recipientOf(
            key.identity,
          )}"`,
          { hint: "Use the identity file the vault was created with" },
        );
    }
    if (r.reason === "corrupt") {
      throw new VaultError(
        "VAULT_CORRUPT",
        `Vault file "${path}" is damaged: age says "${r.message}"`,
        { hint: "Restore it from a backup, or remove it with `termada vault reset`" },
      );
    }
    throw new TermadaError("INTERNAL", `Cannot decrypt vault "${path}": ${r.message}`);
  }
  try {
    return decodeVault(r.plaintext, path);
  } finally {
    r.plaintext.fill(0);
  }
}

/** SHA-256 of the file bytes: tells whether another process rewrote the file. */
export async function fingerprint(bytes: Uint8Array): Promise<string> {
  const d = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>));
  return d.toHex();
}

export function vaultNotFound(path: string, since = false): VaultError {
  return new VaultError(
    "VAULT_NOT_FOUND",
    since ? `Vault "${path}" was removed since it was opened` : `No vault at "${path}"`,
    { hint: "Create one with `termada vault init`" },
  );
}

export function isoNow(clock: Clock): string {
  return new Date(clock.now()).toISOString();
}
