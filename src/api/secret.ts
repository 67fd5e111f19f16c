/**
 * The one-time answer pages of exec_write {human} (`/secret/<token>`): a person types a
 * password for an agent's job; it goes to the program and the redactor, never to the agent.
 * The 256-bit token in the path is the capability (no operator token: the person may not be an
 * operator); the page is single-use and expires (src/control/human_input.ts). On TCP the
 * loopback guard checks Host and Origin like every route, so another site cannot post to it.
 */
import { Hono } from "hono";
import type { AgentOps } from "../control/mod.ts";
import { toTermadaError } from "../shared/mod.ts";
import type { AppEnv } from "./http.ts";

/** A form post larger than this is refused before it is read. */
const MAX_BODY_BYTES = 16 * 1024;

const HEADERS = {
  "content-type": "text/html; charset=utf-8",
  "cache-control": "no-store",
  // The token is in the URL: never sent on as a referrer, never framed.
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
  "content-security-policy":
    "default-src 'none'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
};

const escape = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function page(title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${
    escape(title)
  }</title></head><body><h1>${escape(title)}</h1>${body}</body></html>`;
}

export function secretRoutes(agents: AgentOps): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  app.get("/secret/:token", (c) => {
    try {
      const r = agents.humanRequest(c.req.param("token"));
      return c.body(
        page(
          "Termada: a program asks for your answer",
          `<p>${escape(r.message)}</p><p>Command: <code>${escape(r.command.join(" "))}</code></p>` +
            `<form method="post"><label>Answer <input type="password" name="value" ` +
            `autocomplete="off" autofocus required maxlength="4096"></label> ` +
            `<button type="submit">Send</button></form>` +
            `<p>It is typed into the program once; the agent never sees it. This page expires at ${
              escape(new Date(r.expiresAt).toISOString())
            }.</p>`,
        ),
        200,
        HEADERS,
      );
    } catch (err) {
      return c.body(page("Termada", `<p>${escape(toTermadaError(err).message)}</p>`), 404, HEADERS);
    }
  });
  app.post("/secret/:token", async (c) => {
    const length = Number(c.req.header("content-length") ?? "0");
    if (!Number.isFinite(length) || length > MAX_BODY_BYTES) {
      return c.body(page("Termada", "<p>That answer is too long.</p>"), 413, HEADERS);
    }
    try {
      const form = await c.req.parseBody();
      const value = typeof form.value === "string" ? form.value : "";
      await agents.submitHuman(c.req.param("token"), value);
      return c.body(
        page("Termada", "<p>Sent to the program. You can close this page.</p>"),
        200,
        HEADERS,
      );
    } catch (err) {
      const e = toTermadaError(err);
      const status = e.code === "NOT_FOUND" ? 404 : e.code === "INVALID_ARGUMENT" ? 400 : 409;
      return c.body(page("Termada", `<p>${escape(e.message)}</p>`), status, HEADERS);
    }
  });
  return app;
}
