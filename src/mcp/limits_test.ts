/**
 * What a tool's schema says it accepts must reach it: the largest valid request of the tools
 * with large inputs fits a request line (socket, stdio shim) and an HTTP body. Before, file_write
 * advertised 16 MiB while every transport stopped at 4 MiB.
 */
import assert from "node:assert/strict";
import { MAX_BODY_BYTES } from "../api/mod.ts";
import { MAX_LINE_BYTES } from "../ipc/mod.ts";
import { ExecRunInput, FileWriteInput, LIMITS, REMOTE_LIMITS } from "../wire/mod.ts";

const BOUND = Math.min(MAX_LINE_BYTES, MAX_BODY_BYTES);

/** The tools/call request as a client sends it (one JSON-RPC line). */
function requestBytes(name: string, args: unknown): number {
  const req = {
    jsonrpc: "2.0",
    id: 2 ** 53 - 1,
    method: "tools/call",
    params: { name, arguments: args, _meta: { progressToken: "p".repeat(64) } },
  };
  return new TextEncoder().encode(JSON.stringify(req) + "\n").length;
}

Deno.test("file_write at its limits fits every transport, even with every character escaped", () => {
  const path = `/${"p".repeat(4000)}`;
  // Control characters are escaped as \u00XX: six bytes for one character, the worst case.
  const text = { path, content: "\u0001".repeat(REMOTE_LIMITS.writeTextChars), mode: "0644" };
  assert.ok(FileWriteInput.safeParse(text).success, "a valid request");
  assert.ok(requestBytes("file_write", text) <= BOUND, `${requestBytes("file_write", text)}`);
  const bytes = new Uint8Array(REMOTE_LIMITS.writeBytes).fill(0xff);
  const b64 = { path, base64: (bytes as unknown as { toBase64(): string }).toBase64() };
  assert.ok(FileWriteInput.safeParse(b64).success, "a valid request");
  assert.ok(requestBytes("file_write", b64) <= BOUND);
  // One more character or byte is refused by the schema: an INVALID_ARGUMENT, not "too large".
  const over = { path, content: "x".repeat(REMOTE_LIMITS.writeTextChars + 1) };
  assert.equal(FileWriteInput.safeParse(over).success, false);
});

Deno.test("exec_run at its limits fits every transport with printable text (quotes escaped)", () => {
  // The argv bound counts UTF-8 bytes plus one per word; `"` is escaped as two bytes.
  const words = 64;
  const word = '"'.repeat(Math.floor(LIMITS.argvBytes / words) - 1);
  const env: Record<string, string> = {};
  const per = Math.floor(LIMITS.envBytes / 16);
  for (let i = 0; i < 16; i++) {
    const name = `V${String(i).padStart(5, "0")}`;
    env[name] = '"'.repeat(per - name.length);
  }
  const args = { command: Array(words).fill(word), env, cwd: `/${"c".repeat(4000)}` };
  const parsed = ExecRunInput.safeParse(args);
  assert.ok(parsed.success, JSON.stringify(parsed.error?.issues?.slice(0, 2)));
  assert.ok(requestBytes("exec_run", args) <= BOUND, `${requestBytes("exec_run", args)}`);
  // The env map has a bound of its own in all: more is refused by the schema.
  const more = { command: ["true"], env: { ...env, EXTRA: "x".repeat(1024) } };
  assert.equal(ExecRunInput.safeParse(more).success, false);
});
