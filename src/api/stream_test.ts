import assert from "node:assert/strict";
import { OPERATOR_TOKEN, operatorTestApp } from "./_test_app.ts";

const TOKEN = OPERATOR_TOKEN;
const setup = (busCapacity = 1000) => operatorTestApp({ busCapacity });

interface SseMessage {
  id?: string;
  event?: string;
  data: string;
}

/** Reads SSE messages until `until` says stop (or `max` messages); then cancels the stream. */
async function readSse(
  res: Response,
  until: (m: SseMessage, all: SseMessage[]) => boolean,
): Promise<SseMessage[]> {
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  const out: SseMessage[] = [];
  let buf = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += value;
      let sep: number;
      while ((sep = buf.indexOf("\n\n")) >= 0) {
        const block = buf.slice(0, sep);
        buf = buf.slice(sep + 2);
        if (block.startsWith(":")) continue;
        const m: SseMessage = { data: "" };
        for (const line of block.split("\n")) {
          const i = line.indexOf(":");
          const k = line.slice(0, i);
          const v = line.slice(i + 1).replace(/^ /, "");
          if (k === "id") m.id = v;
          else if (k === "event") m.event = v;
          else if (k === "data") m.data += v;
        }
        out.push(m);
        if (until(m, out)) return out;
      }
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
  return out;
}

Deno.test("operator lists: sessions and jobs of every agent; no token, no answer", async () => {
  await using h = await setup();
  await h.te.engine.run("alice", { command: ["echo", "a"] });
  await h.te.engine.run("bob", { command: ["echo", "b"] });
  const s = await (await h.get("/api/sessions")).json();
  assert.deepEqual(s.sessions.map((x: { owner: string }) => x.owner).sort(), ["alice", "bob"]);
  const j = await (await h.get("/api/jobs")).json();
  assert.equal(j.jobs.length, 2);
  const anon = await h.app.app.fetch(new Request("http://termada/api/sessions"), {
    listener: "unix",
  });
  assert.equal(anon.status, 401);
  await anon.body?.cancel();
});

Deno.test("the events stream replays, follows live, and resumes after Last-Event-ID", async () => {
  await using h = await setup();
  await h.te.engine.run("alice", { command: ["echo", "one"] });
  const first = await readSse(await h.get("/api/events"), (m) => m.event === "job.requested");
  const id = Number(first.at(-1)!.id);
  assert.ok(id >= 1);
  // Live: the next run arrives on an open stream.
  const live = h.get("/api/events", { "last-event-id": String(id) });
  const later = h.te.engine.run("alice", { command: ["echo", "two"] });
  const msgs = await readSse(await live, (m) => m.event === "job.requested");
  await later;
  assert.ok(msgs.every((m) => Number(m.id) > id), "only events after the given id");
  assert.deepEqual(JSON.parse(msgs.at(-1)!.data).data.command, ["echo", "two"]);
});

Deno.test("the events stream asks for a resync when the id is older than the window", async () => {
  await using h = await setup(3);
  for (let i = 0; i < 6; i++) h.bus.publish("tick", { i });
  const msgs = await readSse(
    await h.get("/api/events", { "last-event-id": "1" }),
    (_m, all) => all.length >= 4,
  );
  assert.equal(msgs[0]!.event, "resync");
  assert.deepEqual(msgs.slice(1).map((m) => JSON.parse(m.data).data.i), [3, 4, 5]);
});

Deno.test("a session's raw stream replays, follows live, and resumes by cursor without duplicates", async () => {
  await using h = await setup();
  const e = h.te.engine;
  const r = await e.run("alice", { command: ["echo", "first-output"] });
  const dec = (m: SseMessage) =>
    new TextDecoder().decode(Uint8Array.from(atob(m.data), (c) => c.charCodeAt(0)));
  const replay = await readSse(
    await h.get(`/api/sessions/${r.session_id}/stream`),
    (_m, all) => all.map(dec).join("").includes("first-output\r\n"),
  );
  const text = replay.map(dec).join("");
  assert.match(text, /echo first-output\r\nfirst-output\r\n/);
  const cursor = replay.at(-1)!.id!;
  const live = h.get(`/api/sessions/${r.session_id}/stream`, { "last-event-id": cursor });
  const run = e.run("alice", { command: ["echo", "second-output"], session: r.session_id });
  const more = await readSse(
    await live,
    (_m, all) => all.map(dec).join("").includes("second-output\r\n"),
  );
  await run;
  const moreText = more.map(dec).join("");
  assert.ok(!moreText.includes("first-output"), "nothing before the cursor again");
  assert.match(moreText, /second-output/);
  const bad = await h.get(`/api/sessions/${r.session_id}/stream?cursor=999999999`);
  assert.equal(bad.status, 400);
  await bad.body?.cancel();
  const missing = await h.get(`/api/sessions/ses_nope/stream`);
  assert.equal(missing.status, 404);
  await missing.body?.cancel();
});

Deno.test("an operator kills any agent's job: audited first, agents' jobs end as killed", async () => {
  const records: { actor: unknown; event: string; data?: Record<string, unknown> }[] = [];
  let statusWhenAudited: string | undefined;
  await using h = await operatorTestApp({
    audit: (log) => ({
      append: (actor, event, data) => {
        records.push({ actor, event, data });
        if (event === "job.killed_by_operator") {
          statusWhenAudited = h.te.ops.job(String(data?.job_id)).status;
        }
        return log.append(actor, event, data);
      },
      write: (actor, event, data) => log.write(actor, event, data),
      appendDurable: (actor, event, data) => log.appendDurable(actor, event, data),
      get healthy() {
        return log.healthy;
      },
    }),
  });
  const { te, app } = h;
  try {
    const post = (path: string, body: unknown, token = TOKEN) =>
      app.app.fetch(
        new Request(`http://termada${path}`, {
          method: "POST",
          headers: { authorization: `Bearer ${token}`, "x-termada-operator": "dash" },
          body: JSON.stringify(body),
        }),
        { listener: "unix" },
      );
    const started = await te.engine.start("alice", { command: ["sleep 300"] });
    const denied = await post(`/api/jobs/${started.job_id}/kill`, {}, "agent-token");
    assert.equal(denied.status, 401);
    await denied.body?.cancel();
    const bad = await post(`/api/jobs/${started.job_id}/kill`, { grace_ms: -1 });
    assert.equal(bad.status, 400);
    await bad.body?.cancel();
    const missing = await post(`/api/jobs/job_nope/kill`, {});
    assert.equal(missing.status, 404);
    await missing.body?.cancel();

    const res = await post(`/api/jobs/${started.job_id}/kill`, { grace_ms: 200 });
    assert.equal(res.status, 200);
    const body = await res.json();
    assert.equal(body.job.status, "killed");
    assert.equal(body.job.owner, "alice");
    const i = records.findIndex((r) => r.event === "job.killed_by_operator");
    assert.ok(i >= 0, "audited");
    assert.deepEqual(records[i]!.actor, { kind: "operator", id: "dash" });
    assert.equal(records[i]!.data?.job_id, started.job_id);
    assert.equal(records[i]!.data?.owner, "alice");
    assert.equal(statusWhenAudited, "running", "recorded before the job was stopped");
    const view = await te.engine.poll("alice", { job_id: started.job_id });
    assert.equal(view.status, "killed");
  } finally {
    await app.close(); // h closes the gateway and the engine
  }
});

Deno.test("takeover over the API: agents wait, the operator types, release hands back", async () => {
  await using h = await setup();
  const e = h.te.engine;
  const r = await e.run("alice", { command: ["echo", "ready"] });
  const post = (path: string, body?: unknown) =>
    h.app.app.fetch(
      new Request(`http://termada${path}`, {
        method: "POST",
        headers: { authorization: `Bearer ${TOKEN}`, "x-termada-operator": "dash" },
        body: body === undefined ? undefined : JSON.stringify(body),
      }),
      { listener: "unix" },
    );
  const t = await post(`/api/sessions/${r.session_id}/takeover`);
  assert.equal(t.status, 200);
  assert.equal((await t.json()).session.state, "operator");
  await assert.rejects(() => e.run("alice", { command: ["echo", "x"] }), /operator holds/);
  const stream = h.get(`/api/sessions/${r.session_id}/stream`, {
    "last-event-id": String(e.sessionOf("alice", r.session_id).ring.totalBytes),
  });
  const typed = await post(`/api/sessions/${r.session_id}/input`, { data: "echo from-op\r" });
  assert.equal(typed.status, 200);
  await typed.body?.cancel();
  const dec = (m: SseMessage) =>
    new TextDecoder().decode(Uint8Array.from(atob(m.data), (ch) => ch.charCodeAt(0)));
  await readSse(await stream, (_m, all) => all.map(dec).join("").includes("from-op\r\n"));
  const other = await h.app.app.fetch(
    new Request(`http://termada/api/sessions/${r.session_id}/input`, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}`, "x-termada-operator": "someone" },
      body: JSON.stringify({ data: "ls\r" }),
    }),
    { listener: "unix" },
  );
  assert.equal(other.status, 400, "only the operator holding the lease types");
  await other.body?.cancel();
  // The operator's command is an operator job; let it finish before handing back.
  for (let i = 0; i < 300; i++) {
    const op = h.te.ops.jobs(10).find((j) => j.owner === "operator:dash");
    if (op?.status === "exited" && h.te.ops.sessions()[0]?.state === "operator") break;
    await new Promise((res) => setTimeout(res, 10));
  }
  await e.sessionOf("alice", r.session_id).ready;
  const rel = await post(`/api/sessions/${r.session_id}/release`);
  assert.equal(rel.status, 200);
  await rel.body?.cancel();
  assert.equal((await e.run("alice", { command: ["echo", "back"] })).output, "back\n");
  assert.ok(h.bus.since().events.some((ev) => ev.type === "session.takeover"));
});

Deno.test("an operator resizes any session: audited, bad sizes refused, stty follows", async () => {
  await using h = await setup();
  const e = h.te.engine;
  const r = await e.run("alice", { command: ["echo", "ready"] });
  const post = (path: string, body?: unknown) =>
    h.app.app.fetch(
      new Request(`http://termada${path}`, {
        method: "POST",
        headers: { authorization: `Bearer ${TOKEN}`, "x-termada-operator": "dash" },
        body: body === undefined ? undefined : JSON.stringify(body),
      }),
      { listener: "unix" },
    );
  for (
    const bad of [
      { cols: 9, rows: 20 },
      { cols: 80, rows: 1 },
      { cols: 1001, rows: 20 },
      {
        cols: 80,
        rows: 501,
      },
      { cols: "80", rows: 20 },
      {},
    ]
  ) {
    const res = await post(`/api/sessions/${r.session_id}/resize`, bad);
    assert.equal(res.status, 400, JSON.stringify(bad));
    await res.body?.cancel();
  }
  const missing = await post(`/api/sessions/nope/resize`, { cols: 80, rows: 20 });
  assert.equal(missing.status, 404);
  await missing.body?.cancel();
  const ok = await post(`/api/sessions/${r.session_id}/resize`, { cols: 123, rows: 45 });
  assert.equal(ok.status, 200);
  assert.deepEqual(await ok.json(), { ok: true, cols: 123, rows: 45 });
  const ev = h.bus.since().events.find((x) => x.type === "session.resized");
  assert.ok(ev, "audited");
  const stty = await e.run("alice", { session_id: r.session_id, command: ["stty", "size"] });
  assert.equal(stty.output.trim(), "45 123");
});

Deno.test("an operator reads any agent's job output a page at a time", async () => {
  await using h = await setup();
  const r = await h.te.engine.run("alice", { command: ["printf", "line-one\\nline-two\\n"] });
  const first = await h.get(`/api/jobs/${r.job_id}/output?max_bytes=9`);
  assert.equal(first.status, 200);
  const p1 = await first.json();
  assert.equal(p1.owner, "alice");
  assert.equal(p1.status, "exited");
  assert.equal(p1.has_more, true);
  assert.equal(typeof p1.next_cursor, "string");
  const second = await h.get(
    `/api/jobs/${r.job_id}/output?cursor=${encodeURIComponent(p1.next_cursor)}`,
  );
  const p2 = await second.json();
  assert.equal(p2.has_more, false);
  assert.equal(p1.output + p2.output, "line-one\nline-two\n");
  const bad = await h.get(`/api/jobs/${r.job_id}/output?cursor=not-a-cursor`);
  assert.equal(bad.status, 400);
  await bad.body?.cancel();
  const badMax = await h.get(`/api/jobs/${r.job_id}/output?max_bytes=zero`);
  assert.equal(badMax.status, 400);
  await badMax.body?.cancel();
  const missing = await h.get(`/api/jobs/job_nope/output`);
  assert.equal(missing.status, 404);
  await missing.body?.cancel();
  const anon = await h.app.app.fetch(new Request(`http://termada/api/jobs/${r.job_id}/output`), {
    listener: "unix",
  });
  assert.equal(anon.status, 401);
  await anon.body?.cancel();
});
