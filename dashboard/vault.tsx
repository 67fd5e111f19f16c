/** @jsxImportSource preact */
/** @jsxRuntime automatic */
/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
/**
 * Vault: the daemon's age-encrypted vault as the operator sees it — whether it is unlocked,
 * what protects it, who unlocked it and when, and its entries' names, kinds, sizes and dates.
 * Values only ever go in (the Unlock key and an entry's value, read from their fields at submit
 * and cleared there at once); nothing here receives, keeps or shows one. Data:
 * `GET /api/vault`, `POST /api/vault/unlock`, `POST /api/vault/lock`,
 * `PUT /api/vault/entries/{name}`, `DELETE /api/vault/entries/{name}`; refetched (throttled)
 * while the tab is shown when `vault.*` events arrive. Creating the vault is the CLI's
 * (`termada vault init`).
 */
import { useCallback, useRef, useState } from "preact/hooks";
import { api, HttpError } from "./api.ts";
import { Confirm } from "./views.tsx";
import { useBusy, useThrottledLoad } from "./hooks.ts";
import type { VaultEntryView, VaultStatusView } from "../src/wire/mod.ts";

/** `GET /api/vault`: the status and, while unlocked, the entries (never a value). */
type VaultState = VaultStatusView & { list: VaultEntryView[] };
type Kind = VaultEntryView["kind"];

// Spelled out here rather than imported: the wire module's values would pull zod into the bundle.
const KINDS = [
  ["secret", "Secret"],
  ["password", "Password"],
  ["ssh_key", "SSH private key"],
] as const satisfies readonly (readonly [Kind, string])[];

/** What went wrong, as the daemon put it (its message and what to do about it). */
interface Problem {
  message: string;
  hint?: string;
}

function problem(err: unknown): Problem {
  if (err instanceof HttpError) {
    return { message: err.message, ...(err.body?.hint ? { hint: err.body.hint } : {}) };
  }
  return { message: String((err as Error)?.message ?? err) };
}

function ProblemNote(props: { problem: Problem | undefined; tag: string }) {
  if (!props.problem) return null;
  const attrs = { [`data-${props.tag}`]: true };
  return (
    <p class="op-error" role="alert" {...attrs}>
      <span class="op-error-message">{props.problem.message}</span>
      {props.problem.hint && <span class="op-error-hint">{props.problem.hint}</span>}
    </p>
  );
}

const when = (iso: string | null | undefined) => iso ? new Date(iso).toLocaleString() : "";

function size(n: number): string {
  if (n < 1024) return `${n} B`;
  return `${(n / 1024).toFixed(1)} KiB`;
}

/** UTF-8 bytes of `text` as base64 (`value_b64`); chunked so a long key fits `fromCharCode`. */
function toBase64(text: string): string {
  const bytes = new TextEncoder().encode(text);
  let bin = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    bin += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  bytes.fill(0);
  return btoa(bin);
}

/** Reads a secret field and empties it at once (the value lives on only in the request). */
function takeValue(el: HTMLInputElement | HTMLTextAreaElement | null): string {
  if (!el) return "";
  const v = el.value;
  el.value = "";
  return v;
}

/** Attributes of every field that takes a secret: no autofill, spelling or capitalisation help. */
const SECRET_FIELD = {
  autocomplete: "off",
  autocapitalize: "off",
  autocorrect: "off",
  spellcheck: false,
} as const;

type Pending = { kind: "lock" } | { kind: "remove"; entry: VaultEntryView };

interface Draft {
  name: string;
  kind: Kind;
  description: string;
}
const EMPTY: Draft = { name: "", kind: "secret", description: "" };

export function VaultView(props: {
  token: string;
  /** The tab is shown: data is fetched only then (and on events while shown). */
  visible: boolean;
  /** Bumped by the App on `vault.*` events and when the stream is live again. */
  pulse: number;
}): preact.JSX.Element {
  const { token } = props;
  const [vault, setVault] = useState<VaultState | undefined>();
  const [error, setError] = useState<string | undefined>();
  const [unavailable, setUnavailable] = useState<string | undefined>();
  const [busy, run] = useBusy();
  const [note, setNote] = useState<string | undefined>();
  const [confirm, setConfirm] = useState<Pending | undefined>();
  const [unlockError, setUnlockError] = useState<Problem | undefined>();
  const [lockError, setLockError] = useState<Problem | undefined>();
  const [addError, setAddError] = useState<Problem | undefined>();
  const [listError, setListError] = useState<Problem | undefined>();
  // The key type to unlock with, when the file's header does not say (a damaged one).
  const [method, setMethod] = useState<"passphrase" | "identity">("passphrase");
  const [draft, setDraft] = useState<Draft>(EMPTY);
  // The secret fields are uncontrolled: their text never enters component state.
  const keyRef = useRef<HTMLInputElement & HTMLTextAreaElement>(null);
  const valueRef = useRef<HTMLInputElement & HTMLTextAreaElement>(null);
  const wasUnlocked = useRef<boolean | undefined>(undefined);

  const load = useCallback(async () => {
    try {
      const v = await api<VaultState>(token, "/api/vault");
      // Locked or unlocked elsewhere (CLI, another page): an earlier note no longer holds.
      if (wasUnlocked.current !== undefined && wasUnlocked.current !== v.unlocked) {
        setNote(undefined);
      }
      wasUnlocked.current = v.unlocked;
      setVault(v);
      setUnavailable(undefined);
      setError(undefined);
    } catch (err) {
      // An older daemon has no vault routes.
      if (err instanceof HttpError && err.status === 404) {
        setUnavailable("The vault is not available on this daemon.");
      } else setError(`vault: ${(err as Error).message}`);
    }
  }, [token]);

  useThrottledLoad(load, props.visible, props.pulse);

  const protection = vault?.protection ?? method;

  const unlock = (e: Event) => {
    e.preventDefault();
    const secret = takeValue(keyRef.current);
    setUnlockError(undefined);
    setNote(undefined);
    if (secret.trim() === "") {
      setUnlockError({
        message: protection === "identity"
          ? "Paste the age identity (AGE-SECRET-KEY-1…) to unlock the vault"
          : "Type the passphrase to unlock the vault",
      });
      return;
    }
    const body = protection === "identity" ? { identity: secret.trim() } : { passphrase: secret };
    return run("unlock", async () => {
      try {
        await api(token, "/api/vault/unlock", { method: "POST", body: JSON.stringify(body) });
        await load();
        setNote("Unlocked the vault");
      } catch (err) {
        setUnlockError(problem(err));
        await load();
      }
    });
  };

  const add = (e: Event) => {
    e.preventDefault();
    const raw = takeValue(valueRef.current);
    setAddError(undefined);
    setNote(undefined);
    const name = draft.name.trim();
    if (raw === "") {
      setAddError({ message: `Cannot set "${name}": the value is empty` });
      return;
    }
    // OpenSSH refuses a private key without its final newline; a paste often loses it.
    const value = draft.kind === "ssh_key" && !raw.endsWith("\n") ? `${raw}\n` : raw;
    const description = draft.description.trim();
    const body = {
      value_b64: toBase64(value),
      kind: draft.kind,
      ...(description === "" ? {} : { description }),
    };
    return run("add", async () => {
      try {
        const had = vault?.list.some((x) => x.name === name) ?? false;
        await api<VaultEntryView>(token, `/api/vault/entries/${encodeURIComponent(name)}`, {
          method: "PUT",
          body: JSON.stringify(body),
        });
        setDraft(EMPTY);
        await load();
        setNote(`${had ? "Replaced" : "Added"} entry "${name}"`);
      } catch (err) {
        setAddError(problem(err));
        await load();
      }
    });
  };

  const confirmed = async () => {
    const c = confirm;
    setConfirm(undefined);
    if (!c) return;
    setNote(undefined);
    if (c.kind === "lock") {
      setLockError(undefined);
      await run("lock", async () => {
        try {
          await api(token, "/api/vault/lock", { method: "POST", body: "{}" });
          await load();
          setNote("Locked the vault");
        } catch (err) {
          setLockError(problem(err));
          await load();
        }
      });
    } else {
      const name = c.entry.name;
      setListError(undefined);
      await run(`rm:${name}`, async () => {
        try {
          await api(token, `/api/vault/entries/${encodeURIComponent(name)}`, {
            method: "DELETE",
          });
          await load();
          setNote(`Removed entry "${name}"`);
        } catch (err) {
          setListError(problem(err));
          await load();
        }
      });
    }
  };

  if (unavailable) return <p class="empty" data-vault-unavailable>{unavailable}</p>;

  const unlocked = vault?.unlocked ?? false;
  const valueField = draft.kind === "ssh_key"
    ? (
      <textarea
        ref={valueRef}
        name="value"
        data-vault-field="value"
        rows={6}
        placeholder="-----BEGIN OPENSSH PRIVATE KEY-----"
        {...SECRET_FIELD}
      />
    )
    : (
      <input
        ref={valueRef}
        type="password"
        name="value"
        data-vault-field="value"
        maxLength={48 * 1024}
        {...SECRET_FIELD}
      />
    );

  return (
    <div class="vault">
      {error && <p class="error" role="alert">{error}</p>}
      {note && <p class="note" role="status" data-vault-note>{note}</p>}
      <h2>Vault</h2>
      {vault === undefined
        ? <p class="empty">Loading…</p>
        : !vault.exists
        ? (
          <div class="vault-absent" data-vault-absent>
            <p>
              There is no vault yet. Create one on the daemon's machine with the CLI (it cannot be
              created from here):
            </p>
            <pre class="vault-cmd"><code>termada vault init</code></pre>
            <p class="dim">
              That asks for a passphrase; <code>termada vault init --identity FILE</code>{" "}
              encrypts it to an age identity instead. Then unlock it here.
            </p>
          </div>
        )
        : (
          <>
            <div
              class="vault-status"
              data-vault-state={unlocked ? "unlocked" : "locked"}
              aria-label="Vault status"
            >
              <span class={`badge vault-${unlocked ? "unlocked" : "locked"}`}>
                {unlocked ? "unlocked" : "locked"}
              </span>
              <span data-vault-protection={vault.protection ?? "unknown"}>
                {vault.protection === "identity"
                  ? "protected by an age identity"
                  : vault.protection === "passphrase"
                  ? "protected by a passphrase"
                  : "protection unknown"}
              </span>
              {unlocked && (
                <span data-vault-entries={vault.entries ?? 0}>
                  {vault.entries ?? 0} {vault.entries === 1 ? "entry" : "entries"}
                </span>
              )}
              {unlocked && vault.unlocked_at && (
                <span class="dim" data-vault-unlocked-by={vault.unlocked_by ?? ""}>
                  unlocked{vault.unlocked_by ? ` by ${vault.unlocked_by}` : ""} at{" "}
                  <time dateTime={vault.unlocked_at}>{when(vault.unlocked_at)}</time>
                </span>
              )}
              {unlocked && (
                <button
                  type="button"
                  class="danger"
                  data-vault-lock
                  disabled={!!busy.lock}
                  onClick={() => setConfirm({ kind: "lock" })}
                >
                  Lock
                </button>
              )}
            </div>
            <ProblemNote problem={lockError} tag="vault-lock-error" />

            {!unlocked && (
              <form
                class="vault-form"
                data-vault-unlock
                onSubmit={unlock}
                aria-label="Unlock the vault"
              >
                <h3>Unlock</h3>
                {vault.protection === null && (
                  <label class="field">
                    <span>Key type</span>
                    <select
                      data-vault-method
                      value={method}
                      onChange={(e) =>
                        setMethod(
                          (e.currentTarget as HTMLSelectElement).value as typeof method,
                        )}
                    >
                      <option value="passphrase">Passphrase</option>
                      <option value="identity">Age identity</option>
                    </select>
                  </label>
                )}
                <label class="field field-wide">
                  <span>{protection === "identity" ? "Age identity" : "Passphrase"}</span>
                  {protection === "identity"
                    ? (
                      <textarea
                        ref={keyRef}
                        name="identity"
                        data-vault-key
                        rows={3}
                        required
                        placeholder="AGE-SECRET-KEY-1…"
                        {...SECRET_FIELD}
                      />
                    )
                    : (
                      <input
                        ref={keyRef}
                        type="password"
                        name="passphrase"
                        data-vault-key
                        required
                        maxLength={1024}
                        {...SECRET_FIELD}
                      />
                    )}
                </label>
                <ProblemNote problem={unlockError} tag="vault-unlock-error" />
                <div class="actions">
                  <button type="submit" data-vault-unlock-submit disabled={!!busy.unlock}>
                    {busy.unlock ? "Unlocking…" : "Unlock"}
                  </button>
                </div>
                <p class="dim">
                  The key stays in the daemon's memory until the vault is locked or the daemon
                  stops; agents then use entries by name and never see a value.
                </p>
              </form>
            )}

            {unlocked && (
              <>
                <h3>Entries</h3>
                {vault.list.length === 0
                  ? <p class="empty" data-vault-empty>No entries yet: add one below.</p>
                  : (
                    <div class="table-scroll">
                      <table class="vault-table">
                        <thead>
                          <tr>
                            <th>Name</th>
                            <th>Kind</th>
                            <th>Size</th>
                            <th>Updated</th>
                            <th>Description</th>
                            <th></th>
                          </tr>
                        </thead>
                        <tbody>
                          {vault.list.map((x) => (
                            <tr key={x.name} data-vault-entry={x.name} data-kind={x.kind}>
                              <td class="mono">{x.name}</td>
                              <td>
                                <span class={`badge vk-${x.kind}`}>{x.kind}</span>
                              </td>
                              <td class="vault-size">{size(x.bytes)}</td>
                              <td>
                                <time dateTime={x.updated} title={`created ${when(x.created)}`}>
                                  {when(x.updated)}
                                </time>
                              </td>
                              <td class="vault-desc">{x.description ?? ""}</td>
                              <td>
                                <button
                                  type="button"
                                  class="danger"
                                  data-vault-remove={x.name}
                                  aria-label={`Remove entry ${x.name}`}
                                  disabled={!!busy[`rm:${x.name}`]}
                                  onClick={() =>
                                    setConfirm({ kind: "remove", entry: x })}
                                >
                                  Remove
                                </button>
                              </td>
                            </tr>
                          ))}
                        </tbody>
                      </table>
                    </div>
                  )}
                <ProblemNote problem={listError} tag="vault-list-error" />

                <form
                  class="vault-form"
                  data-vault-add
                  onSubmit={add}
                  aria-label="Add or replace an entry"
                >
                  <h3>Add or replace an entry</h3>
                  <div class="fields">
                    <label class="field">
                      <span>Name</span>
                      <input
                        name="name"
                        data-vault-field="name"
                        value={draft.name}
                        required
                        maxLength={64}
                        placeholder="db-url"
                        autocomplete="off"
                        spellcheck={false}
                        onInput={(e) => {
                          const v = (e.currentTarget as HTMLInputElement).value;
                          setDraft((d) => ({ ...d, name: v }));
                        }}
                      />
                    </label>
                    <label class="field field-kind">
                      <span>Kind</span>
                      <select
                        name="kind"
                        data-vault-field="kind"
                        value={draft.kind}
                        onChange={(e) => {
                          const v = (e.currentTarget as HTMLSelectElement).value as Kind;
                          setDraft((d) => ({ ...d, kind: v }));
                        }}
                      >
                        {KINDS.map(([k, label]) => <option key={k} value={k}>{label}</option>)}
                      </select>
                    </label>
                    <label class="field field-wide">
                      <span>Description (optional)</span>
                      <input
                        name="description"
                        data-vault-field="description"
                        value={draft.description}
                        maxLength={256}
                        autocomplete="off"
                        onInput={(e) => {
                          const v = (e.currentTarget as HTMLInputElement).value;
                          setDraft((d) => ({ ...d, description: v }));
                        }}
                      />
                    </label>
                    <label class="field field-wide">
                      <span>Value</span>
                      {valueField}
                    </label>
                  </div>
                  <ProblemNote problem={addError} tag="vault-add-error" />
                  <div class="actions">
                    <button type="submit" data-vault-submit disabled={!!busy.add}>
                      {busy.add ? "Saving…" : "Save entry"}
                    </button>
                  </div>
                  <p class="dim">
                    An existing name is replaced. The value goes to the daemon only; it is never
                    shown again, here or to agents.
                  </p>
                </form>
              </>
            )}
          </>
        )}

      <Confirm
        open={confirm !== undefined}
        title={confirm?.kind === "remove"
          ? `Remove vault entry ${confirm.entry.name}?`
          : "Lock the vault?"}
        confirmLabel={confirm?.kind === "remove" ? "Remove" : "Lock"}
        onConfirm={confirmed}
        onCancel={() => setConfirm(undefined)}
      >
        {confirm?.kind === "remove"
          ? (
            <p>
              The value of <code>{confirm.entry.name}</code>{" "}
              is deleted from the vault file; agents referring to it get an error. There is no undo.
            </p>
          )
          : (
            <p>
              The daemon forgets the key and every value: agents' references fail until the vault is
              unlocked again.
            </p>
          )}
      </Confirm>
    </div>
  );
}
