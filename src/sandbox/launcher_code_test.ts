import assert from "node:assert/strict";
import { preloadNative } from "../pty/mod.ts";
import { LauncherCode } from "./launcher_code.ts";

preloadNative(); // libc is loaded once, outside the tests

Deno.test("the launcher's code is pinned: its binary, launcher_main.ts and what it imports", () => {
  const code = LauncherCode.pin();
  const paths = code.paths;
  assert.equal(paths[0], Deno.execPath());
  assert.ok(paths.some((p) => p.endsWith("/src/sandbox/launcher_main.ts")), paths.join("\n"));
  assert.ok(paths.some((p) => p.endsWith("/ffi/mod.ts")), "a module it imports");
  assert.ok(paths.some((p) => p.endsWith("/src/sandbox/landlock.ts")));
  assert.equal(code.changed(), undefined);
});

Deno.test("a pinned file rewritten, renamed over, chmodded or removed is a change", async (t) => {
  const dir = await Deno.makeTempDir({ prefix: "termada-pin-" });
  try {
    const f = `${dir}/code.ts`;
    const fresh = () => {
      Deno.writeTextFileSync(f, "export const x = 1;\n");
      return LauncherCode.of([f]);
    };
    const later = () => new Promise((r) => setTimeout(r, 2)); // ctime moves on (ns)
    await t.step("rewritten in place, same length", async () => {
      const code = fresh();
      await later();
      Deno.writeTextFileSync(f, "export const x = 2;\n");
      assert.equal(code.changed(), f);
    });
    await t.step("renamed over", async () => {
      const code = fresh();
      await later();
      Deno.writeTextFileSync(`${dir}/evil.ts`, "export const x = 1;\n");
      Deno.renameSync(`${dir}/evil.ts`, f);
      assert.equal(code.changed(), f);
    });
    await t.step("chmodded, its mtime set back", async () => {
      const code = fresh();
      const before = Deno.statSync(f).mtime!;
      await later();
      Deno.chmodSync(f, 0o600);
      Deno.utimeSync(f, before, before);
      assert.equal(code.changed(), f);
    });
    await t.step("removed", () => {
      const code = fresh();
      Deno.removeSync(f);
      assert.equal(code.changed(), f);
    });
    await t.step("untouched: no change", () => {
      assert.equal(fresh().changed(), undefined);
    });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
