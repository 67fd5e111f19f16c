/**
 * `UnlockedVault`: decrypted entries in memory plus what it takes to rewrite the file (the
 * passphrase, or the identity and its recipient). Every write re-reads the file under the lock,
 * merges into what is on disk and replaces the file atomically.
 */
import { TermadaError } from "../shared/mod.ts";
import type { VaultProtection } from "./age_header.ts";
import {
  fingerprint,
  isoNow,
  seal,
  type SealTarget,
  unseal,
  type VaultContext,
  type VaultKey,
  vaultNotFound,
} from "./codec.ts";
import { badArgument } from "./errors.ts";
import {
  checkSetArguments,
  compareNames,
  nameProblem,
  VAULT_LIMITS,
  type VaultEntry,
  type VaultEntryInfo,
  type VaultKind,
} from "./format.ts";
import { readVaultBytes, withLock, writeAtomic } from "./storage.ts";

/** What VaultFile.open hands over. */
export interface UnlockedState {
  key: VaultKey;
  target: SealTarget;
  entries: Map<string, VaultEntry>;
  /** SHA-256 of the file bytes the entries came from. */
  fingerprint: string;
  protection: VaultProtection;
}

interface Keys {
  key: VaultKey;
  target: SealTarget;
}

export class UnlockedVault {
  readonly path: string;
  /** What unlocked it. */
  readonly protection: VaultProtection;
  #ctx: VaultContext;
  #keys: Keys | undefined;
  #entries: Map<string, VaultEntry>;
  #fingerprint: string;

  /** Made by `VaultFile.open`; takes ownership of `state`. */
  constructor(ctx: VaultContext, state: UnlockedState) {
    this.#ctx = ctx;
    this.path = ctx.path;
    this.protection = state.protection;
    this.#keys = { key: state.key, target: state.target };
    this.#entries = state.entries;
    this.#fingerprint = state.fingerprint;
  }

  /** False after `lock()`. */
  get unlocked(): boolean {
    return this.#keys !== undefined;
  }

  /** Every entry without its value, sorted by name. */
  list(): VaultEntryInfo[] {
    this.#need();
    return [...this.#entries.values()].map((e) => ({ ...e.info })).sort((a, b) =>
      compareNames(a.name, b.name)
    );
  }

  has(name: string): boolean {
    this.#need();
    return this.#entries.has(name);
  }

  info(name: string): VaultEntryInfo | undefined {
    this.#need();
    const e = this.#entries.get(name);
    return e && { ...e.info };
  }

  /** A copy of the value (the caller may zero-fill it when done). */
  value(name: string): Uint8Array | undefined {
    this.#need();
    return this.#entries.get(name)?.value.slice();
  }

  /** Adds or replaces `name`, merged into what is on disk now; `value` is copied. */
  async set(
    name: string,
    value: Uint8Array,
    opts: { kind: VaultKind; description?: string },
  ): Promise<VaultEntryInfo> {
    this.#need();
    checkSetArguments(name, value, opts);
    const copy = value.slice();
    return await this.#mutate((entries) => {
      const old = entries.get(name);
      if (!old && entries.size >= VAULT_LIMITS.entries) {
        throw badArgument(
          `Cannot add vault entry "${name}": the vault holds ${entries.size} entries, the most it can`,
          "Remove entries you no longer need",
        );
      }
      const now = isoNow(this.#ctx.clock);
      const info: VaultEntryInfo = {
        name,
        kind: opts.kind,
        ...(opts.description === undefined ? {} : { description: opts.description }),
        created: old?.info.created ?? now,
        updated: now,
        bytes: copy.length,
      };
      entries.set(name, { info, value: copy });
      return { changed: true, result: { ...info } };
    }).catch((err) => {
      copy.fill(0);
      throw err;
    });
  }

  /** Removes `name` from the file; false when no such entry was on disk. */
  async remove(name: string): Promise<boolean> {
    this.#need();
    const np = nameProblem(name);
    if (np) {
      throw badArgument(
        `Cannot remove vault entry ${JSON.stringify(String(name))}: ${np}`,
        "List the entries to see their names",
      );
    }
    return await this.#mutate((entries) => {
      const had = entries.delete(name);
      return { changed: had, result: had };
    });
  }

  /** Re-reads the file (another process may have changed it). */
  async reload(): Promise<void> {
    const keys = this.#need();
    const bytes = await readVaultBytes(this.path);
    if (bytes === undefined) throw vaultNotFound(this.path, true);
    const fp = await fingerprint(bytes);
    if (fp === this.#fingerprint) return;
    const entries = await unseal(this.#ctx, bytes, keys.key);
    this.#commit(entries, fp);
  }

  /** Forgets values and key, zero-filling the values (strings cannot be wiped in JS). */
  lock(): void {
    for (const e of this.#entries.values()) e.value.fill(0);
    this.#entries = new Map();
    this.#keys = undefined;
  }

  /** Read-merge-write under the lock: `change` edits a copy of the entries now on disk. */
  #mutate<T>(
    change: (entries: Map<string, VaultEntry>) => { changed: boolean; result: T },
  ): Promise<T> {
    const keys = this.#need();
    return withLock(this.path, async () => {
      const bytes = await readVaultBytes(this.path);
      if (bytes === undefined) throw vaultNotFound(this.path, true);
      const fp = await fingerprint(bytes);
      if (fp !== this.#fingerprint) this.#commit(await unseal(this.#ctx, bytes, keys.key), fp);
      const next = new Map(this.#entries);
      const { changed, result } = change(next);
      if (!changed) return result;
      const age = await seal(this.#ctx, next.values(), keys.target);
      await writeAtomic(this.path, age);
      this.#commit(next, await fingerprint(age));
      return result;
    }, this.#ctx.lockTimeoutMs).catch((err) => {
      if (err instanceof Deno.errors.NotFound) throw vaultNotFound(this.path, true);
      throw err;
    });
  }

  /** Installs `entries` as current, zero-filling values no longer held. */
  #commit(entries: Map<string, VaultEntry>, fp: string): void {
    const kept = new Set([...entries.values()].map((e) => e.value));
    for (const e of this.#entries.values()) if (!kept.has(e.value)) e.value.fill(0);
    if (this.#keys === undefined) {
      // Locked while writing: the write happened, but nothing stays in memory.
      for (const e of entries.values()) e.value.fill(0);
      return;
    }
    this.#entries = entries;
    this.#fingerprint = fp;
  }

  #need(): Keys {
    if (this.#keys) return this.#keys;
    throw new TermadaError("VAULT_LOCKED", `Vault "${this.path}" is locked`, {
      hint: "Open the vault again with its passphrase or identity",
    });
  }
}
