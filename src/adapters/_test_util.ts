/** Helpers the adapter tests share: a temp directory, a temp SQLite store, a real ticket server. */
import { DatabaseSync } from "node:sqlite";
import { TermadaError } from "../shared/mod.ts";
import { AdapterError } from "./sdk.ts";
import { AdapterRunStore } from "./store.ts";
import type { Admission } from "./runner.ts";
import type { HttpRequestOptions } from "./http_request.ts";

export const allow = (): Promise<Admission> => Promise.resolve({ allowed: true });

/** A fresh directory, removed on dispose. */
export async function tempDir(): Promise<{ path: string } & AsyncDisposable> {
  const path = await Deno.makeTempDir({ prefix: "termada-adapters-" });
  return {
    path,
    [Symbol.asyncDispose]: () => Deno.remove(path, { recursive: true }),
  };
}

/** A store on its own connection to `file`; dispose closes the connection. */
export function openStore(file: string): { db: DatabaseSync; store: AdapterRunStore } & Disposable {
  const db = new DatabaseSync(file);
  const store = new AdapterRunStore(db);
  store.ensureSchema();
  return { db, store, [Symbol.dispose]: () => db.close() };
}

export const isReason = (reason: string): (e: unknown) => boolean => (e: unknown): boolean =>
  e instanceof AdapterError && e.reason === reason;

export const isCode = (code: string): (e: unknown) => boolean => (e: unknown): boolean =>
  e instanceof TermadaError && e.code === code;

export const SECRET = "Bearer s3cret-token";

/** http.request options for the ticket server: auth, verify, reconcile and undo by id or key. */
export function ticketOptions(url: string): HttpRequestOptions {
  return {
    baseUrl: url,
    headers: { Authorization: SECRET },
    verify: { path: "/tickets/{id}" },
    reconcile: { path: "/tickets/by-key/{key}" },
    compensate: { method: "DELETE", path: "/tickets/{id}" },
    timeoutMs: 5_000,
  };
}

export interface TicketServer extends AsyncDisposable {
  url: string;
  /** Tickets created (a repeated Idempotency-Key does not count). */
  creations(): number;
  /** Idempotency keys of the POSTs, in order, repeats included. */
  keys: string[];
  tickets: Map<string, unknown>;
}

/**
 * A real HTTP server on 127.0.0.1: tickets by id, created by POST /tickets (honouring
 * Idempotency-Key: the same key answers the same ticket), found by GET /tickets/:id and
 * GET /tickets/by-key/:key, removed by DELETE /tickets/:id. Every request needs SECRET.
 */
export function ticketServer(): TicketServer {
  const tickets = new Map<string, unknown>();
  const byKey = new Map<string, string>();
  const keys: string[] = [];
  let created = 0;
  const json = (status: number, body: unknown, headers: Record<string, string> = {}) =>
    new Response(JSON.stringify(body), {
      status,
      headers: { "content-type": "application/json", ...headers },
    });
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    const url = new URL(req.url);
    const body = req.body === null ? null : await req.text();
    if (req.headers.get("authorization") !== SECRET) return json(401, { error: "unauthorised" });
    const m = /^\/tickets(?:\/by-key\/([^/]+)|\/([^/]+))?$/.exec(url.pathname);
    if (m === null) return json(404, { error: "no route" });
    const [, key, id] = m;
    if (req.method === "POST" && key === undefined && id === undefined) {
      const k = req.headers.get("idempotency-key") ?? "";
      keys.push(k);
      let tid = byKey.get(k);
      if (tid === undefined) {
        tid = `t${++created}`;
        tickets.set(tid, { id: tid, ...(JSON.parse(body || "{}") as object) });
        if (k !== "") byKey.set(k, tid);
      }
      return json(201, tickets.get(tid), { location: `/tickets/${tid}` });
    }
    if (req.method === "GET" && key !== undefined) {
      const tid = byKey.get(decodeURIComponent(key));
      return tid !== undefined && tickets.has(tid)
        ? json(200, tickets.get(tid))
        : json(404, { error: "none" });
    }
    if (req.method === "GET" && id !== undefined) {
      return tickets.has(id) ? json(200, tickets.get(id)) : json(404, { error: "none" });
    }
    if (req.method === "DELETE" && id !== undefined) {
      return tickets.delete(id)
        ? new Response(null, { status: 204 })
        : json(404, { error: "none" });
    }
    if (req.method === "PUT" && id !== undefined) return json(422, { error: "read only" });
    return json(405, { error: "method" });
  });
  return {
    url: `http://127.0.0.1:${server.addr.port}`,
    creations: () => created,
    keys,
    tickets,
    [Symbol.asyncDispose]: () => server.shutdown(),
  };
}
