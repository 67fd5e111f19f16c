/** @jsxImportSource preact */
/** @jsxRuntime automatic */
/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
/**
 * Servers: the inventory agents reach by name (the config file's servers and those added live)
 * with what the last connection attempt found, an Add form, Remove (live servers only) and
 * Forget host key, and every agent's open port forwards. Data: `GET /api/servers`,
 * `POST /api/servers`, `DELETE /api/servers/{name}`, `POST /api/servers/{name}/forget-host-key`,
 * `GET /api/forwards`; refetched (throttled) while the tab is shown when server, host key,
 * forward, action or session events arrive. Also the server label of a remote session's card.
 */
import { useCallback, useState } from "preact/hooks";
import { api, type HttpError } from "./api.ts";
import { Confirm } from "./views.tsx";
import { useThrottledLoad } from "./hooks.ts";
import type { ForwardList, OperatorServerList, OperatorSession } from "../src/wire/mod.ts";

type OperatorServer = OperatorServerList["servers"][number];

/** Refetches at most this often (events can come in bursts). */

const time = (iso: string | undefined) => iso ? new Date(iso).toLocaleTimeString() : "";

function address(s: { user: string; host: string; port: number }): string {
  return `${s.user}@${s.host.includes(":") ? `[${s.host}]` : s.host}:${s.port}`;
}

function bytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1 << 20) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / (1 << 20)).toFixed(1)} MiB`;
}

/**
 * The server a remote session runs on, and its link while it reconnects (a fresh shell follows:
 * cwd and environment reset). Nothing for a local session.
 */
export function SessionTarget(props: { session: OperatorSession }): preact.JSX.Element | null {
  const { target, link } = props.session;
  if (target === "local") return null;
  return (
    <>
      <span class="badge target" data-target={target} title={`Runs on server ${target}`}>
        {target}
      </span>
      {link?.state === "reconnecting" && (
        <span
          class="badge link-reconnecting"
          data-link="reconnecting"
          role="status"
          title={link.last_error ?? "The connection to the server dropped"}
        >
          reconnecting{link.reconnects > 0 ? ` (#${link.reconnects + 1})` : ""}
        </span>
      )}
    </>
  );
}

function Reachability(props: { server: OperatorServer }): preact.JSX.Element {
  const s = props.server;
  const state = s.reachable === undefined ? "unknown" : s.reachable ? "up" : "down";
  return (
    <span class="reach" data-reachable={state}>
      <span class={`badge reach-${state}`}>
        {state === "unknown" ? "not tried" : state === "up" ? "reachable" : "unreachable"}
      </span>
      {s.checked_at && <time class="dim">{time(s.checked_at)}</time>}
      {s.last_error && <span class="reach-error">{s.last_error}</span>}
    </span>
  );
}

interface Draft {
  name: string;
  host: string;
  port: string;
  user: string;
  tags: string;
  hostKey: string;
}
const EMPTY: Draft = { name: "", host: "", port: "", user: "", tags: "", hostKey: "" };

type Pending =
  | { kind: "remove"; server: OperatorServer }
  | { kind: "forget"; server: OperatorServer };

export function ServersView(props: {
  token: string;
  /** The tab is shown: data is fetched only then (and on events while shown). */
  visible: boolean;
  /** Bumped by the App on server, host key, forward, action and session events. */
  pulse: number;
  /** Open sessions (a server's count of sessions). */
  sessions: OperatorSession[];
}): preact.JSX.Element {
  const { token } = props;
  const [servers, setServers] = useState<OperatorServer[] | undefined>();
  const [forwards, setForwards] = useState<ForwardList["forwards"]>([]);
  const [error, setError] = useState<string | undefined>();
  const [unavailable, setUnavailable] = useState<string | undefined>();
  const [draft, setDraft] = useState<Draft>(EMPTY);
  const [formError, setFormError] = useState<string | undefined>();
  const [busy, setBusy] = useState<Record<string, boolean>>({});
  const [note, setNote] = useState<string | undefined>();
  const [confirm, setConfirm] = useState<Pending | undefined>();

  const load = useCallback(async () => {
    const [s, f] = await Promise.allSettled([
      api<OperatorServerList>(token, "/api/servers"),
      api<ForwardList>(token, "/api/forwards"),
    ]);
    if (s.status === "fulfilled") {
      setServers(s.value.servers);
      setUnavailable(undefined);
      setError(undefined);
    } else {
      const err = s.reason as HttpError;
      // An older daemon has no /api/servers (404); one without SSH support says so (501).
      if (err.status === 404) setUnavailable("Servers are not available on this daemon.");
      else if (err.status === 501) setUnavailable(err.message);
      else setError(`servers: ${err.message}`);
    }
    if (f.status === "fulfilled") setForwards(f.value.forwards);
    else if (s.status === "fulfilled") setError(`forwards: ${(f.reason as Error).message}`);
  }, [token]);

  useThrottledLoad(load, props.visible, props.pulse);

  const act = async (key: string, label: string, fn: () => Promise<unknown>) => {
    setBusy((b) => ({ ...b, [key]: true }));
    try {
      await fn();
      setError(undefined);
      return true;
    } catch (err) {
      setError(`${label}: ${(err as Error).message}`);
      return false;
    } finally {
      setBusy(({ [key]: _, ...rest }) => rest);
      await load();
    }
  };

  const add = async (e: Event) => {
    e.preventDefault();
    setFormError(undefined);
    setNote(undefined);
    const port = draft.port.trim();
    if (port !== "" && !/^\d+$/.test(port)) {
      setFormError(`Port must be a number, not "${port}"`);
      return;
    }
    const tags = draft.tags.split(/[\s,]+/).filter((t) => t !== "");
    const body = {
      name: draft.name.trim(),
      host: draft.host.trim(),
      user: draft.user.trim(),
      ...(port === "" ? {} : { port: Number(port) }),
      ...(tags.length === 0 ? {} : { tags }),
      ...(draft.hostKey.trim() === "" ? {} : { host_key: draft.hostKey.trim() }),
    };
    setBusy((b) => ({ ...b, add: true }));
    try {
      const r = await api<OperatorServerList>(token, "/api/servers", {
        method: "POST",
        body: JSON.stringify(body),
      });
      setServers(r.servers);
      setDraft(EMPTY);
      setNote(`Added server "${body.name}"`);
    } catch (err) {
      setFormError(`Cannot add server "${body.name}": ${(err as Error).message}`);
    } finally {
      setBusy(({ add: _, ...rest }) => rest);
    }
  };

  const confirmed = async () => {
    const c = confirm;
    setConfirm(undefined);
    if (!c) return;
    const name = c.server.name;
    const path = `/api/servers/${encodeURIComponent(name)}`;
    setNote(undefined);
    if (c.kind === "remove") {
      const ok = await act(
        `rm:${name}`,
        `remove ${name}`,
        () => api(token, path, { method: "DELETE" }),
      );
      if (ok) setNote(`Removed server "${name}"`);
    } else {
      let removed = 0;
      const ok = await act(`forget:${name}`, `forget host key of ${name}`, async () => {
        const r = await api<{ removed: number }>(token, `${path}/forget-host-key`, {
          method: "POST",
          body: "{}",
        });
        removed = r.removed;
      });
      if (ok) {
        setNote(
          removed === 0
            ? `No host key was recorded for "${name}"`
            : `Forgot the host key of "${name}": the next connection records the key it sees`,
        );
      }
    }
  };

  if (unavailable) return <p class="empty" data-servers-unavailable>{unavailable}</p>;
  const field = (key: keyof Draft, label: string, attrs: Record<string, unknown> = {}) => (
    <label class={`field field-${key}`}>
      <span>{label}</span>
      <input
        name={key}
        data-server-field={key}
        value={draft[key]}
        autocomplete="off"
        spellcheck={false}
        onInput={(e) => {
          const v = (e.currentTarget as HTMLInputElement).value;
          setDraft((d) => ({ ...d, [key]: v }));
        }}
        {...attrs}
      />
    </label>
  );
  const sessionsOn = (name: string) => props.sessions.filter((s) => s.target === name).length;

  return (
    <div class="servers">
      {error && <p class="error" role="alert">{error}</p>}
      {note && <p class="note" role="status" data-servers-note>{note}</p>}
      <h2>Servers</h2>
      {servers === undefined
        ? <p class="empty">Loading…</p>
        : servers.length === 0
        ? (
          <p class="empty" data-servers-empty>
            No servers yet: add one below, or list them under <code>servers:</code> in the config.
          </p>
        )
        : (
          <div class="table-scroll">
            <table class="servers-table">
              <thead>
                <tr>
                  <th>Name</th>
                  <th>Address</th>
                  <th>Tags</th>
                  <th>Source</th>
                  <th>Reachability</th>
                  <th>Sessions</th>
                  <th></th>
                </tr>
              </thead>
              <tbody>
                {servers.map((s) => (
                  <tr key={s.name} data-server={s.name} data-source={s.source}>
                    <td class="mono">{s.name}</td>
                    <td class="mono">{address(s)}</td>
                    <td>{s.tags.join(", ")}</td>
                    <td>
                      <span class={`badge src-${s.source}`}>{s.source}</span>
                      {s.host_key && <span class="dim" title={s.host_key}>key pinned</span>}
                    </td>
                    <td>
                      <Reachability server={s} />
                    </td>
                    <td>{sessionsOn(s.name)}</td>
                    <td>
                      <div class="actions">
                        <button
                          type="button"
                          data-forget-host-key={s.name}
                          disabled={!!busy[`forget:${s.name}`]}
                          title="After the server was really re-keyed: the next connection records the key it sees"
                          onClick={() => setConfirm({ kind: "forget", server: s })}
                        >
                          Forget host key
                        </button>
                        {s.source === "live" && (
                          <button
                            type="button"
                            class="danger"
                            data-remove-server={s.name}
                            disabled={!!busy[`rm:${s.name}`]}
                            onClick={() => setConfirm({ kind: "remove", server: s })}
                          >
                            Remove
                          </button>
                        )}
                      </div>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}

      <form class="server-add" data-server-add onSubmit={add} aria-label="Add a server">
        <h3>Add a server</h3>
        <div class="fields">
          {field("name", "Name", { required: true, maxLength: 63, placeholder: "web-1" })}
          {field("host", "Host", { required: true, maxLength: 253, placeholder: "10.0.0.5" })}
          {field("port", "Port", { inputMode: "numeric", maxLength: 5, placeholder: "22" })}
          {field("user", "User", { required: true, maxLength: 64, placeholder: "deploy" })}
          {field("tags", "Tags", { placeholder: "prod, web" })}
          {field("hostKey", "Host key (optional)", { placeholder: "ssh-ed25519 AAAA…" })}
        </div>
        {formError && <p class="op-error" role="alert" data-server-add-error>{formError}</p>}
        <div class="actions">
          <button type="submit" data-server-submit disabled={!!busy.add}>Add server</button>
        </div>
        <p class="dim">
          Without a host key the first connection records the key it sees (trust on first use).
        </p>
      </form>

      <h2>Port forwards</h2>
      {forwards.length === 0
        ? <p class="empty" data-forwards-empty>No open forwards.</p>
        : (
          <div class="table-scroll">
            <table class="forwards-table">
              <thead>
                <tr>
                  <th>Forward</th>
                  <th>Owner</th>
                  <th>Server</th>
                  <th>Remote</th>
                  <th>Local</th>
                  <th>Connections</th>
                  <th>In / out</th>
                  <th>State</th>
                  <th>Opened</th>
                </tr>
              </thead>
              <tbody>
                {forwards.map((f) => (
                  <tr key={f.forward_id} data-forward={f.forward_id}>
                    <td class="mono">{f.forward_id}</td>
                    <td>{f.owner ?? ""}</td>
                    <td class="mono">{f.server}</td>
                    <td class="mono">{f.remote_host}:{f.remote_port}</td>
                    <td class="mono">{f.local_address}:{f.local_port}</td>
                    <td>{f.connections} ({f.total_connections} total)</td>
                    <td>{bytes(f.bytes_in)} / {bytes(f.bytes_out)}</td>
                    <td>
                      <span class={`badge fw-${f.state}`}>{f.state}</span>
                      {(f.closed_reason ?? f.last_error) && (
                        <span class="dim">{f.closed_reason ?? f.last_error}</span>
                      )}
                    </td>
                    <td>
                      <time>{time(f.created_at)}</time>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}

      <Confirm
        open={confirm !== undefined}
        title={confirm?.kind === "remove"
          ? `Remove server ${confirm.server.name}?`
          : `Forget the host key of ${confirm?.server.name ?? ""}?`}
        confirmLabel={confirm?.kind === "remove" ? "Remove" : "Forget host key"}
        onConfirm={confirmed}
        onCancel={() => setConfirm(undefined)}
      >
        {confirm?.kind === "remove"
          ? (
            <p>
              Agents can no longer reach <code>{address(confirm.server)}</code>{" "}
              by name; its port forwards close. Open sessions keep running.
            </p>
          )
          : (
            <p>
              Do this only after the server was really re-keyed: the next connection trusts and
              records whatever key it is then shown.
            </p>
          )}
      </Confirm>
    </div>
  );
}
