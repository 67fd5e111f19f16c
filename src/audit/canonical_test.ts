import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { TermadaError } from "../shared/mod.ts";
import { canonicalJson } from "./canonical.ts";
import { GENESIS, recordHash, recordLine } from "./record.ts";

Deno.test("canonical JSON sorts keys at every level and keeps array order", () => {
  const value = { b: 1, a: { z: [3, { y: true, x: null }], c: "s" }, "": 0 };
  assert.equal(canonicalJson(value), '{"":0,"a":{"c":"s","z":[3,{"x":null,"y":true}]},"b":1}');
});

Deno.test("canonical JSON orders keys by UTF-16 code units and escapes like JSON.stringify", () => {
  // "é" (U+00E9) sorts before "😀" (D83D DE00) and after "z"; capitals before lower case.
  const value = { "😀": 1, "é": 2, z: 3, Z: 4, line: 'a\nb\u0001"\\', lone: "\ud800" };
  assert.equal(
    canonicalJson(value),
    '{"Z":4,"line":"a\\nb\\u0001\\"\\\\","lone":"\\ud800","z":3,"é":2,"😀":1}',
  );
});

Deno.test("canonical JSON writes numbers as ECMAScript does (RFC 8785)", () => {
  assert.equal(
    canonicalJson({ n: [-0, 1e21, 1e-7, 0.1, 100, 2 ** 53 + 2] }),
    '{"n":[0,1e+21,1e-7,0.1,100,9007199254740994]}',
  );
});

Deno.test("canonical JSON leaves out undefined properties and a __proto__ key is data", () => {
  const value = JSON.parse('{"__proto__":{"x":1},"a":1}');
  assert.equal(canonicalJson({ ...value, gone: undefined }), '{"__proto__":{"x":1},"a":1}');
});

Deno.test("canonical JSON refuses values that are not plain JSON", async (t) => {
  const bad: [string, unknown][] = [
    ["NaN", { n: NaN }],
    ["Infinity", { n: Infinity }],
    ["bigint", { n: 1n }],
    ["function", { f: () => 1 }],
    ["symbol", { s: Symbol("x") }],
    ["Date", { d: new Date(0) }],
    ["Map", { m: new Map() }],
    ["undefined in an array", { a: [1, undefined] }],
  ];
  for (const [name, value] of bad) {
    await t.step(name, () => assert.throws(() => canonicalJson(value), TypeError));
  }
  await t.step("a cycle stops at the depth limit", () => {
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    assert.throws(
      () => canonicalJson(cyclic),
      (e) => e instanceof TermadaError && e.code === "INVALID_ARGUMENT",
    );
  });
});

Deno.test("canonical JSON redacts string values, never keys", () => {
  const redact = (s: string) => s.replaceAll("hunter2", "[REDACTED]");
  assert.equal(
    canonicalJson({ hunter2: ["pw hunter2", { k: "hunter2" }], n: 1 }, redact),
    '{"hunter2":["pw [REDACTED]",{"k":"[REDACTED]"}],"n":1}',
  );
});

Deno.test("the record hash is sha256 of prev, a newline and the canonical body", () => {
  const parts = {
    seq: 1,
    time: "2025-01-01T00:00:01.000Z",
    actor: { kind: "agent" as const, id: "a1" },
    event: "job.started",
    dataJson: canonicalJson({ command: ["ls"], cwd: "/tmp" }),
  };
  // The documented definition, computed independently of record.ts.
  const body = JSON.stringify({
    actor: { id: "a1", kind: "agent" },
    data: { command: ["ls"], cwd: "/tmp" },
    event: "job.started",
    seq: 1,
    time: "2025-01-01T00:00:01.000Z",
  });
  const expected = createHash("sha256").update(`${GENESIS}\n${body}`).digest("hex");
  assert.equal(recordHash(GENESIS, parts), expected);
  assert.equal(
    recordLine(parts, GENESIS, expected),
    `{"seq":1,"time":"2025-01-01T00:00:01.000Z","actor":{"id":"a1","kind":"agent"},` +
      `"event":"job.started","data":{"command":["ls"],"cwd":"/tmp"},"prev":"${GENESIS}",` +
      `"hash":"${expected}"}`,
  );
});
