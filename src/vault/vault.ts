/** `VaultFile`: the vault file on disk (no key held) and what can be done to it as a whole. */
import { dirname } from "node:path";
import { type Clock, systemClock } from "../shared/mod.ts";
import { binaryAge, headerProtection, type VaultProtection } from "./age_header.ts";
import {
  checkKey,
  fingerprint,
  keyProtection,
  seal,
  sealTarget,
  unseal,
  type VaultContext,
  type VaultKey,
  vaultNotFound,
} from "./codec.ts";
import { CryptoWorker, type CryptoWorkerOptions } from "./crypto.ts";
import { VaultError } from "./errors.ts";
import { LOCK_TIMEOUT_MS, readVaultBytes, removeTemps, withLock, writeAtomic } from "./storage.ts";
import { UnlockedVault } from "./unlocked.ts";
import { syncDir } from "../shared/mod.ts";

/** age's default scrypt work factor (`age -p`); what we write unless told otherwise. */
export const DEFAULT_SCRYPT_WORK_FACTOR = 18;

export interface VaultFileOptions {
  /**
   * scrypt work factor (log2 N, 1–20) for passphrase vaults we write. Default 18 (≈1.4 s per
   * encryption or decryption, in the worker). Lower it in tests only.
   */
  scryptWorkFactor?: number;
  /** Time source for entries' `created`/`updated`. */
  clock?: Clock;
  /** How long a write waits for the lock before VAULT_BUSY (default 10 s). */
  lockTimeoutMs?: number;
  /** Limits of the crypto worker (queue length, per-request timeout). */
  crypto?: CryptoWorkerOptions;
}

/** The file on disk; holds no key. Owns one lazily started crypto worker: call `close()`. */
export class VaultFile implements AsyncDisposable {
  /** e.g. `<state>/vault.age`; the lock file is `<path>.lock`, temp files `<path>.tmp-…`. */
  readonly path: string;
  #ctx: VaultContext;

  constructor(path: string, opts: VaultFileOptions = {}) {
    if (typeof path !== "string" || path.length === 0) throw new TypeError("Vault path is empty");
    const workFactor = opts.scryptWorkFactor ?? DEFAULT_SCRYPT_WORK_FACTOR;
    if (!Number.isInteger(workFactor) || workFactor < 1 || workFactor > 20) {
      throw new RangeError(`Bad scrypt work factor ${workFactor} (want 1–20)`);
    }
    this.path = path;
    this.#ctx = {
      path,
      crypto: new CryptoWorker(opts.crypto),
      clock: opts.clock ?? systemClock,
      workFactor,
      lockTimeoutMs: opts.lockTimeoutMs ?? LOCK_TIMEOUT_MS,
    };
  }

  exists(): boolean {
    try {
      Deno.statSync(this.path);
      return true;
    } catch (err) {
      if (err instanceof Deno.errors.NotFound) return false;
      throw err;
    }
  }

  /**
   * What unlocks it, read from the age header without decrypting: "passphrase" (one scrypt
   * stanza) or "identity" (X25519 stanzas). Undefined when absent; a bad header is VAULT_CORRUPT.
   */
  async protection(): Promise<VaultProtection | undefined> {
    const bytes = await readVaultBytes(this.path);
    if (bytes === undefined) return undefined;
    return headerProtection(binaryAge(bytes, this.path), this.path);
  }

  /** Creates an empty vault protected by `key` (an identity: encrypted to its recipient). */
  async init(key: VaultKey): Promise<void> {
    const k = checkKey(key, true);
    // Encrypt before taking the lock: an empty vault does not depend on what is on disk.
    const age = await seal(this.#ctx, [], await sealTarget(k, this.#ctx.workFactor));
    await Deno.mkdir(dirname(this.path), { recursive: true, mode: 0o700 });
    await withLock(this.path, async () => {
      if (this.exists()) {
        throw new VaultError("VAULT_EXISTS", `Cannot create vault "${this.path}": it exists`, {
          hint: "Open it, or remove it with `termada vault reset` (this destroys every entry)",
        });
      }
      await writeAtomic(this.path, age);
    }, this.#ctx.lockTimeoutMs);
  }

  /**
   * Decrypts and returns an unlocked view. Wrong passphrase or identity → VAULT_BAD_KEY; a
   * damaged file → VAULT_CORRUPT; no file → VAULT_NOT_FOUND. Never modifies the file.
   */
  async open(key: VaultKey): Promise<UnlockedVault> {
    const k = checkKey(key);
    const bytes = await readVaultBytes(this.path);
    if (bytes === undefined) throw vaultNotFound(this.path);
    const entries = await unseal(this.#ctx, bytes, k);
    const target = await sealTarget(k, this.#ctx.workFactor);
    return new UnlockedVault(this.#ctx, {
      key: k,
      target,
      entries,
      fingerprint: await fingerprint(bytes),
      protection: keyProtection(k),
    });
  }

  /** Removes the file and any temp leftovers; returns whether a vault file existed. */
  async reset(): Promise<boolean> {
    try {
      return await withLock(this.path, async () => {
        await removeTemps(this.path);
        try {
          await Deno.remove(this.path);
        } catch (err) {
          if (err instanceof Deno.errors.NotFound) return false;
          throw err;
        }
        await syncDir(dirname(this.path));
        return true;
      }, this.#ctx.lockTimeoutMs);
    } catch (err) {
      if (err instanceof Deno.errors.NotFound) return false; // no directory, so no vault
      throw err;
    }
  }

  /** Ends the crypto worker (a later operation starts a new one). Idempotent. */
  close(): Promise<void> {
    return this.#ctx.crypto.close();
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}
