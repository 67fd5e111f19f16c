/**
 * The vault as the daemon uses it: one file (src/vault), locked at start, unlocked by an
 * operator (the key stays in this process's memory only), and used by reference — an agent
 * names an entry (`{vault: "db-url"}`), the policy's `vault` rules decide whether it may use it
 * there, and the value goes into the program's environment, a prompt or an SSH login, never
 * into a reply. Every value is registered with the daemon-wide SecretSet the moment it is known
 * (at unlock and at `set`), so no output, screen, recording, event or audit record of this
 * daemon's life shows it. The audit records names and uses, never values.
 *
 * Owns: vault status, unlock/lock, the operator's entry changes, agents' listing and use.
 * Not: the file format and crypto (src/vault), the redactor (src/output).
 */
import type { SecretSet } from "../output/mod.ts";
import type { ResourceSubject } from "../policy/mod.ts";
import { logger, TermadaError } from "../shared/mod.ts";
import {
  type UnlockedVault,
  VAULT_KINDS,
  type VaultEntryInfo,
  VaultError,
  type VaultFile,
  type VaultKey,
  type VaultKind,
} from "../vault/mod.ts";
import type { PolicyVerdict } from "./gateway.ts";
import type { Actor, Recorder } from "./recorder.ts";

const log = logger("vault");

export interface VaultStatus {
  /** The file exists (`termada vault init` made it). */
  exists: boolean;
  /** What unlocks it: a passphrase or an age identity. */
  protection: "passphrase" | "identity" | null;
  unlocked: boolean;
  /** Number of entries (known only while unlocked). */
  entries: number | null;
  unlocked_at: string | null;
  unlocked_by: string | null;
}

/** How a value is used: the audit says which. */
export type VaultUse = "env" | "input" | "server_auth";

export interface VaultOpsOptions {
  file: VaultFile;
  secrets: SecretSet;
  recorder: Recorder;
  /** The policy's `vault` rules (absent: every agent use is denied). */
  decide?: (agent: string, subject: ResourceSubject) => PolicyVerdict;
  /** Told when the status changes (the dashboard's live view). */
  onChange?: (status: VaultStatus) => void;
}

/** An agent's view of an entry: name and kind only. */
export interface AgentVaultEntry {
  name: string;
  kind: VaultKind;
}

export class VaultOps {
  readonly #o: VaultOpsOptions;
  #open: UnlockedVault | undefined;
  #unlockedAt: string | null = null;
  #unlockedBy: string | null = null;
  #protection: VaultStatus["protection"] = null;
  /** One unlock / change at a time (each may take a scrypt run in the worker). */
  #queue: Promise<unknown> = Promise.resolve();

  constructor(o: VaultOpsOptions) {
    this.#o = o;
  }

  get unlocked(): boolean {
    return this.#open !== undefined;
  }

  async status(): Promise<VaultStatus> {
    const exists = this.#o.file.exists();
    let protection: VaultStatus["protection"] = null;
    if (exists) {
      try {
        protection = (await this.#o.file.protection()) ?? null;
      } catch {
        protection = null; // a damaged header: unlock says what is wrong
      }
    }
    return {
      exists,
      protection,
      unlocked: this.#open !== undefined,
      entries: this.#open ? this.#open.list().length : null,
      unlocked_at: this.#unlockedAt,
      unlocked_by: this.#unlockedBy,
    };
  }

  /** Unlocks with `key` (VAULT_LOCKED with state VAULT_BAD_KEY when it does not fit). */
  unlock(by: Actor, key: VaultKey): Promise<VaultStatus> {
    return this.#serial(async () => {
      this.#o.recorder.assertHealthy();
      let v: UnlockedVault;
      try {
        v = await this.#o.file.open(key);
      } catch (err) {
        const reason = err instanceof TermadaError ? err.message : String(err);
        this.#o.recorder.record(by, "vault.unlock_failed", { reason });
        throw err;
      }
      this.#open?.lock();
      this.#open = v;
      this.#registerAll(v);
      this.#unlockedAt = new Date().toISOString();
      this.#unlockedBy = by.id;
      this.#protection = "passphrase" in key ? "passphrase" : "identity";
      this.#o.recorder.record(by, "vault.unlocked", {
        protection: this.#protection,
        entries: v.list().length,
      });
      return this.#changed();
    });
  }

  /** Forgets the key and the values (the redactor keeps masking the values it learned). */
  lock(by: Actor, reason = "locked by an operator"): Promise<VaultStatus> {
    return this.#serial(() => {
      const was = this.#open !== undefined;
      this.#open?.lock();
      this.#open = undefined;
      this.#unlockedAt = null;
      this.#unlockedBy = null;
      if (was) this.#o.recorder.record(by, "vault.locked", { reason });
      return this.#changed();
    });
  }

  /**
   * What the daemon may say about an entry before deciding a use (no value): whether it holds
   * several lines. Undefined while locked or for an unknown entry (the use then says why).
   */
  info(entry: string): { lines: number } | undefined {
    const value = this.#open?.value(entry);
    if (!value) return undefined;
    const text = new TextDecoder().decode(value).replace(/\r?\n$/, "");
    const lines = text.split(/\r?\n|\r/).length;
    value.fill(0);
    return { lines };
  }

  /** VAULT_LOCKED (with the operator's next step) unless the vault is unlocked. */
  assertUnlocked(): void {
    this.#unlockedVault();
  }

  /** The operator's listing: names, kinds, descriptions, dates and sizes; never values. */
  list(): VaultEntryInfo[] {
    return this.#unlockedVault().list();
  }

  /** Adds or replaces an entry (the operator: CLI over the socket, dashboard). */
  set(
    by: Actor,
    name: string,
    value: Uint8Array,
    opts: { kind: VaultKind; description?: string },
  ): Promise<VaultEntryInfo> {
    return this.#serial(async () => {
      const v = this.#unlockedVault();
      this.#o.recorder.assertHealthy();
      // Registered before it is stored: from now on no output of this daemon shows it.
      if (value.length < 4) {
        throw new TermadaError(
          "INVALID_ARGUMENT",
          `Cannot store "${name}": a value of ${value.length} bytes cannot be redacted`,
          { hint: "Vault values must be at least 4 bytes long" },
        );
      }
      this.#o.secrets.add(value);
      const replaced = v.has(name);
      const info = await v.set(name, value, opts);
      // `set` merged what another process wrote meanwhile: those values are masked too.
      this.#registerAll(v);
      this.#o.recorder.record(by, "vault.entry_set", {
        entry: name,
        kind: opts.kind,
        bytes: value.length,
        replaced,
      });
      this.#changed();
      return info;
    });
  }

  remove(by: Actor, name: string): Promise<boolean> {
    return this.#serial(async () => {
      const v = this.#unlockedVault();
      const removed = await v.remove(name);
      if (removed) this.#o.recorder.record(by, "vault.entry_removed", { entry: name });
      this.#changed();
      return removed;
    });
  }

  /**
   * What an agent may see: the names and kinds of the entries its policy lets it use somewhere
   * (on `targets`: local and the servers it may reach). VAULT_LOCKED while locked.
   */
  listFor(agent: string, targets: readonly string[]): AgentVaultEntry[] {
    const v = this.#unlockedVault();
    return v.list()
      .filter((e) =>
        targets.some((target) =>
          this.#decide(agent, { kind: "vault", target, entry: e.name }).action === "allow"
        )
      )
      .map((e) => ({ name: e.name, kind: e.kind }));
  }

  /**
   * Decides `refs` for `agent` on `target` without taking any value: VAULT_LOCKED, NOT_FOUND
   * (unknown entry) or DENIED_BY_POLICY (audited as `vault.denied`), or nothing.
   */
  check(
    agent: string,
    refs: readonly { variable?: string; entry: string }[],
    where: { target: string; use: VaultUse; job_id?: string },
  ): void {
    if (refs.length === 0) return;
    const v = this.#unlockedVault();
    for (const ref of refs) {
      const subject: ResourceSubject = { kind: "vault", target: where.target, entry: ref.entry };
      const d = this.#decide(agent, subject);
      const info = v.info(ref.entry);
      if (d.action === "allow" && info) continue;
      // Unknown and forbidden entries are told apart: the agent names the entry itself.
      const denied = d.action !== "allow";
      this.#o.recorder.record({ kind: "agent", id: agent }, "vault.denied", {
        entry: ref.entry,
        use: where.use,
        target: where.target,
        reason: denied ? d.reason : "no such entry",
        ...(where.job_id ? { job_id: where.job_id } : {}),
      });
      throw denied
        ? new TermadaError("DENIED_BY_POLICY", d.reason, {
          retriable: false,
          details: { key: ref.entry, ...(d.rule ? { rule: d.rule.pattern } : {}) },
          hint: `Ask the operator to allow "${ref.entry}" in the policy's vault rules`,
        })
        : new TermadaError("NOT_FOUND", `The vault has no entry "${ref.entry}"`, {
          details: { key: ref.entry },
          hint: "vault_list shows the entries you may use",
        });
    }
  }

  /**
   * The values of `refs` for `agent` on `target`, decided again (check) at this moment; each
   * use is audited (the entry and the variable, never the value). A value the redactor cannot
   * mask (shorter than 4 bytes, or the daemon-wide set is full) is refused: it would show.
   * Nothing is returned unless all are allowed.
   */
  resolve(
    agent: string,
    refs: readonly { variable?: string; entry: string }[],
    where: { target: string; use: VaultUse; job_id?: string; session_id?: string },
  ): Map<string, Uint8Array> {
    if (refs.length === 0) return new Map();
    this.check(agent, refs, where);
    const v = this.#unlockedVault();
    const out = new Map<string, Uint8Array>();
    for (const ref of refs) {
      const value = v.value(ref.entry)!;
      this.#mustMask(ref.entry, value);
      out.set(ref.variable ?? ref.entry, value);
    }
    for (const ref of refs) {
      this.#o.recorder.record({ kind: "agent", id: agent }, "vault.used", {
        entry: ref.entry,
        use: where.use,
        target: where.target,
        ...(ref.variable ? { variable: ref.variable } : {}),
        ...(where.job_id ? { job_id: where.job_id } : {}),
        ...(where.session_id ? { session_id: where.session_id } : {}),
      });
    }
    return out;
  }

  /** resolve() for an environment: variable → the value as text. */
  resolveEnv(
    agent: string,
    refs: readonly { variable: string; entry: string }[],
    where: { target: string; use: VaultUse; job_id?: string; session_id?: string },
  ): Record<string, string> {
    const env: Record<string, string> = {};
    for (const [k, v] of this.resolve(agent, refs, where)) env[k] = new TextDecoder().decode(v);
    return env;
  }

  /** Registers `value` with the daemon-wide redactor, or refuses to hand it out. */
  #mustMask(entry: string, value: Uint8Array): void {
    try {
      this.#o.secrets.add(value);
    } catch (err) {
      throw new TermadaError(
        "INVALID_ARGUMENT",
        `Vault entry "${entry}" cannot be used: ${(err as Error).message}`,
        {
          details: { key: entry },
          hint: "An operator must store a value of at least 4 bytes (termada vault set)",
        },
      );
    }
  }

  /**
   * The value of a server's `auth` entry (the operator configured it: no agent policy), for
   * the SSH login. VAULT_LOCKED while locked; NOT_FOUND when the entry is gone.
   */
  serverCredential(server: string, entry: string): { kind: VaultKind; value: Uint8Array } {
    const v = this.#unlockedVault(`server "${server}" logs in with vault entry "${entry}"`);
    const info = v.info(entry);
    if (!info) {
      throw new TermadaError(
        "NOT_FOUND",
        `Server "${server}" names vault entry "${entry}", which does not exist`,
        { details: { server, key: entry }, hint: `termada vault set ${entry} --kind ssh_key` },
      );
    }
    const value = v.value(entry)!;
    if (info.kind === "password") this.#mustMask(entry, value);
    this.#o.recorder.note({ kind: "system", id: "termada" }, "vault.used", {
      entry,
      use: "server_auth",
      target: server,
    });
    return { kind: info.kind, value };
  }

  /**
   * The bot token of `notifications.telegram.bot_token_vault` (the operator configured it: no
   * agent policy). VAULT_LOCKED while locked (the message is retried); NOT_FOUND when gone.
   */
  notificationToken(entry: string): string {
    const v = this.#unlockedVault(`notifications use vault entry "${entry}"`);
    const value = v.value(entry);
    if (value === undefined) {
      throw new TermadaError(
        "NOT_FOUND",
        `notifications.telegram names vault entry "${entry}", which does not exist`,
        { details: { key: entry }, hint: `termada vault set ${entry}` },
      );
    }
    this.#mustMask(entry, value);
    return new TextDecoder().decode(value).trim();
  }

  /** Ends the worker (daemon shutdown); the key is forgotten. */
  async close(): Promise<void> {
    this.#open?.lock();
    this.#open = undefined;
    await this.#o.file.close();
  }

  #decide(agent: string, subject: ResourceSubject): PolicyVerdict {
    return this.#o.decide?.(agent, subject) ??
      { action: "deny", reason: "no vault rules (secrets fail closed)" };
  }

  #unlockedVault(why?: string): UnlockedVault {
    if (this.#open) return this.#open;
    const exists = this.#o.file.exists();
    throw new TermadaError(
      "VAULT_LOCKED",
      exists
        ? `The vault is locked${why ? `: ${why}` : ""}`
        : `There is no vault${why ? `: ${why}` : ""}`,
      {
        retriable: false,
        details: { state: exists ? "locked" : "absent" },
        hint: exists
          ? "An operator must unlock it: `termada unlock` (or the dashboard's Vault tab)"
          : "An operator must create it: `termada vault init`, then `termada vault set <name>`",
      },
    );
  }

  #registerAll(v: UnlockedVault): void {
    for (const e of v.list()) {
      const value = v.value(e.name);
      if (!value || value.length < 4) continue;
      try {
        this.#o.secrets.add(value);
      } catch (err) {
        log.warn("a vault value cannot be redacted", { entry: e.name, error: err });
      }
    }
  }

  #changed(): VaultStatus {
    const status: VaultStatus = {
      exists: this.#o.file.exists(),
      protection: this.#protection,
      unlocked: this.#open !== undefined,
      entries: this.#open ? this.#open.list().length : null,
      unlocked_at: this.#unlockedAt,
      unlocked_by: this.#unlockedBy,
    };
    this.#o.onChange?.(status);
    return status;
  }

  #serial<T>(f: () => T | Promise<T>): Promise<T> {
    const run = this.#queue.then(f, f);
    this.#queue = run.catch(() => {});
    return run;
  }
}

/**
 * Variables whose value makes a shell or a program load or run something (a library, an rc
 * file, a pager, a helper): a vault value never goes there. Elsewhere a value from the vault
 * is operator-chosen data, not code, so on a server (no exec gate) a reference is decided by
 * the vault rules alone, while a plain value under the same name is still refused by the
 * remote env rule.
 */
const CODE_ENV =
  /^(LD_[A-Z_]*|DYLD_[A-Z_]*|BASH_FUNC_.*|GIT_[A-Z_]*|XDG_[A-Z_]*)$|^(BASH_ENV|ENV|PROMPT_COMMAND|PS[0-4]|IFS|PATH|SHELLOPTS|BASHOPTS|CDPATH|GLOBIGNORE|PERL5OPT|PERL5LIB|PERLLIB|PERL5DB|PYTHONSTARTUP|PYTHONPATH|PYTHONHOME|NODE_OPTIONS|NODE_PATH|RUBYOPT|RUBYLIB|LUA_INIT|LUA_PATH|LUA_CPATH|JAVA_TOOL_OPTIONS|_JAVA_OPTIONS|JDK_JAVA_OPTIONS|GCONV_PATH|PAGER|EDITOR|VISUAL|SSH_ASKPASS|SUDO_ASKPASS|LESSOPEN|LESSCLOSE|MANPAGER|BROWSER|TERMINFO|ZDOTDIR|HOME|SHELL|TMPDIR|KUBECONFIG|AWS_CONFIG_FILE|DOCKER_CONFIG|NPM_CONFIG_USERCONFIG)$/;

/** INVALID_ARGUMENT when a reference would go into a variable that makes programs run code. */
export function assertDataVariables(refs: readonly { variable: string; entry: string }[]): void {
  const bad = refs.filter((r) => CODE_ENV.test(r.variable));
  if (bad.length === 0) return;
  throw new TermadaError(
    "INVALID_ARGUMENT",
    `Cannot put vault entry "${bad[0]!.entry}" into ${bad[0]!.variable}: that variable makes ` +
      "programs load or run what it names",
    {
      details: { key: bad[0]!.variable },
      hint: "Use an ordinary variable name (DB_URL, API_TOKEN…)",
    },
  );
}

/** Parses a kind given by an operator (INVALID_ARGUMENT naming the choices). */
export function vaultKind(text: string | undefined): VaultKind {
  const k = (text ?? "secret") as VaultKind;
  if (!VAULT_KINDS.includes(k)) {
    throw new TermadaError("INVALID_ARGUMENT", `Unknown vault kind "${text}"`, {
      hint: `Use one of ${VAULT_KINDS.join(", ")}`,
    });
  }
  return k;
}

export { VaultError };
