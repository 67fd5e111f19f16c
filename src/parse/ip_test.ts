import assert from "node:assert/strict";
import { failed, fixture, parsed } from "./_testing.ts";
import { ipObject } from "./ip.ts";

Deno.test("ip -j addr (real) is validated field by field", () => {
  const { parsed: p } = parsed("ip_addr", ["ip -j addr"], fixture("ip_j_addr.txt"));
  const lo = p.interfaces.find((i) => i.ifname === "lo")!;
  assert.deepEqual([lo.mtu, lo.flags?.includes("UP"), lo.addr_info?.[0]?.local], [
    65536,
    true,
    "127.0.0.1",
  ]);
  const eth0 = p.interfaces.find((i) => i.ifname === "eth0")!;
  assert.equal(eth0.addr_info?.find((a) => a.family === "inet")?.prefixlen, 24);
  // keys without a typed field are kept as JSON text
  const v6 = eth0.addr_info?.find((a) => a.family === "inet6" && a.extra !== undefined);
  assert.equal(v6?.extra?.nodad, "true");
});

Deno.test("ip -j link and ip -j route (real)", () => {
  const link = parsed("ip_link", ["ip", "-j", "link"], fixture("ip_j_link.txt")).parsed;
  assert.ok(link.interfaces.every((i) => i.addr_info === undefined));
  assert.equal(link.interfaces.find((i) => i.ifname === "lo")!.linkmode, "DEFAULT");
  const route = parsed("ip_route", ["ip -j route"], fixture("ip_j_route.txt")).parsed;
  assert.deepEqual(route.routes[0], {
    dst: "default",
    gateway: "192.0.2.1",
    dev: "eth0",
    flags: [],
  });
});

Deno.test("ip: mistyped values go to extra, non-JSON is a parse_error", () => {
  const r = parsed("ip_route", ["ip -j r"], '[{"dst":"default","metric":"high","nested":{"a":1}}]');
  assert.deepEqual(r.parsed.routes[0], {
    dst: "default",
    extra: { metric: '"high"', nested: '{"a":1}' },
  });
  assert.match(
    failed("ip_addr", ["ip addr"], "1: lo: <LOOPBACK,UP> mtu 65536").parse_error.message,
    /not JSON/,
  );
  assert.match(failed("ip_addr", ["ip -j addr"], '{"a":1}').parse_error.message, /array/);
});

Deno.test("ipObject: -j/-json and object prefixes; no text output, no changes", () => {
  assert.equal(ipObject(["-j", "a"]), "addr");
  assert.equal(ipObject(["-json", "-4", "address", "show", "dev", "eth0"]), "addr");
  assert.equal(ipObject(["-j", "ro", "get", "1.1.1.1"]), "route");
  assert.equal(ipObject(["-n", "ns1", "-j", "link"]), "link");
  assert.equal(ipObject(["addr"]), undefined);
  assert.equal(ipObject(["-j", "addr", "add", "10.0.0.1/24", "dev", "eth0"]), undefined);
  assert.equal(ipObject(["-j", "neigh"]), undefined);
});

Deno.test("ip -j -p (real, pretty) parses like the compact JSON", () => {
  const compact = parsed("ip_addr", ["ip -j addr"], fixture("ip_j_addr.txt")).parsed;
  const pretty = parsed("ip_addr", ["ip -j -p addr"], fixture("ip_j_p_addr.txt")).parsed;
  assert.deepEqual(pretty.interfaces.map((i) => i.ifname), compact.interfaces.map((i) => i.ifname));
  assert.deepEqual(pretty.interfaces[0], compact.interfaces[0]);
});
