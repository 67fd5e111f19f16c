/**
 * The `http.request` adapter: one POST, PUT, PATCH or DELETE with a JSON body against a single
 * configured origin, sent with an `Idempotency-Key` header (the run's key, the same on every
 * retry), verified and reconciled with a GET.
 *
 * Secrets: `headers` (e.g. Authorization) live in the adapter's options only. Plans hold the
 * method, the path and the body the agent sent; receipts hold the status, the response's hash and
 * size, its Location (as a path, when on the origin) and its JSON `id`; never a request header.
 * Redirects are not followed (`redirect: "manual"`), so headers never go to another origin.
 *
 * Paths in the options may hold `{id}` (the receipt's id) and `{key}` (the idempotency key),
 * both percent-encoded when substituted.
 */
import { z } from "zod";
import {
  type Adapter,
  AdapterError,
  type Compensation,
  type JsonValue,
  type PhaseContext,
  type Prepared,
  type Reconciled,
  sha256Hex,
  utf8Bytes,
  type Verification,
} from "./sdk.ts";

export const HTTP_REQUEST_LIMITS = {
  /** The JSON body sent, UTF-8 bytes. */
  bodyBytes: 256 * 1024,
  /** A response body read; the rest is cut and the receipt says `truncated`. */
  responseBytes: 1024 * 1024,
  /** A path, with its query. */
  pathChars: 2048,
  /** A JSON `id` taken into the receipt. */
  idChars: 256,
  /** Default request timeout. */
  timeoutMs: 30_000,
} as const;

const L = HTTP_REQUEST_LIMITS;

function pathProblem(p: string): string | null {
  if (!p.startsWith("/")) return 'must start with "/"';
  if (p.startsWith("//")) return 'must not start with "//"';
  if (p.includes("\\")) return "must not contain a backslash";
  if (p.includes("#")) return "must not contain a fragment";
  // deno-lint-ignore no-control-regex
  if (/[\u0000-\u0020\u007f]/.test(p)) return "must not contain spaces or control characters";
  return null;
}

const RequestPath = z.string().min(1).max(L.pathChars).superRefine((p, ctx) => {
  const problem = pathProblem(p);
  if (problem !== null) ctx.addIssue({ code: "custom", message: problem });
});

export const HttpRequestInput = z.object({
  method: z.enum(["POST", "PUT", "PATCH", "DELETE"]),
  path: RequestPath,
  body: z.json().optional().refine(
    (b) => b === undefined || utf8Bytes(JSON.stringify(b)) <= L.bodyBytes,
    `must be at most ${L.bodyBytes} bytes as JSON`,
  ),
  /** A GET path that shows the change (overrides the options' verify path). */
  verify_path: RequestPath.optional(),
});
export type HttpRequestInput = z.output<typeof HttpRequestInput>;

export interface HttpRequestOptions {
  /** `http(s)://host[:port]`: the one origin requests may go to. */
  baseUrl: string;
  /** Sent with every request; never stored. */
  headers?: Record<string, string>;
  /** How to check a run: GET `path` (may hold `{id}`, `{key}`) expecting `status` (200). */
  verify?: { path?: string; status?: number };
  /** How to find a run after a crash, when the verify path needs an `{id}` (e.g. by `{key}`). */
  reconcile?: { path: string };
  /** How to undo a run; without it runs are not reversible. */
  compensate?: { method: "DELETE" | "POST"; path: string };
  timeoutMs?: number;
}

export type HttpRequestPlan = {
  method: "POST" | "PUT" | "PATCH" | "DELETE";
  /** Path and query, normalised, on the origin. */
  path: string;
  /** The exact body sent (JSON text), or null. */
  body: string | null;
  verify_path: string | null;
};

export type HttpRequestReceipt = {
  status: number;
  response_sha256: string;
  response_bytes: number;
  truncated: boolean;
  /** The Location header as a path, when it points at the origin. */
  location: string | null;
  /** The JSON response's `id`, when it has a string or number one. */
  id: string | number | null;
  /** `reconcile` when rebuilt from a lookup after a crash. */
  source: "execute" | "reconcile";
};

type Response1 = {
  status: number;
  bytes: Uint8Array;
  truncated: boolean;
  location: string | null;
};

/** Reads at most `max` bytes of the body, then cancels the rest. */
async function readBounded(
  res: Response,
  max: number,
): Promise<{ bytes: Uint8Array; truncated: boolean }> {
  if (res.body === null) return { bytes: new Uint8Array(0), truncated: false };
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  let truncated = false;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      const room = max - size;
      if (value.byteLength > room) {
        chunks.push(value.subarray(0, room));
        size = max;
        truncated = true;
        break;
      }
      chunks.push(value);
      size += value.byteLength;
    }
  } finally {
    if (truncated) await reader.cancel().catch(() => {/* already closed: nothing to release */});
    reader.releaseLock();
  }
  const bytes = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    bytes.set(c, at);
    at += c.byteLength;
  }
  return { bytes, truncated };
}

function jsonId(bytes: Uint8Array, truncated: boolean): string | number | null {
  if (truncated) return null;
  try {
    const v = JSON.parse(new TextDecoder().decode(bytes)) as unknown;
    if (typeof v === "object" && v !== null && "id" in v) {
      const id = (v as { id: unknown }).id;
      if (typeof id === "number" && Number.isFinite(id)) return id;
      if (typeof id === "string" && id.length > 0 && id.length <= L.idChars) return id;
    }
  } catch {
    // Not JSON: a receipt without an id.
  }
  return null;
}

/** Builds the adapter; throws TypeError for a bad `baseUrl` (a configuration mistake). */
export function httpRequestAdapter(
  options: HttpRequestOptions,
): Adapter<HttpRequestInput, HttpRequestPlan, HttpRequestReceipt> {
  const base = new URL(options.baseUrl);
  if (
    !["http:", "https:"].includes(base.protocol) || base.username !== "" || base.password !== "" ||
    (base.pathname !== "/" && base.pathname !== "") || base.search !== "" || base.hash !== ""
  ) {
    throw new TypeError(
      `http.request needs a baseUrl of the form http(s)://host[:port], not "${options.baseUrl}"`,
    );
  }
  const origin = base.origin;
  const timeoutMs = options.timeoutMs ?? L.timeoutMs;
  for (const p of [options.verify?.path, options.reconcile?.path, options.compensate?.path]) {
    if (p !== undefined && pathProblem(p) !== null) {
      throw new TypeError(`http.request option path "${p}" ${pathProblem(p)}`);
    }
  }

  /** The path on the origin, or ORIGIN_ESCAPE. */
  function onOrigin(path: string): string {
    const problem = pathProblem(path);
    if (problem !== null) {
      throw new AdapterError(
        "ORIGIN_ESCAPE",
        `Cannot request "${path.slice(0, 100)}": the path ${problem}`,
      );
    }
    const url = new URL(path, origin);
    if (url.origin !== origin) {
      throw new AdapterError(
        "ORIGIN_ESCAPE",
        `Cannot request "${path.slice(0, 100)}": it leaves ${origin}`,
      );
    }
    return url.pathname + url.search;
  }

  function fill(
    template: string,
    receipt: HttpRequestReceipt | undefined,
    key: string,
  ): string | null {
    if (template.includes("{id}") && (receipt === undefined || receipt.id === null)) return null;
    return onOrigin(
      template.replaceAll("{id}", encodeURIComponent(String(receipt?.id ?? "")))
        .replaceAll("{key}", encodeURIComponent(key)),
    );
  }

  async function send(
    method: string,
    path: string,
    body: string | null,
    extra: Record<string, string>,
    signal: AbortSignal,
  ): Promise<Response1> {
    const timeout = new AbortController();
    const timer = setTimeout(
      () => timeout.abort(new DOMException(`No answer in ${timeoutMs} ms`, "TimeoutError")),
      timeoutMs,
    );
    try {
      const headers = new Headers(options.headers);
      for (const [k, v] of Object.entries(extra)) headers.set(k, v);
      if (body !== null) headers.set("Content-Type", "application/json");
      const res = await fetch(new URL(path, origin), {
        method,
        headers,
        body,
        redirect: "manual",
        signal: AbortSignal.any([signal, timeout.signal]),
      });
      const { bytes, truncated } = await readBounded(res, L.responseBytes);
      let location: string | null = null;
      const loc = res.headers.get("location");
      if (loc !== null) {
        try {
          const u = new URL(loc, new URL(path, origin));
          if (u.origin === origin) location = u.pathname + u.search;
        } catch {
          // An unparsable Location: not kept.
        }
      }
      return { status: res.status, bytes, truncated, location };
    } catch (err) {
      throw new AdapterError(
        "UPSTREAM_UNREACHABLE",
        `Cannot ${method} ${path}: ${err instanceof Error ? err.message : String(err)}`,
        // The request may have reached the server: nobody can tell whether it landed.
        { cause: err, outcome: "unknown" },
      );
    } finally {
      clearTimeout(timer);
    }
  }

  async function toReceipt(
    r: Response1,
    source: HttpRequestReceipt["source"],
  ): Promise<HttpRequestReceipt> {
    return {
      status: r.status,
      response_sha256: await sha256Hex(r.bytes),
      response_bytes: r.bytes.byteLength,
      truncated: r.truncated,
      location: r.location,
      id: jsonId(r.bytes, r.truncated),
      source,
    };
  }

  /** The GET that shows the change, and the status it must answer; null: none can be built. */
  function check(plan: HttpRequestPlan, receipt: HttpRequestReceipt | undefined, key: string) {
    if (plan.verify_path !== null) {
      return { path: plan.verify_path, status: options.verify?.status ?? 200 };
    }
    if (options.verify?.path !== undefined) {
      const path = fill(options.verify.path, receipt, key);
      if (path !== null) return { path, status: options.verify.status ?? 200 };
    }
    if (receipt?.location) return { path: receipt.location, status: options.verify?.status ?? 200 };
    // A DELETE shows itself: the resource is gone.
    if (plan.method === "DELETE") return { path: plan.path, status: 404 };
    return null;
  }

  const adapter: Adapter<HttpRequestInput, HttpRequestPlan, HttpRequestReceipt> = {
    name: "http.request",
    input: HttpRequestInput,
    maxInputBytes: L.bodyBytes + 16 * 1024,

    // deno-lint-ignore require-await
    async prepare(input): Promise<Prepared<HttpRequestPlan>> {
      const path = onOrigin(input.path);
      const body = input.body === undefined ? null : JSON.stringify(input.body);
      const size = body === null ? "no body" : `${utf8Bytes(body)} bytes`;
      return {
        plan: {
          method: input.method,
          path,
          body,
          verify_path: input.verify_path === undefined ? null : onOrigin(input.verify_path),
        },
        // `METHOD URL` (no query): a policy can tell a DELETE from a POST
        // (`http.request:DELETE **`).
        resource: `${input.method} ${origin}${path.split("?")[0]}`,
        summary: `${input.method} ${path} (${size})`,
        risk: input.method === "DELETE" ? "high" : "medium",
        reversible: options.compensate !== undefined,
      };
    },

    async execute(plan, ctx): Promise<HttpRequestReceipt> {
      const r = await send(plan.method, onOrigin(plan.path), plan.body, {
        "Idempotency-Key": ctx.idempotencyKey,
        Accept: "application/json",
      }, ctx.signal);
      if (r.status < 200 || r.status > 299) {
        throw new AdapterError(
          "UPSTREAM_STATUS",
          `Cannot ${plan.method} ${plan.path}: the server answered ${r.status}`,
          {
            status: r.status,
            // A 5xx may have been applied before it failed; a 4xx (or a redirect) was not.
            outcome: r.status >= 500 ? "unknown" : "not_applied",
            retriable: r.status >= 500 || r.status === 429,
          },
        );
      }
      return await toReceipt(r, "execute");
    },

    async verify(plan, receipt, ctx): Promise<Verification> {
      const c = check(plan, receipt, ctx.idempotencyKey);
      if (c === null) {
        return { holds: false, observed: { reason: "no verify path, Location or id to check" } };
      }
      const r = await send("GET", c.path, null, { Accept: "application/json" }, ctx.signal);
      return {
        holds: r.status === c.status,
        observed: { path: c.path, status: r.status, expected: c.status },
      };
    },

    async reconcile(plan, ctx: PhaseContext): Promise<Reconciled<HttpRequestReceipt>> {
      const c = options.reconcile === undefined
        ? check(plan, undefined, ctx.idempotencyKey)
        : { path: fill(options.reconcile.path, undefined, ctx.idempotencyKey), status: 200 };
      if (c === null || c.path === null) {
        return { status: "unknown", detail: { reason: "no path to look the run up" } };
      }
      const r = await send("GET", c.path, null, { Accept: "application/json" }, ctx.signal);
      // Expecting 404 means checking an absence (a DELETE): then a 200 says "not yet".
      const applied = r.status === c.status;
      const notApplied = r.status === (c.status === 404 ? 200 : 404);
      if (applied) return { status: "applied", receipt: await toReceipt(r, "reconcile") };
      if (notApplied) return { status: "not_applied" };
      return { status: "unknown", detail: { path: c.path, status: r.status } };
    },
  };

  if (options.compensate !== undefined) {
    const undo = options.compensate;
    adapter.compensate = async (_plan, receipt, ctx): Promise<Compensation> => {
      if (receipt === undefined) {
        return { done: false, detail: { reason: "no receipt: nothing known to undo" } };
      }
      const path = fill(undo.path, receipt, ctx.idempotencyKey);
      if (path === null) return { done: false, detail: { reason: "the receipt has no id" } };
      const r = await send(undo.method, path, null, {
        "Idempotency-Key": `${ctx.idempotencyKey}.undo`,
        Accept: "application/json",
      }, ctx.signal);
      // 404: already gone, which is what the undo wanted.
      const done = (r.status >= 200 && r.status <= 299) || r.status === 404;
      return { done, detail: { method: undo.method, path, status: r.status } as JsonValue };
    };
  }
  return adapter;
}
