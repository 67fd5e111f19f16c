/**
 * The vault's storage core: one age-encrypted file of named secrets (`<state>/vault.age`) that
 * the `age` CLI reads and writes too. This folder owns the file format, its validation, the
 * crypto (always in a Web Worker: age's scrypt blocks a thread for ~1.4 s), atomic writes and
 * the cross-process lock (`<path>.lock`, flock). It does not own unlocking policy, idle
 * timeouts, where the key comes from, the CLI, or which sessions may use an entry.
 *
 * The file is a binary age file (armored ones are read too), protected either by a passphrase
 * (one scrypt stanza, as `age -p` writes) or encrypted to the recipient of one X25519 identity
 * (as `age -r` writes). Its plaintext is UTF-8 JSON:
 *
 * ```json
 * {"termada_vault": 1, "entries": [
 *   {"name": "github-token", "kind": "secret", "description": "CI bot",
 *    "created": "2025-01-02T03:04:05.000Z", "updated": "2025-01-02T03:04:05.000Z",
 *    "value_b64": "Z2hwX3h4eA=="}]}
 * ```
 *
 * `kind` is one of `secret`, `ssh_key`, `password`; `description` is optional; times are ISO
 * 8601; `value_b64` is padded standard base64 of the value's bytes. Nothing else is allowed:
 * an unknown field or kind, a bad or duplicate name, or a value over a limit makes the file
 * VAULT_CORRUPT. So `age -d -i key.txt vault.age | jq` shows it, and a vault can be built by
 * hand with `jq … | age -e -r age1… -o vault.age` (or `age -p`). Writes re-encrypt to the key
 * that opened the vault only (other recipients of a hand-made file are dropped).
 *
 * Callers must `close()` a VaultFile (it ends the worker); `lock()` an UnlockedVault when done.
 */
export { UnlockedVault } from "./unlocked.ts";
export { DEFAULT_SCRYPT_WORK_FACTOR, VaultFile, type VaultFileOptions } from "./vault.ts";
export { MAX_PASSPHRASE_CHARS, type VaultKey } from "./codec.ts";
export { type VaultProtection } from "./age_header.ts";
export { CRYPTO_LIMITS, type CryptoWorkerOptions } from "./crypto.ts";
export { LOCK_TIMEOUT_MS } from "./storage.ts";
export { VaultError, type VaultErrorCode, type VaultErrorOptions } from "./errors.ts";
export {
  VAULT_KINDS,
  VAULT_LIMITS,
  VAULT_NAME_PATTERN,
  type VaultEntryInfo,
  type VaultKind,
} from "./format.ts";
export { generateIdentity, parseIdentityFile } from "./identity.ts";
