import assert from "node:assert/strict";
import { cleanText, cut, MESSAGE_LIMITS, type Notification, renderMessage } from "./message.ts";

const keep = (s: string) => s;

Deno.test("a message passes every field through redact before it is cut", () => {
  const secret = "hunter2-very-secret";
  const m = renderMessage([{
    kind: "approval_pending",
    actor: "builder",
    approval_id: "apr_1",
    command: `PGPASSWORD=${secret} psql -c 'select 1'`,
    reason: `matched ${secret}`,
  }], { redact: (s) => s.split(secret).join("[secret]") });
  assert.equal(m.title, "Approval waiting");
  assert.equal(m.urgent, true);
  assert.ok(!m.body.includes(secret));
  assert.match(m.body, /PGPASSWORD=\[secret\] psql/);
  assert.match(m.body, /Approval apr_1 for agent "builder"/);
});

Deno.test("a redactor that throws withholds the field instead of sending it", () => {
  const m = renderMessage([{ kind: "job_failed", job_id: "job_1", command: "echo top-secret" }], {
    redact: () => {
      throw new Error("boom");
    },
  });
  assert.ok(!m.body.includes("top-secret"));
  assert.match(m.body, /withheld/);
});

Deno.test("commands are cut to 200 characters and flattened to one line", () => {
  const long = "x".repeat(5000);
  const text = cleanText(`echo ${long}\n\u001b[31mred\u202e`, MESSAGE_LIMITS.commandChars, keep);
  assert.equal(text.length, MESSAGE_LIMITS.commandChars);
  assert.ok(text.endsWith("…"));
  assert.equal(cleanText("a\nb\u0007c\u202ed", 50, keep), "a b c d");
  assert.equal(cut("ab😀", 3), "ab…");
});

Deno.test("a batch of one kind becomes one message with a count", () => {
  const batch: Notification[] = Array.from({ length: 30 }, (_, i) => ({
    kind: "approval_pending",
    approval_id: `apr_${i}`,
    command: "make deploy",
  }));
  const m = renderMessage(batch, { redact: keep, dropped: 3 });
  assert.equal(m.title, "30 approvals waiting");
  assert.equal(m.count, 30);
  const lines = m.body.split("\n");
  assert.equal(lines.length, MESSAGE_LIMITS.batchLines + 2);
  assert.equal(lines[MESSAGE_LIMITS.batchLines], "…and 20 more");
  assert.match(lines.at(-1)!, /^3 earlier notifications were dropped/);
});

Deno.test("a mixed batch lists stop-all first and is urgent", () => {
  const m = renderMessage([
    { kind: "job_failed", job_id: "job_1", outcome: "timed out" },
    { kind: "stop_all", actor: "alice", actor_kind: "operator", outcome: "done" },
  ], { redact: keep });
  assert.equal(m.title, "2 notifications");
  assert.equal(m.urgent, true);
  assert.deepEqual(m.body.split("\n"), [
    'Stop-all by operator "alice": done',
    "Job job_1 timed out",
  ]);
});
