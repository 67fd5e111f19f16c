import assert from "node:assert/strict";
import { fixture, parsed } from "./_testing.ts";

Deno.test("curl -sIL (real, Deno.serve redirect chain) gives one response per hop", () => {
  const { parsed: p, warnings } = parsed(
    "http_responses",
    ["curl", "-sIL", "http://127.0.0.1:1/a"],
    fixture("curl_sIL_redirects.txt"),
  );
  assert.equal(warnings, undefined);
  assert.deepEqual(p.responses.map((r) => r.status_code), [301, 302, 200]);
  const [first, , last] = p.responses;
  assert.deepEqual([first!.http_version, first!.reason, first!.header_map.location], [
    "1.1",
    "Moved Permanently",
    "/b",
  ]);
  assert.deepEqual(last!.headers.slice(0, 2), [["cache-control", "no-cache"], [
    "content-type",
    "text/html; charset=utf-8",
  ]]);
  assert.equal(last!.header_map["set-cookie"], "s=abc; HttpOnly\nt=def");
});

Deno.test("curl -sI (real): 200, 404, HTTP/1.0", () => {
  assert.equal(
    parsed("http_responses", ["curl -sI x"], fixture("curl_sI.txt")).parsed.responses[0]!
      .status_code,
    200,
  );
  const nf = parsed("http_responses", ["curl -sI x"], fixture("curl_sI_404.txt")).parsed
    .responses[0]!;
  assert.deepEqual([nf.status_code, nf.reason], [404, "Not Found"]);
  assert.equal(
    parsed("http_responses", ["curl -sI x"], fixture("curl_sI_http10.txt")).parsed.responses[0]!
      .http_version,
    "1.0",
  );
});

Deno.test("HTTP/2 heads (hand-made): no reason phrase, proxy CONNECT reply, folded and repeated headers", () => {
  const { parsed: p } = parsed(
    "http_responses",
    ["curl -sIL https://example.com"],
    fixture("curl_sI_http2.handmade.txt"),
  );
  assert.deepEqual(p.responses.map((r) => [r.http_version, r.status_code, r.reason]), [
    ["1.1", 200, "Connection established"],
    ["2", 301, undefined],
    ["2", 200, undefined],
  ]);
  const last = p.responses[2]!;
  assert.equal(last.header_map.vary, "Accept-Encoding, Origin");
  assert.equal(last.header_map["x-long-header"], "part one continued part two");
});

Deno.test("a body after the heads (curl -si, explicit parser) is a warning, not headers", () => {
  const r = parsed("http_responses", ["curl -si x"], fixture("curl_si_body.txt"), "http_headers");
  assert.equal(r.parsed.responses.length, 1);
  assert.match(r.warnings![0]!.message, /after the last header block/);
});
