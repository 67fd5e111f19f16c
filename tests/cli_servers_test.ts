/** Black-box: `termada servers …` against a real daemon (the operator's inventory over its socket). */
import assert from "node:assert/strict";
import { homeWithConfig, startDaemon, termada } from "./_daemon.ts";

Deno.test("termada servers: add, list (--json), forget, rm; bad usage is exit 2 naming the flag", async () => {
  const home = await homeWithConfig(
    "servers:\n  - {name: cfg-box, host: 127.0.0.1, port: 2222, user: ops, tags: [ci]}\n",
  );
  try {
    await using _d = await startDaemon(home);
    const add = await termada(home, [
      "servers",
      "add",
      "web-1",
      "--host",
      "10.0.0.7",
      "--user",
      "deploy",
      "--tag",
      "web",
      "--tag",
      "prod",
    ]);
    assert.equal(add.code, 0, add.stderr);
    const list = await termada(home, ["servers", "list", "--json"]);
    assert.equal(list.code, 0, list.stderr);
    const servers = JSON.parse(list.stdout) as {
      name: string;
      source: string;
      tags: string[];
      port: number;
    }[];
    assert.deepEqual(servers.map((s) => [s.name, s.source]), [["cfg-box", "config"], [
      "web-1",
      "live",
    ]]);
    assert.deepEqual(servers[1]!.tags, ["web", "prod"]);
    assert.equal(servers[1]!.port, 22);
    // Kept across a restart of the daemon: in <state>/servers.json.
    assert.match(Deno.readTextFileSync(`${home}/servers.json`), /"web-1"/);
    const table = await termada(home, ["servers"]);
    assert.match(table.stdout, /deploy@10\.0\.0\.7:22/);

    const dup = await termada(home, ["servers", "add", "web-1", "--host", "x", "--user", "u"]);
    assert.notEqual(dup.code, 0);
    assert.match(dup.stderr, /already exists/);
    const cfg = await termada(home, ["servers", "rm", "cfg-box"]);
    assert.notEqual(cfg.code, 0);
    assert.match(cfg.stderr, /config file/);

    const forget = await termada(home, ["servers", "forget", "web-1"]);
    assert.equal(forget.code, 0, forget.stderr);
    const rm = await termada(home, ["servers", "rm", "web-1"]);
    assert.equal(rm.code, 0, rm.stderr);
    const after = JSON.parse((await termada(home, ["servers", "list", "--json"])).stdout);
    assert.deepEqual(after.map((s: { name: string }) => s.name), ["cfg-box"]);

    const bad = await termada(home, ["servers", "add", "x", "--host", "h", "--frob", "1"]);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /--frob/);
    const missing = await termada(home, ["servers", "add", "x", "--user", "u"]);
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /--host/);
    const audit = await termada(home, ["audit", "-n", "50", "--json"]);
    assert.match(audit.stdout, /server\.added/);
    assert.match(audit.stdout, /server\.removed/);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});
