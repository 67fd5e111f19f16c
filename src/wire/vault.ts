/**
 * The vault on the wire: what agents see (`vault_list`: names and kinds, never values) and the
 * operator's routes (status, unlock, lock, entries). No schema here has a field for a value
 * going out; the operator's `set` carries one in (base64), and only in.
 */
import { z } from "zod";
import { VaultName } from "./common.ts";

export const VAULT_KIND_NAMES = ["secret", "ssh_key", "password"] as const;
export const VaultKindSchema = z.enum(VAULT_KIND_NAMES);

export const AgentVaultEntry = z.object({ name: z.string(), kind: VaultKindSchema });
export const VaultListResult = z.object({ entries: z.array(AgentVaultEntry) });
export type VaultListResult = z.output<typeof VaultListResult>;

export const VaultStatusSchema = z.object({
  exists: z.boolean(),
  protection: z.enum(["passphrase", "identity"]).nullable(),
  unlocked: z.boolean(),
  entries: z.number().int().nullable(),
  unlocked_at: z.string().nullable(),
  unlocked_by: z.string().nullable(),
});
export type VaultStatusView = z.output<typeof VaultStatusSchema>;

export const VaultEntryView = z.object({
  name: z.string(),
  kind: VaultKindSchema,
  description: z.string().optional(),
  created: z.string(),
  updated: z.string(),
  bytes: z.number().int(),
});
export type VaultEntryView = z.output<typeof VaultEntryView>;

/** POST /api/vault/unlock: a passphrase, or an age identity ("AGE-SECRET-KEY-1…"). */
export const VaultUnlockInput = z.strictObject({
  passphrase: z.string().min(1).max(1024).optional(),
  identity: z.string().min(1).max(4096).optional(),
}).refine((v) => (v.passphrase === undefined) !== (v.identity === undefined), {
  message: 'needs exactly one of "passphrase" and "identity"',
});
export type VaultUnlockInput = z.output<typeof VaultUnlockInput>;

/** PUT /api/vault/entries/{name}: the value as base64 (bytes), at most 64 KiB decoded. */
export const VaultSetInput = z.strictObject({
  kind: VaultKindSchema.optional(),
  description: z.string().max(256).optional(),
  value_b64: z.string().min(1).max(90_000).regex(/^[A-Za-z0-9+/]*={0,2}$/, "must be base64"),
});
export type VaultSetInput = z.output<typeof VaultSetInput>;

export const VaultEntryName = VaultName;
