import assert from "node:assert/strict";
import { fixture, parsed } from "./_testing.ts";

Deno.test("ss -tlnp (real, iproute2 6.1 with its glued Port/Process header)", () => {
  const { parsed: p, warnings } = parsed("socket_list", ["ss -tlnp"], fixture("ss_tlnp.txt"));
  assert.equal(warnings, undefined);
  const s = p.sockets.find((x) => x.processes !== undefined)!;
  assert.deepEqual([s.state, s.local.address, s.peer.port, s.processes![0]!.name], [
    "LISTEN",
    "127.0.0.1",
    "*",
    "deno",
  ]);
  assert.equal(typeof s.processes![0]!.pid, "number");
  assert.equal(p.sockets.find((x) => x.local.port === "2024")!.processes, undefined);
  assert.equal(
    parsed("socket_list", ["ss -tunlp"], fixture("ss_tunlp.txt")).parsed.sockets[0]!.netid,
    "tcp",
  );
});

Deno.test("ss -tunap (hand-made): IPv6, interfaces, several processes, names with spaces", () => {
  const { parsed: p, warnings } = parsed(
    "socket_list",
    ["ss -tunap"],
    fixture("ss_tunap.handmade.txt"),
  );
  assert.equal(warnings, undefined);
  const dns = p.sockets[0]!;
  assert.deepEqual([
    dns.netid,
    dns.state,
    dns.local.address,
    dns.local.interface,
    dns.local.port_number,
  ], ["udp", "UNCONN", "127.0.0.53", "lo", 53]);
  const ssh = p.sockets.find((x) => x.state === "ESTAB")!;
  assert.deepEqual(ssh.processes, [{ name: "sshd", pid: 3001, fd: 4 }, {
    name: "sshd",
    pid: 2990,
    fd: 4,
  }]);
  assert.equal(ssh.peer.port_number, 51514);
  const v6 = p.sockets.find((x) => x.local.text === "[::]:80")!;
  assert.deepEqual([v6.local.address, v6.processes?.length], ["::", 2]);
  const mapped = p.sockets.find((x) => x.local.port === "9000")!;
  assert.deepEqual([mapped.local.address, mapped.processes?.[0]?.name], [
    "::ffff:127.0.0.1",
    "php-fpm: master",
  ]);
  assert.equal(p.sockets.at(-1)!.local.address, "*");
});

Deno.test("ss without -n keeps service names as ports", () => {
  const out =
    "State  Recv-Q Send-Q Local Address:Port Peer Address:Port\nLISTEN 0 128 0.0.0.0:ssh 0.0.0.0:*\n";
  const s = parsed("socket_list", ["ss -tl"], out).parsed.sockets[0]!;
  assert.deepEqual([s.local.port, s.local.port_number], ["ssh", undefined]);
});

Deno.test("ss -tanp and ss -tunap (real, busy host): every line reads, states kept", () => {
  for (const [argv, file] of [["ss -tanp", "ss_tanp.txt"], ["ss -tunap", "ss_tunap.txt"]]) {
    const { parsed: p, warnings } = parsed("socket_list", [argv!], fixture(file!));
    assert.equal(warnings, undefined, file);
    const states = new Set(p.sockets.map((s) => s.state));
    assert.ok(states.has("LISTEN"), file);
    assert.equal(p.sockets.length, fixture(file!).trimEnd().split("\n").length - 1, file);
  }
});
