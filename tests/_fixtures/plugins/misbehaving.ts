/**
 * A plugin that breaks the contract in one chosen way, without the SDK so nothing corrects it.
 * `deno run … misbehaving.ts <mode>`; it answers initialize and tools/list normally (unless the
 * mode is about them) and misbehaves on tools/call:
 *
 * - `invalid_json`: answers a call with a line that is not JSON
 * - `huge_line`: answers a call with one 10 MB line
 * - `bad_output`: `echo` declares an output schema and returns content that violates it
 * - `no_structured`: like `bad_output` but returns no structuredContent at all
 * - `big_result`: returns a 2 MB text result
 * - `hang_call`: never answers tools/call (logs `cancelled:<id>` to stderr on cancellation)
 * - `exit_after_call`: exits with status 3 on the first call
 * - `many_tools`: lists 500 tools (100 a page) plus one with a bad name
 * - `huge_schema`: lists a tool with a 1 MB schema beside a normal one
 * - `hang_init`: never answers initialize
 * - `list_changed`: on a call adds tool `extra` and sends notifications/tools/list_changed
 */
const mode = Deno.args[0] ?? "";
const encoder = new TextEncoder();
let extra = false;

function write(text: string): void {
  const bytes = encoder.encode(text + "\n");
  let off = 0;
  while (off < bytes.length) off += Deno.stdout.writeSync(bytes.subarray(off));
}

function reply(id: unknown, result: unknown): void {
  write(JSON.stringify({ jsonrpc: "2.0", id, result }));
}

const echo = {
  name: "echo",
  description: "Returns its text",
  inputSchema: { type: "object", properties: { text: { type: "string" } } },
  outputSchema: {
    type: "object",
    properties: { text: { type: "string" } },
    required: ["text"],
  },
};

function tools(cursor: string | undefined): { tools: unknown[]; nextCursor?: string } {
  if (mode === "many_tools") {
    const page = Number(cursor ?? "0");
    const list = Array.from({ length: 100 }, (_, i) => ({
      name: `t${page * 100 + i}`,
      inputSchema: { type: "object" },
    }));
    if (page === 0) list.unshift({ name: "bad name!", inputSchema: { type: "object" } });
    return page < 4 ? { tools: list, nextCursor: String(page + 1) } : { tools: list };
  }
  if (mode === "huge_schema") {
    const big = { type: "object", description: "x".repeat(1024 * 1024) };
    return { tools: [{ name: "big", inputSchema: big }, echo] };
  }
  return { tools: extra ? [echo, { name: "extra", inputSchema: { type: "object" } }] : [echo] };
}

function call(id: unknown, params: { name?: string; arguments?: { text?: string } }): void {
  const text = params.arguments?.text ?? "";
  switch (mode) {
    case "invalid_json":
      return write("this is {not json");
    case "huge_line":
      return write(JSON.stringify({ jsonrpc: "2.0", id, result: { pad: "y".repeat(10e6) } }));
    case "bad_output":
      return reply(id, { content: [{ type: "text", text }], structuredContent: { text: 42 } });
    case "no_structured":
      return reply(id, { content: [{ type: "text", text }] });
    case "big_result":
      return reply(id, { content: [{ type: "text", text: "z".repeat(2 * 1024 * 1024) }] });
    case "hang_call":
      return;
    case "exit_after_call":
      Deno.exit(3);
      break;
    case "list_changed":
      extra = true;
      reply(id, { content: [{ type: "text", text }], structuredContent: { text } });
      return write(JSON.stringify({ jsonrpc: "2.0", method: "notifications/tools/list_changed" }));
  }
  reply(id, { content: [{ type: "text", text }], structuredContent: { text } });
}

function handle(line: string): void {
  if (line.trim() === "") return;
  const msg = JSON.parse(line);
  switch (msg.method) {
    case "initialize":
      if (mode === "hang_init") return;
      return reply(msg.id, {
        protocolVersion: msg.params.protocolVersion,
        capabilities: { tools: { listChanged: true } },
        serverInfo: { name: "misbehaving", version: "1.0.0" },
      });
    case "tools/list":
      return reply(msg.id, tools(msg.params?.cursor));
    case "tools/call":
      return call(msg.id, msg.params ?? {});
    case "notifications/cancelled":
      Deno.stderr.writeSync(encoder.encode(`cancelled:${msg.params?.requestId}\n`));
      return;
    default:
      if (msg.id !== undefined && msg.method !== undefined) {
        write(JSON.stringify({
          jsonrpc: "2.0",
          id: msg.id,
          error: { code: -32601, message: "Method not found" },
        }));
      }
  }
}

Deno.stderr.writeSync(encoder.encode(`misbehaving plugin up, mode=${mode}\n`));
const decoder = new TextDecoder();
let buffered = "";
for await (const chunk of Deno.stdin.readable) {
  buffered += decoder.decode(chunk, { stream: true });
  let nl;
  while ((nl = buffered.indexOf("\n")) >= 0) {
    handle(buffered.slice(0, nl));
    buffered = buffered.slice(nl + 1);
  }
}
