import assert from "node:assert/strict";
import { TOOL_EXAMPLES } from "./examples.ts";
import { TOOLS } from "./tools.ts";

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
