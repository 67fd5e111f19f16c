import assert from "node:assert/strict";
import { DASHBOARD_CSP, dashboardRoutes, readDashboardFiles } from "./dashboard.ts";
import { SseParser } from "../../dashboard/sse.ts";
import { OPERATOR_TOKEN, operatorTestApp } from "./_test_app.ts";

const enc = new TextEncoder();
const FILES = {
  "index.html": enc.encode("<!doctype html><title>Termada</title>"),
  "app.js": enc.encode("console.log(1)"),
  "app.css": enc.encode("body{}"),
};

function fetchIt(path: string, init: RequestInit = {}): Promise<Response> {
  return Promise.resolve(
    dashboardRoutes(FILES).fetch(new Request(`http://127.0.0.1${path}`, init), {
      listener: "tcp",
    }),
  );
}

function assertSecurityHeaders(res: Response): void {
  assert.equal(res.headers.get("content-security-policy"), DASHBOARD_CSP);
  assert.match(DASHBOARD_CSP, /script-src 'self';/);
  assert.doesNotMatch(DASHBOARD_CSP, /unsafe-inline|unsafe-eval/);
  assert.match(DASHBOARD_CSP, /frame-ancestors 'none'/);
  assert.equal(res.headers.get("x-frame-options"), "DENY");
  assert.equal(res.headers.get("x-content-type-options"), "nosniff");
  assert.equal(res.headers.get("referrer-policy"), "no-referrer");
}

Deno.test("dashboard: the page and the bundle are public, typed and locked down", async () => {
  for (
    const [path, type, body] of [
      ["/", /^text\/html; charset=utf-8$/, "<!doctype html><title>Termada</title>"],
      ["/?token=abc", /^text\/html/, "<!doctype html><title>Termada</title>"],
      ["/index.html", /^text\/html/, "<!doctype html><title>Termada</title>"],
      ["/dashboard/app.js", /^text\/javascript/, "console.log(1)"],
      ["/dashboard/app.css", /^text\/css/, "body{}"],
    ] as const
  ) {
    const res = await fetchIt(path);
    assert.equal(res.status, 200, path);
    assert.match(res.headers.get("content-type") ?? "", type, path);
    assertSecurityHeaders(res);
    assert.equal(await res.text(), body, path);
  }
  const page = await fetchIt("/");
  assert.equal(page.headers.get("cache-control"), "no-store");
  await page.body?.cancel();
});

Deno.test("dashboard: unknown files are 404; ETags revalidate with 304", async () => {
  for (const path of ["/dashboard/nope.js", "/dashboard/../deno.json", "/dashboard/", "/x"]) {
    const res = await fetchIt(path);
    assert.equal(res.status, 404, path);
    await res.body?.cancel();
  }
  const first = await fetchIt("/dashboard/app.js");
  const etag = first.headers.get("etag");
  assert.ok(etag);
  await first.body?.cancel();
  const again = await fetchIt("/dashboard/app.js", { headers: { "if-none-match": etag } });
  assert.equal(again.status, 304);
  assertSecurityHeaders(again);
  assert.equal(await again.text(), "");
});

Deno.test("dashboard: without a bundle, / says how to build it", async () => {
  const res = await dashboardRoutes(null).fetch(new Request("http://127.0.0.1/"));
  assert.equal(res.status, 503);
  assert.match(await res.text(), /deno task bundle/);
  assertSecurityHeaders(res);
});

Deno.test("dashboard: the committed bundle is present and the page loads only it", () => {
  const files = readDashboardFiles();
  assert.ok(files, "dashboard/dist is missing: run `deno task bundle`");
  const html = new TextDecoder().decode(files["index.html"]);
  assert.match(html, /<script type="module" src="\/dashboard\/app\.js"><\/script>/);
  assert.match(html, /<link rel="stylesheet" href="\/dashboard\/app\.css">/);
  // No inline script or style (the CSP would refuse them).
  assert.doesNotMatch(html, /<script(?![^>]*\bsrc=)[^>]*>/);
  assert.doesNotMatch(html, /<style|\sstyle=/);
  assert.ok(files["app.js"].length > 10_000);
});

Deno.test("dashboard: the SSE parser handles split chunks, comments, ids and CRLF", () => {
  const p = new SseParser();
  assert.deepEqual(p.feed(": keep-alive\n\nid: 5\nevent: da"), []);
  assert.deepEqual(p.feed("ta\ndata: aGk=\n\n"), [{ id: "5", event: "data", data: "aGk=" }]);
  assert.deepEqual(p.feed("data: a\r\ndata: b\r\n\r\nevent: end\ndata: {}\n\n"), [
    { event: "message", data: "a\nb" },
    { event: "end", data: "{}" },
  ]);
});

Deno.test("dashboard in the daemon app: / is public, /api still needs the operator token", async () => {
  const TOKEN = OPERATOR_TOKEN;
  await using h = await operatorTestApp({
    busCapacity: 100,
    devMode: false,
    dashboardFiles: FILES,
  });
  const a = h.app;
  try {
    const get = (path: string, headers: Record<string, string> = {}) =>
      a.app.fetch(
        new Request(`http://127.0.0.1:7717${path}`, {
          headers: { host: "127.0.0.1:7717", ...headers },
        }),
        { listener: "tcp" },
      );
    const page = await get(`/?token=${TOKEN}`);
    assert.equal(page.status, 200);
    assertSecurityHeaders(page);
    assert.equal(await page.text(), "<!doctype html><title>Termada</title>");
    const js = await get("/dashboard/app.js");
    assert.equal(js.status, 200);
    await js.body?.cancel();
    // The loopback guard still applies to the page (DNS rebinding).
    const rebound = await get("/", { host: "evil.example:7717" });
    assert.equal(rebound.status, 403);
    await rebound.body?.cancel();
    const anon = await get("/api/sessions");
    assert.equal(anon.status, 401);
    await anon.body?.cancel();
    const ok = await get("/api/sessions", { authorization: `Bearer ${TOKEN}` });
    assert.equal(ok.status, 200);
    assert.deepEqual(await ok.json(), { sessions: [] });
    const missing = await get("/nope");
    assert.equal(missing.status, 404);
    assert.equal((await missing.json()).error.code, "NOT_FOUND");
  } finally {
    await a.close(); // h closes the gateway and the engine
  }
});
