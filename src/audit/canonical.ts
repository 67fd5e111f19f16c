/**
 * Canonical JSON: the one byte form of a value that the audit chain hashes. Object keys are sorted
 * by UTF-16 code units (JavaScript's default sort) at every level, there is no whitespace, and
 * strings and numbers are written exactly as `JSON.stringify` writes them. For the values accepted
 * here this is the JSON Canonicalization Scheme of RFC 8785, so any language can recompute a hash.
 */
import { invalidArgument } from "../shared/mod.ts";

/** Deepest nesting accepted in record data (also stops cycles). */
export const MAX_DATA_DEPTH = 32;

/**
 * Writes `value` as canonical JSON. Accepted: null, booleans, finite numbers, strings, arrays and
 * plain objects (prototype Object.prototype or null). A property whose value is `undefined` is left
 * out, as `JSON.stringify` does. Anything else (undefined in an array, NaN, Infinity, bigint,
 * functions, symbols, Dates, Maps, class instances) is a programmer mistake: TypeError.
 *
 * `redact` is applied to every string value (never to keys: keys are field names chosen by code)
 * before it is written.
 */
export function canonicalJson(value: unknown, redact?: (text: string) => string): string {
  return write(value, redact, 0, "data");
}

function write(
  value: unknown,
  redact: ((text: string) => string) | undefined,
  depth: number,
  path: string,
): string {
  switch (typeof value) {
    case "string": {
      if (redact === undefined) return JSON.stringify(value);
      const out = redact(value);
      if (typeof out !== "string") {
        throw new TypeError("The audit redact function must return a string");
      }
      return JSON.stringify(out);
    }
    case "number":
      if (!Number.isFinite(value)) {
        throw new TypeError(`Cannot audit ${path}: ${value} is not a finite number`);
      }
      return JSON.stringify(value);
    case "boolean":
      return value ? "true" : "false";
    case "object": {
      if (value === null) return "null";
      if (depth >= MAX_DATA_DEPTH) {
        throw invalidArgument(
          `Cannot audit ${path}: it nests deeper than ${MAX_DATA_DEPTH} levels`,
          "Flatten the record data (a cycle also ends here)",
        );
      }
      if (Array.isArray(value)) {
        const parts: string[] = [];
        for (let i = 0; i < value.length; i++) {
          const item: unknown = value[i];
          if (item === undefined) {
            throw new TypeError(`Cannot audit ${path}[${i}]: undefined is not JSON`);
          }
          parts.push(write(item, redact, depth + 1, `${path}[${i}]`));
        }
        return `[${parts.join(",")}]`;
      }
      const proto = Object.getPrototypeOf(value);
      if (proto !== Object.prototype && proto !== null) {
        const name = (value as { constructor?: { name?: unknown } }).constructor?.name;
        throw new TypeError(
          `Cannot audit ${path}: a ${
            typeof name === "string" ? name : "non-plain object"
          } is not ` +
            "plain JSON (convert it to a string or a plain object first)",
        );
      }
      const record = value as Record<string, unknown>;
      const parts: string[] = [];
      for (const key of Object.keys(record).sort()) {
        const item = record[key];
        if (item === undefined) continue;
        parts.push(`${JSON.stringify(key)}:${write(item, redact, depth + 1, `${path}.${key}`)}`);
      }
      return `{${parts.join(",")}}`;
    }
    default:
      throw new TypeError(`Cannot audit ${path}: a ${typeof value} is not JSON`);
  }
}
