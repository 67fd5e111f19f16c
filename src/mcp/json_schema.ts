/**
 * JSON Schema that every client and model provider reads the same way. zod's output is legal
 * JSON Schema, but two of its spellings are not portable: a `type` array for nullable fields
 * (some providers map tool schemas onto a single-`type` dialect) and `{}` (a schema with no
 * validation keyword) for free-form values. Here the first becomes `anyOf` branches with one
 * `type` each, a free-form object's `additionalProperties: {}` becomes the explicit `true`, and a
 * tuple's bare `items: false` becomes `maxItems` (the same contract).
 * Anything else left without a validation keyword is a bug in a wire schema: it throws, so the
 * tests catch it before a client does.
 */

type Json = Record<string, unknown>;

/** Keywords that constrain a value (a schema with none of these accepts anything). */
const VALIDATION = new Set([
  "type",
  "enum",
  "const",
  "anyOf",
  "oneOf",
  "allOf",
  "not",
  "$ref",
  "properties",
  "items",
  "pattern",
  "format",
]);

/** Keywords whose value is one subschema. */
const ONE = ["items", "not", "additionalProperties", "propertyNames", "contains"];
/** Keywords whose value is a list of subschemas. */
const MANY = ["anyOf", "oneOf", "allOf", "prefixItems"];
/** Keywords whose value maps names to subschemas. */
const MAP = ["properties", "$defs", "definitions", "patternProperties"];

/** A portable copy of `schema` (the input is not changed). Throws on an unconstrained subschema. */
export function portableSchema(schema: Json): Json {
  return walk(schema, "#");
}

function walk(node: Json, path: string): Json {
  let out: Json = { ...node };
  // A tuple (`prefixItems` + `items: false`): a bare `false` is not portable; the same contract
  // is "exactly these items", said with maxItems.
  if (Array.isArray(out.prefixItems) && out.items === false) {
    delete out.items;
    out.maxItems = Math.min(out.maxItems as number ?? Infinity, out.prefixItems.length);
    out.minItems ??= out.prefixItems.length;
  }
  for (const k of ONE) {
    const v = out[k];
    if (v === undefined || typeof v === "boolean") continue;
    if (k === "additionalProperties" && isEmpty(v)) {
      out[k] = true; // free-form by design (e.g. an audit record's data)
      continue;
    }
    out[k] = walk(v as Json, `${path}/${k}`);
  }
  for (const k of MANY) {
    const v = out[k];
    if (Array.isArray(v)) out[k] = v.map((s, i) => walk(s as Json, `${path}/${k}/${i}`));
  }
  for (const k of MAP) {
    const v = out[k];
    if (v && typeof v === "object") {
      out[k] = Object.fromEntries(
        Object.entries(v as Json).map((
          [name, s],
        ) => [name, walk(s as Json, `${path}/${k}/${name}`)]),
      );
    }
  }
  if (Array.isArray(out.type)) out = splitTypes(out);
  if (![...Object.keys(out)].some((k) => VALIDATION.has(k))) {
    throw new TypeError(`Schema at ${path} has no validation keyword: declare what it is`);
  }
  return out;
}

/** `{type: [a, b], …}` → `{anyOf: [{type: a, …}, {type: b}]}` (keywords stay with their type). */
function splitTypes(node: Json): Json {
  const { type, ...rest } = node;
  const types = type as string[];
  const annotations: Json = {};
  for (const k of ["description", "title", "default", "examples"]) {
    if (k in rest) {
      annotations[k] = rest[k];
      delete rest[k];
    }
  }
  const branches = types.map((t) => (t === "null" ? { type: "null" } : { type: t, ...rest }));
  return { ...annotations, anyOf: branches };
}

function isEmpty(v: unknown): boolean {
  return v !== null && typeof v === "object" && !Array.isArray(v) && Object.keys(v).length === 0;
}
