/**
 * One example call per tool, appended to its description ("Example: {…}"), so a model sees a
 * well-formed call for every tool. `tools_test.ts` holds each to the tool's input schema: an
 * example that drifts from its schema fails the tests, and a tool without one too.
 */
export const TOOL_EXAMPLES: Readonly<Record<string, Record<string, unknown>>> = {
  exec_run: { command: ["npm test"], timeout_ms: 120000 },
  exec_start: { command: ["npm", "run", "dev"], mode: "background" },
  exec_poll: { job_id: "job_4kz8q2m1x9ab", cursor: "c1024", wait_ms: 5000 },
  exec_wait: { job_id: "job_4kz8q2m1x9ab", until: { pattern: "listening on" }, timeout_ms: 60000 },
  exec_write: { job_id: "job_4kz8q2m1x9ab", keys: ["Escape", ":wq", "Enter"] },
  exec_signal: { job_id: "job_4kz8q2m1x9ab", signal: "INT" },
  exec_kill: { job_id: "job_4kz8q2m1x9ab", grace_ms: 2000 },
  exec_list: { filter: "active" },
  session_create: { cwd: "/home/me/project", shell: "bash", env: { NODE_ENV: "test" } },
  session_list: {},
  session_close: { session_id: "ses_7hd2k9s0qv3n" },
  session_screen: { session_id: "ses_7hd2k9s0qv3n", since: "s1x9k2.4" },
  capabilities: {},
  mission_create: {
    goal: "The api service answers /healthz with 200 again",
    plan: ["Find why it fails", "Fix the config", "Restart it", "Check /healthz"],
  },
  mission_get: { mission_id: "msn_2m8x4k1z9q0a" },
  mission_list: { status: "running" },
  mission_update: {
    mission_id: "msn_2m8x4k1z9q0a",
    step_id: "s1",
    step_status: "passed",
    job_id: "job_4kz8q2m1x9ab",
  },
  mission_resume: { mission_id: "msn_2m8x4k1z9q0a" },
  mission_report: { mission_id: "msn_2m8x4k1z9q0a", format: "markdown" },
  vault_list: {},
  server_list: {},
  fleet_run: { command: ["uptime"], tags: ["web"], concurrency: 5 },
  port_forward: { server: "staging", remote_host: "127.0.0.1", remote_port: 5432 },
  port_forward_list: {},
  port_forward_close: { forward_id: "fwd_9q2k8m1x4z0b" },
  file_read: { path: "src/main.ts" },
  file_write: { path: "notes/todo.md", content: "- fix the flaky test\n" },
  snapshot_create: { path: ".", label: "before refactor" },
  snapshot_list: { path: "/home/me/project" },
  adapter_run: {
    adapter: "file.patch",
    input: { patch: "--- a/app.conf\n+++ b/app.conf\n@@ -1 +1 @@\n-debug=1\n+debug=0\n" },
  },
  adapter_status: { run_id: "run_4kz8q2m1x9ab" },
  adapter_list: { limit: 20 },
  adapter_undo: { run_id: "run_4kz8q2m1x9ab" },
};
