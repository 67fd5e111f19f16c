/** Test helpers of this folder: fixtures, and a parse that must succeed and match its schema. */
import assert from "node:assert/strict";
import { parseOutput } from "./registry.ts";
import { ParsedOutput, type ParseFailed, ParseResult, type ParseWarning } from "./schema.ts";

/** A fixture's text (src/parse/fixtures/NAME). */
export function fixture(name: string): string {
  return Deno.readTextFileSync(new URL(`./fixtures/${name}`, import.meta.url));
}

/** The `now` the fixtures were made at (ls dates without a year resolve against it). */
export const FIXTURE_NOW = new Date("2026-12-02T00:40:00Z");

/** A successful parse of `output` by `parser` (or auto), checked against the result schemas. */
export function parsed<K extends ParsedOutput["kind"]>(
  kind: K,
  argv: readonly string[],
  output: string,
  parser = "auto",
): { parser: string; parsed: Extract<ParsedOutput, { kind: K }>; warnings?: ParseWarning[] } {
  const r = parseOutput(parser, argv, output, { now: FIXTURE_NOW });
  assert.ok("parsed" in r, `expected a result, got ${JSON.stringify(r).slice(0, 500)}`);
  const check = ParseResult.safeParse(r);
  assert.ok(
    check.success,
    `result does not match its schema: ${check.error?.message.slice(0, 1500)}`,
  );
  assert.equal(r.parsed.kind, kind);
  return r as never;
}

/** A failed parse: its error. */
export function failed(parser: string, argv: readonly string[], output: string): ParseFailed {
  const r = parseOutput(parser, argv, output, { now: FIXTURE_NOW });
  assert.ok("parse_error" in r, `expected parse_error, got ${JSON.stringify(r).slice(0, 300)}`);
  assert.ok(ParseResult.safeParse(r).success, "a parse_error matches the result schema");
  return r as ParseFailed;
}
