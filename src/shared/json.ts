/** Values kept as JSON text (store columns, journals), checked once. */
import { invalidArgument } from "./errors.ts";

const encoder = new TextEncoder();

/**
 * `value` as JSON text: it must serialise (no cycles, no bigint) and stay within `maxBytes` as
 * UTF-8. Throws INVALID_ARGUMENT (`Cannot store <what>: …`); `tooLarge` builds the error for a
 * value over the bound when the caller has its own (an adapter's TOO_LARGE).
 */
export function checkJson(
  what: string,
  value: unknown,
  maxBytes: number,
  tooLarge?: (message: string) => Error,
): string {
  let json: string | undefined;
  try {
    json = JSON.stringify(value);
  } catch (err) {
    throw invalidArgument(
      `Cannot store ${what}: it is not serialisable as JSON (${
        err instanceof Error ? err.message : String(err)
      })`,
    );
  }
  if (json === undefined) throw invalidArgument(`Cannot store ${what}: it is not a JSON value`);
  // UTF-16 length ≤ UTF-8 length ≤ 3 × UTF-16 length: encode only when the bound cannot decide.
  const bytes = json.length * 3 <= maxBytes || json.length > maxBytes
    ? json.length
    : encoder.encode(json).byteLength;
  if (bytes > maxBytes) {
    const message = `Cannot store ${what}: it is larger than ${maxBytes} bytes as JSON`;
    throw tooLarge ? tooLarge(message) : invalidArgument(message);
  }
  return json;
}
