/**
 * Black-box: typed results through the official SDK client (which checks every
 * structuredContent against the tool's outputSchema): exec_run / exec_poll with `parse`.
 */
import assert from "node:assert/strict";
import { call, startDaemon, stdioClient, tempHome } from "./_daemon.ts";

Deno.test("exec_run and exec_poll parse the output of common commands into typed JSON", async (t) => {
  const home = await tempHome();
  const work = await Deno.realPath(await Deno.makeTempDir({ prefix: "termada-parse-" }));
  try {
    await Deno.writeTextFile(`${work}/a file.txt`, "hello\n");
    await Deno.symlink("a file.txt", `${work}/link`);
    await using _d = await startDaemon(home);
    await using c = await stdioClient(home, ["--agent", "ci"]);

    await t.step("ls -la with auto: the parser, its locale and typed entries", async () => {
      const r = await call(c, "exec_run", { command: [`ls -la ${work}`], parse: "auto" });
      assert.equal(r.parser, "ls", JSON.stringify(r));
      assert.deepEqual(r.parse_env, { LC_ALL: "C" });
      const parsed = r.parsed as { kind: string; sections: { entries: S[] }[] };
      assert.equal(parsed.kind, "directory_listing");
      const entries = parsed.sections.flatMap((s) => s.entries);
      const file = entries.find((e) => e.name === "a file.txt");
      assert.equal(file?.type, "file");
      assert.equal(file?.size, 6);
      const link = entries.find((e) => e.name === "link");
      assert.equal(link?.link_target, "a file.txt");
    });

    await t.step("df -k by name, and exec_poll parses a finished job", async () => {
      const r = await call(c, "exec_run", { command: ["df", "-k"], parse: "df" });
      assert.equal((r.parsed as { kind: string }).kind, "filesystem_list");
      const again = await call(c, "exec_poll", { job_id: r.job_id, parse: "auto" });
      assert.equal(again.parser, "df");
      assert.equal(again.parse_env, undefined, "a poll cannot change how it ran");
    });

    await t.step("auto never guesses: a pipeline has no parser, and says why", async () => {
      const r = await call(c, "exec_run", { command: ["ls -l | head -3"], parse: "auto" });
      assert.equal(r.exit_code, 0);
      assert.equal(r.parsed, undefined);
      assert.match((r.parse_error as { message: string }).message, /No parser matches/);
    });

    await t.step("a running job is parsed once it has ended", async () => {
      const started = await call(c, "exec_start", {
        command: ["sleep 1; ls -l"],
        mode: "background",
      });
      const r = await call(c, "exec_poll", { job_id: started.job_id, parse: "ls" });
      assert.match((r.parse_error as { message: string }).message, /still running/);
    });

    await t.step("an unknown parser is INVALID_ARGUMENT", async () => {
      const r = await c.callTool({
        name: "exec_run",
        arguments: { command: ["ls"], parse: "nope" },
      });
      assert.equal(r.isError, true);
      assert.equal(
        (r.structuredContent as { error: { code: string } }).error.code,
        "INVALID_ARGUMENT",
      );
    });

    await t.step("capabilities lists the parsers with their result schemas", async () => {
      const caps = await call(c, "capabilities", {});
      const parsers = caps.parsers as { name: string; result_schema_json: string }[];
      assert.ok(parsers.length >= 12);
      const ls = parsers.find((p) => p.name === "ls")!;
      assert.equal(JSON.parse(ls.result_schema_json).type, "object");
    });
  } finally {
    await Deno.remove(home, { recursive: true });
    await Deno.remove(work, { recursive: true });
  }
});

type S = Record<string, unknown>;
