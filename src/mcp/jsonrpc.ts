/**
 * The shape of a JSON-RPC 2.0 message, checked before anything else reads it: the HTTP endpoint
 * and the stdio bridge answer a body or line that is not one with an Invalid Request error
 * (-32600) instead of passing it on or staying silent.
 */

export const PARSE_ERROR = -32700;
export const INVALID_REQUEST = -32600;
export const INVALID_PARAMS = -32602;

/** Why `value` is not a JSON-RPC message or a non-empty batch of them; undefined when it is. */
export function jsonRpcShapeError(value: unknown): string | undefined {
  if (Array.isArray(value)) {
    if (value.length === 0) return "an empty batch";
    for (let i = 0; i < value.length; i++) {
      const why = messageError(value[i]);
      if (why !== undefined) return `batch entry ${i}: ${why}`;
    }
    return undefined;
  }
  return messageError(value);
}

function messageError(m: unknown): string | undefined {
  if (m === null || typeof m !== "object" || Array.isArray(m)) return "not a JSON object";
  const o = m as Record<string, unknown>;
  if (o.jsonrpc !== "2.0") return 'missing "jsonrpc": "2.0"';
  if ("method" in o) {
    if (typeof o.method !== "string") return '"method" is not a string';
    if ("id" in o && !validId(o.id)) return '"id" is not a string or a number';
    // MCP names its params: an array (JSON-RPC's by-position form) would reach no handler, and
    // the SDK drops such a message without a reply.
    if (
      "params" in o &&
      (o.params === null || typeof o.params !== "object" || Array.isArray(o.params))
    ) {
      return '"params" is not an object';
    }
    return undefined;
  }
  if ("result" in o || "error" in o) {
    return validId(o.id) || o.id === null ? undefined : '"id" is not a string or a number';
  }
  return 'neither a request ("method") nor a response ("result" or "error")';
}

function validId(id: unknown): boolean {
  return typeof id === "string" || (typeof id === "number" && Number.isFinite(id));
}

/** The id of a request that may be answered, or null. */
export function requestId(value: unknown): string | number | null {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return null;
  const o = value as Record<string, unknown>;
  return "method" in o && validId(o.id) ? o.id as string | number : null;
}
