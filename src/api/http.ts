/**
 * The HTTP edge's small pieces, each once: the status table and error body (handlers throw a
 * TermadaError; the app's one `onError` turns it into a response), bounded JSON bodies parsed
 * with a wire schema, the operator identity header, and the loopback/Bearer guards.
 */
import type { Context, MiddlewareHandler } from "hono";
import type { z } from "zod";
import type { Actor, OperatorAuth } from "../control/mod.ts";
import {
  bearerToken,
  type ErrorCode,
  sameSecret,
  TermadaError,
  toTermadaError,
} from "../shared/mod.ts";
import { parseInput } from "../wire/mod.ts";

export type Listener = "unix" | "tcp";
export type AppEnv = {
  Bindings: { listener: Listener };
  Variables: { operatorAuth?: OperatorAuth };
};

/**
 * How operators prove who they are: the static operator token (the CLI's and the dashboard's;
 * one principal, `operator`, with `roles`), or an operator JWT (`security.operator_jwt`):
 * its subject, tenant, roles, `amr` and delegation.
 */
export interface OperatorCredentials {
  token: string;
  /** Roles the static token holds (`security.operator_token_roles`). */
  roles?: readonly string[];
  /** Verifies an operator JWT; throws (with a reason) to refuse it. */
  jwt?: (token: string) => Promise<OperatorAuth>;
  /** A refused operator credential (audited by the daemon). */
  refused?: (reason: string) => void;
}

/** The static token's identity: one principal whatever name the client gives itself. */
export const TOKEN_PRINCIPAL = "operator";

type Status = 400 | 401 | 403 | 404 | 409 | 413 | 423 | 429 | 500 | 501 | 502 | 503;

/** One status per error code (anything unlisted is 500). */
const STATUS: Partial<Record<ErrorCode | "UNAUTHORIZED" | "FORBIDDEN", Status>> = {
  INVALID_ARGUMENT: 400,
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  SESSION_BUSY: 409,
  NOT_AWAITING_INPUT: 409,
  STOPPED: 409,
  DENIED_BY_POLICY: 403,
  QUOTA_EXCEEDED: 429,
  NOT_SUPPORTED: 501,
  SERVER_UNREACHABLE: 502,
  PLUGIN_UNAVAILABLE: 503,
  CONFLICT: 409,
  UPSTREAM_FAILED: 502,
  PLUGIN_BAD_RESULT: 502,
  PLUGIN_TIMEOUT: 502, // no 504 in the status type: the gateway-timeout meaning is in the code
  AUDIT_UNAVAILABLE: 503,
  VAULT_LOCKED: 423,
  BUDGET_EXCEEDED: 429,
  BLOCKED_AT_EXEC: 403,
  APPROVAL_REQUIRED: 409,
};

/** An error body `{error: {code, message, retriable, hint?}}` with its status. */
export function problem(
  c: Context<AppEnv>,
  status: Status,
  code: string,
  message: string,
  hint?: string,
): Response {
  return c.json({ error: { code, message, retriable: false, ...(hint ? { hint } : {}) } }, status);
}

/** The one mapper from a thrown error to a response (the app's onError). */
export function errorResponse(c: Context<AppEnv>, err: unknown): Response {
  const e = toTermadaError(err);
  return c.json({ error: e.toJSON() }, STATUS[e.code] ?? 500);
}

/** Largest JSON body an operator route reads. */
export const MAX_OPERATOR_BODY = 64 * 1024;

/** The request's JSON body (empty = `{}`), bounded and parsed with `schema`. */
export async function body<S extends z.ZodType>(
  c: Context<AppEnv>,
  schema: S,
): Promise<z.output<S>> {
  const text = await c.req.text();
  if (text.length > MAX_OPERATOR_BODY) {
    throw new TermadaError("INVALID_ARGUMENT", "Body over 64 KiB");
  }
  let value: unknown = {};
  if (text.trim() !== "") {
    try {
      value = JSON.parse(text);
    } catch {
      throw new TermadaError("INVALID_ARGUMENT", "Body must be a JSON object");
    }
  }
  if (!value || typeof value !== "object" || Array.isArray(value)) {
    throw new TermadaError("INVALID_ARGUMENT", "Body must be a JSON object");
  }
  return parseInput(schema, value);
}

/** The query string parsed with `schema` (empty values count as absent). */
export function query<S extends z.ZodType>(c: Context<AppEnv>, schema: S): z.output<S> {
  const raw = c.req.query();
  const q: Record<string, string> = {};
  for (const [k, v] of Object.entries(raw)) if (v !== "") q[k] = v;
  return parseInput(schema, q);
}

/**
 * Who the operator is: an operator JWT's subject; with the static token, the name the dashboard
 * or CLI gives (shown in records) — but approvals count the token as one principal.
 */
export function operatorOf(c: Context<AppEnv>): Actor {
  const auth = c.get("operatorAuth");
  if (auth?.via === "jwt") return { kind: "operator", id: auth.principal.slice(0, 256), auth };
  const raw = c.req.header("x-termada-operator") ?? "operator";
  const id = raw.toLowerCase().replace(/[^a-z0-9_.@-]+/g, "-").slice(0, 64) || "operator";
  return {
    kind: "operator",
    id,
    auth: auth ?? { via: "token", principal: TOKEN_PRINCIPAL, roles: [], amr: [] },
  };
}

/** On TCP the Host and Origin must be this loopback listener (DNS rebinding, CSRF). */
export function loopbackOnly(port: number): MiddlewareHandler<AppEnv> {
  const hosts = new Set([`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`]);
  return async (c, next): Promise<Response | void> => {
    if (c.env?.listener === "tcp") {
      const host = c.req.header("host") ?? "";
      if (!hosts.has(host)) return problem(c, 403, "FORBIDDEN", `Host "${host}" is not allowed`);
      const origin = c.req.header("origin");
      if (origin !== undefined && !hosts.has(origin.replace(/^http:\/\//, ""))) {
        return problem(c, 403, "FORBIDDEN", `Origin "${origin}" is not allowed`);
      }
    }
    await next();
  };
}

/** The request carries `Authorization: Bearer <token>` for exactly this token. */
export function hasToken(c: Context<AppEnv>, token: string): boolean {
  const t = bearerToken(c.req.header("authorization"));
  return t !== undefined && sameSecret(t, token);
}

/** Refuses (401) what carries neither the operator token nor a valid operator JWT. */
export function operatorGuard(
  creds: OperatorCredentials | string,
  what: string,
): MiddlewareHandler<AppEnv> {
  const o: OperatorCredentials = typeof creds === "string" ? { token: creds } : creds;
  return async (c, next): Promise<Response | void> => {
    const presented = bearerToken(c.req.header("authorization"));
    if (presented !== undefined && sameSecret(presented, o.token)) {
      c.set("operatorAuth", {
        via: "token",
        principal: TOKEN_PRINCIPAL,
        roles: [...(o.roles ?? [])],
        amr: [],
      });
      return await next();
    }
    if (presented !== undefined && o.jwt && presented.split(".").length === 3) {
      try {
        c.set("operatorAuth", await o.jwt(presented));
        return await next();
      } catch (err) {
        const reason = (err as { reason?: string }).reason ?? "invalid";
        o.refused?.(`operator JWT refused (${reason})`);
        return problem(c, 401, "UNAUTHORIZED", `${what}: the operator JWT was refused (${reason})`);
      }
    }
    if (presented !== undefined) o.refused?.("unknown operator credential");
    return problem(
      c,
      401,
      "UNAUTHORIZED",
      `${what} need the operator token or an operator JWT`,
      "termada CLI commands send it for you (it lives in the state directory)",
    );
  };
}
