/**
 * The guides agents read (skills/termada/SKILL.md, the CLAUDE.md / AGENTS.md snippet): valid skill
 * front matter, and every tool they name exists with the fields they show.
 */
import assert from "node:assert/strict";
import { parse } from "yaml";
import { TOOLS } from "../src/mcp/mod.ts";
import { ROOT } from "./_daemon.ts";

const NAMES = new Set(TOOLS.map((t) => t.name));

/** Code-quoted names with a tool family's prefix (fields such as `job_id` aside). */
function toolMentions(text: string): string[] {
  const found = new Set<string>();
  for (
    const m of text.matchAll(
      /`((?:exec|session|mission|snapshot|file|port|fleet|server|vault)_[a-z_]+)[ `]/g,
    )
  ) {
    if (!/_(id|ms|bytes)$/.test(m[1]!)) found.add(m[1]!);
  }
  return [...found];
}

Deno.test("the Termada skill has valid front matter and names only real tools", () => {
  const text = Deno.readTextFileSync(`${ROOT}skills/termada/SKILL.md`);
  const m = /^---\n([\s\S]*?)\n---\n/.exec(text);
  assert.ok(m, "front matter");
  const front = parse(m[1]!) as { name?: string; description?: string };
  assert.equal(front.name, "termada");
  assert.ok((front.description ?? "").length > 50 && front.description!.length <= 1024);
  const mentions = toolMentions(text);
  assert.ok(mentions.length >= 10, mentions.join(" "));
  for (const n of mentions) assert.ok(NAMES.has(n), `SKILL.md names "${n}", not a tool`);
});

Deno.test("the CLAUDE.md / AGENTS.md snippet names only real tools", () => {
  const text = Deno.readTextFileSync(`${ROOT}docs/AGENTS_SNIPPET.md`);
  for (const n of toolMentions(text)) assert.ok(NAMES.has(n), `the snippet names "${n}"`);
});
