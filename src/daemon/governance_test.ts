import assert from "node:assert/strict";
import type { Recorder } from "../control/mod.ts";
import { checkTrustFile, refusalAuditor, REFUSALS_AUDITED_PER_MINUTE } from "./governance.ts";

Deno.test("a pinned JWKS file is trusted only when no one else can write it or its directory", async (t) => {
  const dir = await Deno.makeTempDir();
  try {
    const file = `${dir}/jwks.json`;
    await Deno.writeTextFile(file, "{}", { mode: 0o644 });
    await Deno.chmod(file, 0o644);
    await t.step("0644 in a 0700 directory", () => checkTrustFile(file, "the agent JWKS file"));
    await t.step("writable by others", async () => {
      await Deno.chmod(file, 0o666);
      assert.throws(() => checkTrustFile(file, "the agent JWKS file"), /group or others/);
      await Deno.chmod(file, 0o644);
    });
    await t.step("a link", async () => {
      await Deno.symlink(file, `${dir}/link.json`);
      assert.throws(() => checkTrustFile(`${dir}/link.json`, "x"), /not a regular file/);
    });
    await t.step("in a directory others can write", async () => {
      await Deno.chmod(dir, 0o777);
      assert.throws(() => checkTrustFile(file, "x"), /directory .* writable/);
      await Deno.chmod(dir, 0o700);
    });
    await t.step("missing", () => {
      assert.throws(() => checkTrustFile(`${dir}/nope.json`, "x"), /Cannot trust x/);
    });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("refused callers are audited at most 60 a minute; the next record counts the rest", () => {
  const notes: Record<string, unknown>[] = [];
  const recorder = {
    note: (_a: unknown, _e: string, data: Record<string, unknown>) => {
      notes.push(data);
      return { seq: notes.length, hash: "" };
    },
  } as unknown as Recorder;
  let now = 0;
  const refused = refusalAuditor(() => recorder, () => now);
  for (let i = 0; i < 100; i++) refused({ transport: "http/tcp", reason: "Unknown agent token" });
  assert.equal(notes.length, REFUSALS_AUDITED_PER_MINUTE);
  now = 61_000;
  refused({ transport: "http/tcp", reason: "Unknown agent token" });
  assert.equal(notes.length, REFUSALS_AUDITED_PER_MINUTE + 1);
  assert.equal(notes.at(-1)!.suppressed, 40);
});
