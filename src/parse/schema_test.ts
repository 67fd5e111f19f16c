import assert from "node:assert/strict";
import { z } from "zod";
import { PARSERS } from "./registry.ts";
import { jsonSchemaOf, ParseResult } from "./schema.ts";

type Json = Record<string, unknown>;

/** Every subschema of `node` with its JSON pointer. */
function* walk(node: unknown, path = "#"): Generator<[string, Json]> {
  if (node === null || typeof node !== "object") return;
  if (Array.isArray(node)) {
    for (let i = 0; i < node.length; i++) yield* walk(node[i], `${path}/${i}`);
    return;
  }
  yield [path, node as Json];
  for (const [k, v] of Object.entries(node as Json)) {
    if (k === "properties" || k === "$defs") {
      for (const [name, s] of Object.entries(v as Json)) yield* walk(s, `${path}/${k}/${name}`);
    } else if (typeof v === "object") yield* walk(v, `${path}/${k}`);
  }
}

Deno.test("result JSON Schemas are portable: strict objects, bounded arrays and strings, no type arrays", () => {
  const schemas: [string, Json][] = [
    ...PARSERS.map((p) => [p.name, p.result_schema] as [string, Json]),
    ["ParseResult", jsonSchemaOf(ParseResult)],
  ];
  for (const [name, schema] of schemas) {
    assert.equal(schema.$schema, "https://json-schema.org/draft/2020-12/schema");
    for (const [path, s] of walk(schema)) {
      const where = `${name} ${path}`;
      assert.ok(!Array.isArray(s.type), `${where}: a type array`);
      if (s.type === "object" && s.properties !== undefined) {
        assert.equal(s.additionalProperties, false, `${where}: additionalProperties`);
      }
      if (s.type === "object" && s.properties === undefined) {
        // records: bounded keys and typed values
        assert.equal(
          typeof s.additionalProperties,
          "object",
          `${where}: a record has typed values`,
        );
      }
      if (s.type === "array") assert.equal(typeof s.maxItems, "number", `${where}: maxItems`);
      if (s.type === "string" && s.const === undefined && s.enum === undefined) {
        assert.equal(typeof s.maxLength, "number", `${where}: maxLength`);
      }
      assert.ok(!("nullable" in s) && s.type !== "null", `${where}: null`);
    }
  }
});

Deno.test("the envelope schema accepts both outcomes and refuses extra keys", () => {
  assert.ok(ParseResult.safeParse({ parse_error: { message: "x" } }).success);
  assert.ok(!ParseResult.safeParse({ parse_error: { message: "x" }, other: 1 }).success);
  assert.ok(
    ParseResult.safeParse({
      parser: "git_log",
      parsed: { kind: "git_log", commits: [{ hash: "abcd", subject: "s" }] },
      warnings: [{ message: "w", lines: [1], count: 1 }],
    }).success,
  );
  assert.ok(!ParseResult.safeParse({ parser: "git_log", parsed: { kind: "nope" } }).success);
  assert.ok(z.toJSONSchema(ParseResult) !== undefined);
});
