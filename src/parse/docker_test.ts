import assert from "node:assert/strict";
import { fixture, parsed } from "./_testing.ts";
import { dockerFormat } from "./docker.ts";

Deno.test("docker ps -a table, docker 20 columns (hand-made): empty PORTS, states from STATUS", () => {
  const { parsed: p, warnings } = parsed(
    "container_list",
    ["docker ps -a"],
    fixture("docker_ps_20.handmade.txt"),
  );
  assert.equal(warnings, undefined);
  assert.equal(p.format, "table");
  assert.deepEqual(p.containers.map((c) => [c.names[0], c.state, c.exit_code, c.health]), [
    ["web", "running", undefined, undefined],
    ["db", "running", undefined, "healthy"],
    ["tender_morse", "exited", 137, undefined],
    ["cache", "created", undefined, undefined],
  ]);
  assert.deepEqual(p.containers[0]!.ports, ["0.0.0.0:8080->80/tcp", ":::8080->80/tcp"]);
  assert.equal(p.containers[2]!.ports, undefined);
  assert.equal(p.containers[2]!.command, "sh -c 'sleep 1000'");
});

Deno.test("docker ps -s, docker 27 columns (hand-made): SIZE, several names, paused, restarting", () => {
  const { parsed: p } = parsed(
    "container_list",
    ["docker container ls -s"],
    fixture("docker_ps_27_size.handmade.txt"),
  );
  assert.deepEqual(p.containers[0]!.names, ["api", "api-alias"]);
  assert.equal(p.containers[0]!.health, "unhealthy");
  assert.equal(p.containers[0]!.size, "12.3kB (virtual 89.1MB)");
  assert.equal(p.containers[1]!.state, "paused");
  assert.deepEqual([p.containers[2]!.state, p.containers[2]!.exit_code], ["restarting", 1]);
  const full = parsed(
    "container_list",
    ["docker ps --no-trunc"],
    fixture("docker_ps_27_no_trunc.handmade.txt"),
  ).parsed;
  assert.equal(full.containers[0]!.id.length, 64);
  assert.equal(full.containers[0]!.command, "/docker-entrypoint.sh nginx -g 'daemon off;'");
});

Deno.test("docker ps --format '{{json .}}' (hand-made): typed keys and extra", () => {
  const { parsed: p } = parsed(
    "container_list",
    ["docker ps -a --format '{{json .}}'"],
    fixture("docker_ps_json.handmade.txt"),
  );
  assert.equal(p.format, "json");
  assert.deepEqual(p.containers.map((c) => c.state), ["running", "running", "exited"]);
  assert.equal(p.containers[0]!.extra?.Networks, "bridge");
  assert.equal(p.containers[2]!.exit_code, 137);
});

Deno.test("dockerFormat: table, json, refusals", () => {
  assert.equal(dockerFormat(["ps"]), "table");
  assert.equal(dockerFormat(["ps", "--format", "json"]), "json");
  assert.equal(dockerFormat(["ps", "--format={{json .}}"]), "json");
  assert.equal(dockerFormat(["ps", "-q"]), undefined);
  assert.equal(dockerFormat(["ps", "--format", "{{.ID}}"]), undefined);
  assert.equal(dockerFormat(["images"]), undefined);
});
