import assert from "node:assert/strict";
import { CompiledResourceRules, decideResource, matchTokens } from "./resource.ts";

const FALLBACK = { action: "allow" as const, reason: "no rules" };
const rules = (
  kind: ConstructorParameters<typeof CompiledResourceRules>[0],
  r: Partial<{
    allow: string[];
    deny: string[];
    confirm: string[];
  }>,
) => new CompiledResourceRules(kind, { allow: [], deny: [], confirm: [], ...r });

Deno.test("resource patterns: * stays in one path segment, ** crosses them, ? is one character", () => {
  const m = (pat: string, text: string) =>
    decideResource(
      { kind: "file.read", target: "local", path: text },
      rules("file.read", { allow: [pat] }),
      FALLBACK,
    ).action === "allow";
  assert.equal(m("/etc/*", "/etc/hosts"), true);
  assert.equal(m("/etc/*", "/etc/ssh/sshd_config"), false);
  assert.equal(m("/etc/**", "/etc/ssh/sshd_config"), true);
  assert.equal(m("/tmp/a?c", "/tmp/abc"), true);
  assert.equal(m("/tmp/a?c", "/tmp/a/c"), false);
  assert.equal(m("/tmp/\\*", "/tmp/*"), true);
  assert.equal(m("/tmp/\\*", "/tmp/x"), false);
});

Deno.test("resource decisions: deny beats confirm beats allow; allow rules make the rest denied", () => {
  const r = rules("server", { allow: ["web*"], confirm: ["tag:prod"], deny: ["web9"] });
  const d = (name: string, tags: string[] = []) =>
    decideResource({ kind: "server", name, tags }, r, FALLBACK);
  assert.equal(d("web1").action, "allow");
  assert.equal(d("web1", ["prod"]).action, "confirm");
  assert.equal(d("web9", ["prod"]).action, "deny");
  assert.equal(d("db1").action, "deny");
  assert.match(d("db1").reason, /no allow rule/);
  const onlyDeny = rules("server", { deny: ["db*"] });
  assert.equal(
    decideResource({ kind: "server", name: "x", tags: [] }, onlyDeny, FALLBACK).action,
    "allow",
  );
  assert.equal(
    decideResource({ kind: "server", name: "x", tags: [] }, undefined, FALLBACK).action,
    "allow",
  );
  assert.equal(
    decideResource({ kind: "server", name: "x", tags: [] }, undefined, {
      action: "deny",
      reason: "closed",
    }).action,
    "deny",
  );
});

Deno.test("file patterns can name a target; forward patterns match server:host:port", () => {
  const f = rules("file.write", { deny: ["prod:/etc/**"], allow: ["/etc/**", "local:/tmp/**"] });
  const w = (target: string, path: string) =>
    decideResource({ kind: "file.write", target, path }, f, FALLBACK).action;
  assert.equal(w("prod", "/etc/passwd"), "deny");
  assert.equal(w("staging", "/etc/passwd"), "allow");
  assert.equal(w("local", "/tmp/x"), "allow");
  assert.equal(w("staging", "/tmp/x"), "deny");
  assert.throws(() => rules("file.read", { allow: ["etc/*"] }), RangeError);
  const fw = rules("forward", { allow: ["staging:127.0.0.1:*"], deny: ["*:*:22"] });
  const o = (server: string, host: string, port: number) =>
    decideResource({ kind: "forward", server, host, port }, fw, FALLBACK).action;
  assert.equal(o("staging", "127.0.0.1", 8080), "allow");
  assert.equal(o("staging", "127.0.0.1", 22), "deny");
  assert.equal(o("prod", "127.0.0.1", 8080), "deny");
});

Deno.test("resource matching gives the right answer for a pathological pattern on a long subject", () => {
  const pat = new CompiledResourceRules("file.read", {
    allow: ["/" + "**a".repeat(40) + "b"],
    deny: [],
    confirm: [],
  });
  const d = decideResource(
    { kind: "file.read", target: "local", path: "/" + "a".repeat(4000) },
    pat,
    FALLBACK,
  );
  assert.equal(d.action, "deny");
  assert.ok(matchTokens(new Int32Array([0x61]), "a"));
});
