/**
 * The remote tools (TOOLS.md "Files, remote"): servers, fleet runs, port forwards and files, thin
 * adapters over the control layer's RemoteOps. A daemon without a server inventory answers the
 * server tools with NOT_SUPPORTED; file tools on local sessions work everywhere.
 */
import type { RemoteOps } from "../control/mod.ts";
import { TermadaError } from "../shared/mod.ts";
import {
  Empty,
  FileReadInput,
  FileReadResult,
  FileWriteInput,
  FileWriteResult,
  FleetResult,
  FleetRunInput,
  ForwardIdInput,
  ForwardList,
  ForwardView,
  PortForwardInput,
  ServerList,
  VaultListResult,
} from "../wire/mod.ts";
import { tool, type ToolContext, type ToolDef } from "./tools.ts";

function remote(c: ToolContext): RemoteOps {
  const r = c.agents.remote;
  if (!r) {
    throw new TermadaError("NOT_SUPPORTED", "Remote servers are not available on this server");
  }
  return r;
}

export const REMOTE_TOOLS: readonly ToolDef[] = [
  tool({
    name: "vault_list",
    title: "List vault entries you may use",
    description:
      'Names and kinds of the vault entries your policy lets you use (never values). Use one by reference: exec_run/exec_start/session_create env {"DB_URL": {"vault": "db-url"}}, or exec_write {"vault": "sudo-password"} at a prompt. The daemon injects the value; it is masked in every output. VAULT_LOCKED until an operator unlocks the vault.',
    input: Empty,
    output: VaultListResult,
    run: (c) => c.agents.vaultList(c.agent),
    render: (r) =>
      r.entries.length === 0
        ? "no vault entries you may use"
        : r.entries.map((e) => `${e.name} (${e.kind})`).join("\n"),
    annotations: { readOnlyHint: true },
  }),
  tool({
    name: "server_list",
    title: "List servers",
    description:
      "Servers you can target by name (session_create target, fleet_run, port_forward, file tools in a remote session), with tags and whether the last connection worked. Never shows keys.",
    input: Empty,
    output: ServerList,
    run: (c) => remote(c).servers(c.agent),
    render: (r) =>
      r.servers.length === 0
        ? "no servers registered (an operator adds them)"
        : r.servers.map((s) =>
          `${s.name}${s.tags.length ? ` [${s.tags.join(", ")}]` : ""} · ${
            s.reachable === undefined ? "not tried yet" : s.reachable ? "reachable" : "unreachable"
          }${s.last_error ? ` · ${s.last_error}` : ""}`
        ).join("\n"),
    annotations: { readOnlyHint: true },
  }),
  tool({
    name: "fleet_run",
    title: "Run a command on many servers",
    description:
      "Run one argv on servers chosen by name and/or tag (at most 256), at most 5 at once daemon-wide. Returns each server's status, exit code and output (all outputs together at most 2 MiB, redacted). One policy decision for the call; a confirm rule asks an operator once, naming the servers.",
    input: FleetRunInput,
    output: FleetResult,
    run: (c, a) => remote(c).fleetRun(c.agent, a, c.call),
    render: (r) => {
      const lines = [
        `fleet ${r.action_id} · ${r.summary.ok}/${r.summary.total} ok · ${r.summary.failed} failed · ${r.summary.unreachable} unreachable · ${r.duration_ms} ms`,
      ];
      for (const t of r.targets) {
        lines.push(
          `── ${t.server} · ${t.status}${
            t.exit_code === undefined ? "" : ` ${t.exit_code}`
          } · ${t.duration_ms} ms${t.truncated ? ` · truncated (${t.output_bytes} bytes)` : ""}${
            t.error ? ` · ${t.error}` : ""
          }`,
        );
        if (t.output) lines.push(t.output.replace(/\n$/, ""));
      }
      return lines.join("\n");
    },
  }),
  tool({
    name: "port_forward",
    title: "Forward a local port to a server",
    description:
      "Open a listener on 127.0.0.1 (local_port, or a free one) whose connections go to remote_host:remote_port as seen from the server. Yours only; at most 16 per agent, 64 connections each. Close it with port_forward_close.",
    input: PortForwardInput,
    output: ForwardView,
    run: (c, a) => remote(c).forwardOpen(c.agent, a),
    render: (f) =>
      `forward ${f.forward_id} · 127.0.0.1:${f.local_port} → ${f.remote_host}:${f.remote_port} via ${f.server}`,
  }),
  tool({
    name: "port_forward_list",
    title: "List your port forwards",
    description: "Your open port forwards with their connection and byte counts.",
    input: Empty,
    output: ForwardList,
    run: (c) => ({ forwards: remote(c).forwardList(c.agent) }),
    render: (r) =>
      r.forwards.length === 0
        ? "no forwards"
        : r.forwards.map((f) =>
          `${f.forward_id} · 127.0.0.1:${f.local_port} → ${f.remote_host}:${f.remote_port} via ${f.server} · ${f.connections} open`
        ).join("\n"),
    annotations: { readOnlyHint: true },
  }),
  tool({
    name: "port_forward_close",
    title: "Close a port forward",
    description: "Stop one of your port forwards; its open connections end.",
    input: ForwardIdInput,
    output: ForwardView,
    run: (c, a) => remote(c).forwardClose(c.agent, a.forward_id),
    render: (f) => `closed ${f.forward_id} · ${f.total_connections} connections served`,
  }),
  tool({
    name: "file_read",
    title: "Read a file",
    description:
      "Read a file (a page of at most 1 MiB from offset). Relative paths resolve against the session's cwd; in a session on a server the file is read there (SFTP). Text comes back as utf8, anything else as base64; sha256 when the page covers the whole file.",
    input: FileReadInput,
    output: FileReadResult,
    run: (c, a) => c.agents.files().read(c.agent, a),
    render: (r) => {
      const head = `${r.path} on ${r.target} · ${r.bytes} of ${r.size} bytes from ${r.offset}${
        r.eof ? "" : ` · more from offset ${r.next_offset}`
      }`;
      return r.encoding === "utf8" ? `${head}\n${r.content}` : `${head} · base64\n${r.content}`;
    },
    annotations: { readOnlyHint: true },
  }),
  tool({
    name: "file_write",
    title: "Write a file",
    description:
      "Write a whole file atomically (temp file + rename; at most 2 MiB; `content` at most 512 Ki characters) from `content` (text) or `base64`. Relative paths resolve against the session's cwd; in a session on a server it is written there (SFTP). Returns size and sha256.",
    input: FileWriteInput,
    output: FileWriteResult,
    run: (c, a) => c.agents.files().write(c.agent, a),
    render: (r) =>
      `wrote ${r.path} on ${r.target} · ${r.size} bytes · mode ${r.mode} · sha256 ${r.sha256}${
        r.created ? " · new file" : ""
      }`,
    annotations: { destructiveHint: true },
  }),
];
