import assert from "node:assert/strict";
import { TOOL_EXAMPLES } from "./examples.ts";
import { TOOLS } from "./tools.ts";
import { INSTRUCTIONS } from "./server.ts";

Deno.test("every tool's description ends with an example call its input schema accepts", () => {
  for (const t of TOOLS) {
    const example = TOOL_EXAMPLES[t.name];
    assert.ok(example, `${t.name} has an example`);
    const parsed = t.input.safeParse(example);
    assert.ok(parsed.success, `${t.name}: ${JSON.stringify(example)}: ${parsed.error?.message}`);
    assert.ok(
      t.description.endsWith(`\nExample: ${JSON.stringify(example)}`),
      `${t.name}'s description shows it`,
    );
  }
  const names = new Set(TOOLS.map((t) => t.name));
  const stale = Object.keys(TOOL_EXAMPLES).filter((n) => !names.has(n));
  assert.deepEqual(stale, [], "no example for a tool that does not exist");
});

Deno.test("every tool's description names what it needs and stays readable", () => {
  for (const t of TOOLS) {
    assert.ok(t.description.length >= 40, `${t.name}: a description that says something`);
    assert.ok(t.description.length <= 2000, `${t.name}: ${t.description.length} characters`);
    assert.ok(t.title.length > 0 && t.title.length <= 40, `${t.name}: a short title`);
  }
});

Deno.test("the server instructions name only real tools, and the ones a model needs first", () => {
  const names = new Set(TOOLS.map((t) => t.name));
  const mentioned = [...INSTRUCTIONS.matchAll(/\b([a-z]+_[a-z_]+)\b/g)].map((m) => m[1]!)
    .filter((w) => /^(exec|session|mission|snapshot|file|port|fleet|server|vault)_/.test(w))
    .filter((w) => !/_(id|ms|bytes|cursor|input)$/.test(w));
  for (const n of mentioned) assert.ok(names.has(n), `INSTRUCTIONS name "${n}", not a tool`);
  for (const must of ["exec_run", "exec_wait", "exec_poll", "exec_write", "session_screen"]) {
    assert.ok(mentioned.includes(must), `INSTRUCTIONS explain ${must}`);
  }
  assert.ok(INSTRUCTIONS.length < 4000, `${INSTRUCTIONS.length} characters: keep it short`);
});
