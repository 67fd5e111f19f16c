/** The operator API client of the dashboard: one fetch helper for every view. */
import type { ToolError } from "../src/wire/mod.ts";

/** The daemon's error body (`{error: {code, message, hint?, details?}}`). */
export type ApiErrorBody = ToolError["error"];

/**
 * A failed API call, with its HTTP status (404 tells a view the route does not exist) and the
 * daemon's error body when it sent one (its `code`, `hint` and `details`).
 */
export class HttpError extends Error {
  constructor(readonly status: number, message: string, readonly body?: ApiErrorBody) {
    super(message);
  }
}

/**
 * A JSON request to the daemon's operator API: the token goes in a header (never in a URL),
 * and every action is attributed to the dashboard in the audit log.
 */
export async function api<T>(token: string, path: string, init: RequestInit = {}): Promise<T> {
  const res = await fetch(path, {
    ...init,
    headers: {
      authorization: `Bearer ${token}`,
      "content-type": "application/json",
      "x-termada-operator": "dashboard",
      ...(init.headers ?? {}),
    },
    cache: "no-store",
  });
  const body = await res.json().catch(() => ({}));
  if (!res.ok) {
    const e = (body as Partial<ToolError>).error;
    throw new HttpError(res.status, e?.message ?? `HTTP ${res.status}`, e);
  }
  return body as T;
}
