/**
 * Credentials for a server, in order: the vault entry the server names (`auth`: an `ssh_key`
 * entry logs in with that private key, a `password` entry with that password; the vault must
 * be unlocked), else the daemon user's ssh-agent (`SSH_AUTH_SOCK`), then the unencrypted default
 * keys `~/.ssh/id_ed25519`, `id_ecdsa`, `id_rsa`. Encrypted keys are skipped (the daemon has no
 * one to ask for a passphrase). `~/.ssh/config` is not read. Key bytes stay in the daemon.
 */
import { join } from "node:path";
import { TermadaError } from "../shared/mod.ts";
import type { ServerBinding } from "./binding.ts";
import { type AuthMethod, loadSsh2 } from "./ssh2.ts";

export const DEFAULT_KEY_FILES = ["id_ed25519", "id_ecdsa", "id_rsa"] as const;
/** Private key files larger than this are not read. */
const MAX_KEY_BYTES = 64 * 1024;

export interface CredentialSource {
  /** The daemon user's home (where `.ssh/` is looked for). */
  home?: string;
  /** ssh-agent socket (`SSH_AUTH_SOCK`). */
  agentSocket?: string;
  /** The vault: an entry's kind and value (VAULT_LOCKED / NOT_FOUND are thrown as they are). */
  vault?(server: string, entry: string): { kind: string; value: Uint8Array };
}

/** What `credentials` found, for messages (never key material). */
export interface Credentials {
  methods: AuthMethod[];
  tried: string[];
}

export async function credentials(b: ServerBinding, src: CredentialSource): Promise<Credentials> {
  const { sshUtils } = await loadSsh2();
  const username = b.user;
  if (b.auth !== undefined) {
    if (!src.vault) {
      throw new TermadaError(
        "NOT_SUPPORTED",
        `Server "${b.name}" names vault entry "${b.auth}", and this daemon has no vault`,
        {
          details: { server: b.name },
          hint: "Remove `auth` from the server to use ssh-agent or ~/.ssh keys",
        },
      );
    }
    const { kind, value } = src.vault(b.name, b.auth);
    const tried = [`vault:${b.auth}`];
    if (kind === "password") {
      const password = new TextDecoder().decode(value).replace(/\r?\n$/, "");
      return { methods: [{ type: "password", username, password }], tried };
    }
    if (kind !== "ssh_key") {
      throw new TermadaError(
        "INVALID_ARGUMENT",
        `Server "${b.name}" names vault entry "${b.auth}" of kind "${kind}": only ssh_key and password entries log in`,
        {
          details: { server: b.name, key: b.auth },
          hint: `termada vault set ${b.auth} --kind ssh_key < key_file`,
        },
      );
    }
    const text = new TextDecoder().decode(value);
    const parsed = sshUtils.parseKey(text);
    if (parsed instanceof Error) {
      throw new TermadaError(
        "INVALID_ARGUMENT",
        `Vault entry "${b.auth}" of server "${b.name}" is not an unencrypted private key`,
        { details: { server: b.name, key: b.auth }, hint: "Store the key without a passphrase" },
      );
    }
    return { methods: [{ type: "publickey", username, key: text }], tried };
  }
  const methods: AuthMethod[] = [];
  const tried: string[] = [];
  if (src.agentSocket) {
    methods.push({ type: "agent", username, agent: src.agentSocket });
    tried.push("ssh-agent");
  }
  if (src.home) {
    for (const f of DEFAULT_KEY_FILES) {
      const path = join(src.home, ".ssh", f);
      let text: string;
      try {
        const st = await Deno.stat(path);
        if (!st.isFile || st.size > MAX_KEY_BYTES) continue;
        text = await Deno.readTextFile(path);
      } catch {
        continue; // absent or unreadable: the next one
      }
      const parsed = sshUtils.parseKey(text);
      if (parsed instanceof Error) continue; // encrypted, or not a key
      methods.push({ type: "publickey", username, key: text });
      tried.push(`~/.ssh/${f}`);
    }
  }
  if (methods.length === 0) {
    throw new TermadaError("SERVER_UNREACHABLE", `No credentials for server "${b.name}"`, {
      retriable: false,
      details: { server: b.name },
      hint: "Start an ssh-agent for the daemon's user (SSH_AUTH_SOCK), or give it an " +
        "unencrypted ~/.ssh/id_ed25519 the server accepts",
    });
  }
  return { methods, tried };
}
