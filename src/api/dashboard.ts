/**
 * The dashboard's static files: `GET /` (index.html) and `GET /dashboard/app.js|app.css` (the
 * committed bundle, see scripts/bundle_dashboard.ts). They are public — the page holds no data;
 * everything it shows comes from the token-protected `/api` — and served with a strict CSP (no
 * inline script or style), no framing, no sniffing and no referrer (the first URL carries the
 * token until the page removes it). Files are read once, when the routes are built.
 */
import { Hono } from "hono";
import type { Context } from "hono";
import type { AppEnv } from "./http.ts";

const DIR = new URL("../../dashboard/", import.meta.url);

export const DASHBOARD_CSP = "default-src 'self'; script-src 'self'; style-src 'self'; " +
  "connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; " +
  "form-action 'none'; object-src 'none'";

export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  "content-security-policy": DASHBOARD_CSP,
  "x-frame-options": "DENY",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "cross-origin-opener-policy": "same-origin",
  "cross-origin-resource-policy": "same-origin",
};

interface Asset {
  body: Uint8Array;
  type: string;
  etag: string;
}

export interface DashboardFiles {
  "index.html": Uint8Array;
  "app.js": Uint8Array;
  "app.css": Uint8Array;
}

/** Reads the page and the bundle from `dashboard/` next to the sources (once). */
export function readDashboardFiles(dir: URL = DIR): DashboardFiles | undefined {
  try {
    return {
      "index.html": Deno.readFileSync(new URL("index.html", dir)),
      "app.js": Deno.readFileSync(new URL("dist/app.js", dir)),
      "app.css": Deno.readFileSync(new URL("dist/app.css", dir)),
    };
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return undefined;
    throw err;
  }
}

function asset(body: Uint8Array, type: string): Asset {
  // FNV-1a 32 + length: enough to tell builds apart for revalidation (not a security check).
  let h = 0x811c9dc5;
  for (let i = 0; i < body.length; i++) h = Math.imul(h ^ body[i]!, 0x01000193) >>> 0;
  return { body, type, etag: `"${h.toString(16)}-${body.length.toString(16)}"` };
}

/**
 * Routes for `/`, `/index.html` and `/dashboard/*`, from `given` (tests) or `dashboard/` (read
 * now, once). Without the files (`null`: a build without the bundle) `/` says how to build it.
 */
export function dashboardRoutes(
  given?: DashboardFiles | null,
): Hono<AppEnv> {
  const files = given === undefined ? readDashboardFiles() : given;
  const app = new Hono<AppEnv>();
  const send = (c: Context<AppEnv>, a: Asset, cache: string): Response => {
    const headers = new Headers({
      ...SECURITY_HEADERS,
      "content-type": a.type,
      "cache-control": cache,
      etag: a.etag,
    });
    if (c.req.header("if-none-match") === a.etag) {
      return new Response(null, { status: 304, headers });
    }
    return new Response(c.req.method === "HEAD" ? null : a.body as BodyInit, { headers });
  };
  if (!files) {
    app.get("/", (c) => {
      const r = c.text(
        "The dashboard bundle is missing from this build: run `deno task bundle`.\n",
        503,
      );
      for (const [k, v] of Object.entries(SECURITY_HEADERS)) r.headers.set(k, v);
      return r;
    });
    return app;
  }
  const page = asset(files["index.html"], "text/html; charset=utf-8");
  const byName = new Map<string, Asset>([
    ["app.js", asset(files["app.js"], "text/javascript; charset=utf-8")],
    ["app.css", asset(files["app.css"], "text/css; charset=utf-8")],
  ]);
  // The page is small and must always be fresh (it names the bundle); the bundle revalidates.
  app.get("/", (c) => send(c, page, "no-store"));
  app.get("/index.html", (c) => send(c, page, "no-store"));
  app.get("/dashboard/:file", (c) => {
    const a = byName.get(c.req.param("file"));
    if (!a) return c.notFound();
    return send(c, a, "no-cache");
  });
  return app;
}
