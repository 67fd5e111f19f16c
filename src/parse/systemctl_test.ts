import assert from "node:assert/strict";
import { fixture, parsed } from "./_testing.ts";

Deno.test("systemctl status, systemd 245 layout (hand-made)", () => {
  const { parsed: p, warnings } = parsed(
    "unit_status",
    ["systemctl status nginx"],
    fixture("systemctl_status_245_nginx.handmade.txt"),
  );
  assert.equal(warnings, undefined);
  const u = p.units[0]!;
  assert.deepEqual(
    [
      u.unit,
      u.loaded,
      u.unit_file_state,
      u.preset,
      u.active,
      u.sub_state,
      u.since_iso,
      u.main_pid,
      u.tasks,
      u.tasks_limit,
    ],
    [
      "nginx.service",
      "loaded",
      "enabled",
      "enabled",
      "active",
      "running",
      "2023-05-15T10:21:33Z",
      846,
      3,
      4617,
    ],
  );
  assert.deepEqual(u.cgroup_processes?.map((c) => c.pid), [846, 847, 848]);
  assert.equal(u.processes?.length, 2);
  assert.equal(
    u.logs?.[1]?.message,
    "Started A high performance web server and a reverse proxy server.",
  );
});

Deno.test("systemctl status, systemd 252 layout (hand-made): drop-ins, docs, quoted cgroup commands", () => {
  const { parsed: p, warnings } = parsed(
    "unit_status",
    ["systemctl", "status", "ssh"],
    fixture("systemctl_status_252_ssh.handmade.txt"),
  );
  assert.equal(warnings, undefined);
  const u = p.units[0]!;
  assert.deepEqual(u.drop_ins, ["/etc/systemd/system/ssh.service.d/override.conf"]);
  assert.deepEqual(u.docs, ["man:sshd(8)", "man:sshd_config(5)"]);
  assert.equal(u.cpu, "1.204s");
  assert.equal(
    u.cgroup_processes?.[0]?.command,
    "sshd: /usr/sbin/sshd -D [listener] 0 of 10-100 startups",
  );
  assert.deepEqual([u.logs?.[1]?.identifier, u.logs?.[1]?.pid], ["sshd", 640]);
});

Deno.test("systemctl status, systemd 255 layout (hand-made): memory peak, failed unit", () => {
  const ok = parsed(
    "unit_status",
    ["systemctl status nginx"],
    fixture("systemctl_status_255_nginx.handmade.txt"),
  ).parsed.units[0]!;
  assert.deepEqual([ok.memory, ok.memory_bytes, ok.memory_peak], [
    "4.1M",
    Math.round(4.1 * 1024 * 1024),
    "6.3M",
  ]);
  const bad = parsed(
    "unit_status",
    ["systemctl status myapp"],
    fixture("systemctl_status_255_failed.handmade.txt"),
  ).parsed.units[0]!;
  assert.deepEqual([bad.indicator, bad.active, bad.result, bad.main_pid, bad.main_process], [
    "×",
    "failed",
    "exit-code",
    2201,
    undefined,
  ]);
  assert.equal(bad.properties?.Duration, "1.203s");
  assert.equal(bad.logs?.length, 4);
});

Deno.test("systemctl status of several units: inactive, timer, not found", () => {
  const { parsed: p } = parsed(
    "unit_status",
    ["systemctl status foo backup.timer nosuch"],
    fixture("systemctl_status_multi_inactive.handmade.txt"),
  );
  assert.deepEqual(p.units.map((u) => [u.unit, u.active, u.sub_state]), [[
    "foo.service",
    "inactive",
    "dead",
  ], ["backup.timer", "active", "waiting"]]);
  assert.equal(p.units[1]!.trigger, "Fri 2024-06-14 02:00:00 UTC; 16h left");
  assert.deepEqual(p.errors, ["Unit nosuch.service could not be found."]);
});

Deno.test("systemctl status: auto-restart with a result, a unit that is not found", () => {
  const out = "× web.service - Web\n" +
    "     Loaded: loaded (/etc/systemd/system/web.service; enabled; preset: enabled)\n" +
    "     Active: activating (auto-restart) (Result: exit-code) since Thu 2024-06-13 09:00:02 UTC; 2s ago\n" +
    "    Process: 7 ExecStart=/bin/false (code=exited, status=1/FAILURE)\n" +
    "   Main PID: 7 (code=exited, status=1/FAILURE)\n\n" +
    "○ ghost.service\n" +
    "     Loaded: not-found (Reason: Unit ghost.service not found.)\n" +
    "     Active: inactive (dead)\n";
  const { parsed: p, warnings } = parsed("unit_status", ["systemctl status web ghost"], out);
  assert.equal(warnings, undefined);
  const [web, ghost] = p.units;
  assert.deepEqual([web!.active, web!.sub_state, web!.result, web!.since_relative], [
    "activating",
    "auto-restart",
    "exit-code",
    "2s ago",
  ]);
  assert.deepEqual([ghost!.unit, ghost!.description, ghost!.loaded, ghost!.unit_file], [
    "ghost.service",
    undefined,
    "not-found",
    undefined,
  ]);
  assert.equal(ghost!.properties?.Reason, "Unit ghost.service not found.");
});
