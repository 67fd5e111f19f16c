/**
 * Black-box: the typed adapters through a spawned daemon and the real SDK client — file.patch on
 * real files under the configured roots (apply, verify, undo; policy and control-plane refusals),
 * http.request to a real local HTTP server (idempotency key, verify, no secret in the journal or
 * the audit), a mission step proven by a verified run, and a daemon killed between execute and
 * verify whose run the next daemon finishes exactly once.
 */
import assert from "node:assert/strict";
import { pollUntil } from "./_clients.ts";
import {
  call,
  homeWithConfig,
  operatorFetch,
  type RunningDaemon,
  startDaemon,
  stdioClient,
  tempHome,
} from "./_daemon.ts";

const TOKEN = "Bearer adapters-test-s3cret";

interface Tickets extends AsyncDisposable {
  url: string;
  created: () => number;
  keys: string[];
  authorized: () => boolean;
  /** While set, a POST creates its ticket and then waits before answering. */
  hold: PromiseWithResolvers<void> | undefined;
}

/** Tickets by id and by Idempotency-Key; POST creates (once per key), DELETE removes. */
function tickets(): Tickets {
  const byId = new Map<string, Record<string, unknown>>();
  const byKey = new Map<string, string>();
  let n = 0;
  let auth = true;
  const json = (status: number, body: unknown, headers: Record<string, string> = {}) =>
    new Response(JSON.stringify(body), {
      status,
      headers: { "content-type": "application/json", ...headers },
    });
  const t: Tickets = {
    url: "",
    created: () => n,
    keys: [],
    authorized: () => auth,
    hold: undefined,
    [Symbol.asyncDispose]: async () => {
      t.hold?.resolve();
      await server.shutdown();
    },
  };
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    const url = new URL(req.url);
    const body = await req.text();
    if (req.headers.get("authorization") !== TOKEN) {
      auth = false;
      return json(401, {});
    }
    if (req.method === "POST" && url.pathname === "/tickets") {
      const key = req.headers.get("idempotency-key") ?? "";
      t.keys.push(key);
      let id = byKey.get(key);
      if (id === undefined) {
        id = `t${++n}`;
        byId.set(id, { id, ...JSON.parse(body || "{}") });
        byKey.set(key, id);
      }
      if (t.hold) await t.hold.promise;
      return json(201, byId.get(id), { location: `/tickets/${id}` });
    }
    const m = /^\/tickets\/(by-key\/)?([^/]+)$/.exec(url.pathname);
    if (!m) return json(404, {});
    const id = m[1] ? byKey.get(decodeURIComponent(m[2]!)) : m[2]!;
    const ticket = id === undefined ? undefined : byId.get(id);
    if (req.method === "GET") return ticket ? json(200, ticket) : json(404, {});
    if (req.method === "DELETE" && ticket) {
      byId.delete(id!);
      return json(200, { deleted: id });
    }
    return json(404, {});
  });
  t.url = `http://127.0.0.1:${server.addr.port}`;
  return t;
}

function config(root: string, url: string, extra = ""): string {
  return `adapters:
  file_patch:
    roots: [${JSON.stringify(root)}]
  http:
    - name: tickets
      base_url: ${JSON.stringify(url)}
      headers: {Authorization: ${JSON.stringify(TOKEN)}}
      verify: {path: "/tickets/{id}"}
      reconcile: {path: "/tickets/by-key/{key}"}
      compensate: {method: DELETE, path: "/tickets/{id}"}
      timeout_ms: 20000
      cost: 2
policies:
  default:
    adapters:
      deny: ["file.patch:${root}/locked/**", "http.request:DELETE **"]
${extra}`;
}

const patch = (file: string, from: string, to: string) =>
  `--- a/${file}\n+++ b/${file}\n@@ -1 +1 @@\n-${from}\n+${to}\n`;

type Obj = Record<string, unknown>;
const code = (r: Obj) => (r.error as { code?: string } | undefined)?.code;

async function auditText(d: RunningDaemon): Promise<string> {
  const r = await operatorFetch(d)("/audit?n=1000");
  assert.equal(r.status, 200);
  return await r.text();
}

Deno.test("adapters: file.patch and http.request through the gateway, proven, undone, and a mission step they prove", async (t) => {
  const root = await Deno.makeTempDir({ prefix: "termada-adapt-root-" });
  await using srv = tickets();
  const home = await homeWithConfig(config(root, srv.url));
  try {
    await Deno.mkdir(`${root}/locked`);
    await Deno.writeTextFile(`${root}/app.conf`, "debug=1\n");
    await Deno.writeTextFile(`${root}/locked/prod.conf`, "debug=1\n");
    await using d = await startDaemon(home);
    await using c = await stdioClient(home, ["--agent", "dev"]);

    await t.step("adapter_list names what the config offers", async () => {
      const l = await call(c, "adapter_list", {});
      assert.deepEqual(l.adapters, ["file.patch", "http.request"]);
    });

    let patchRun = "";
    await t.step("file.patch applies, verifies by hash, and undoes", async () => {
      const r = await call(c, "adapter_run", {
        adapter: "file.patch",
        input: { patch: patch("app.conf", "debug=1", "debug=0"), root },
      });
      assert.equal(r.phase, "verified", JSON.stringify(r));
      assert.equal(r.verified, true);
      assert.equal(await Deno.readTextFile(`${root}/app.conf`), "debug=0\n");
      patchRun = r.run_id as string;
      const u = await call(c, "adapter_undo", { run_id: patchRun });
      assert.equal(u.phase, "compensated", JSON.stringify(u));
      assert.equal(await Deno.readTextFile(`${root}/app.conf`), "debug=1\n");
    });

    await t.step(
      "the policy denies a path; outside the roots and a stale patch are refused",
      async () => {
        const denied = await call(c, "adapter_run", {
          adapter: "file.patch",
          input: { patch: patch("locked/prod.conf", "debug=1", "debug=0"), root },
        });
        assert.equal(code(denied), "DENIED_BY_POLICY", JSON.stringify(denied));
        assert.equal(await Deno.readTextFile(`${root}/locked/prod.conf`), "debug=1\n");
        const outside = await call(c, "adapter_run", {
          adapter: "file.patch",
          input: { patch: patch("../escape.conf", "a", "b"), root },
        });
        assert.equal(code(outside), "DENIED_BY_POLICY", JSON.stringify(outside));
        const stale = await call(c, "adapter_run", {
          adapter: "file.patch",
          input: { patch: patch("app.conf", "debug=7", "debug=0"), root },
        });
        assert.equal(code(stale), "CONFLICT", JSON.stringify(stale));
        const audit = await auditText(d);
        assert.match(audit, /action\.denied[^\n]*"adapter"|"adapter"[^\n]*action\.denied/);
        const del = await call(c, "adapter_run", {
          adapter: "http.request",
          input: { target: "tickets", method: "DELETE", path: "/tickets/t1" },
        });
        assert.equal(code(del), "DENIED_BY_POLICY", JSON.stringify(del));
      },
    );

    await t.step("a patch of two files is decided file by file", async () => {
      await Deno.writeTextFile(`${root}/b.conf`, "x=1\n");
      const two = patch("app.conf", "debug=1", "debug=2") + patch("b.conf", "x=1", "x=2");
      const r = await call(c, "adapter_run", {
        adapter: "file.patch",
        input: { patch: two, root },
      });
      assert.equal(r.phase, "verified", JSON.stringify(r));
      const mixed = patch("app.conf", "debug=2", "debug=3") +
        patch("locked/prod.conf", "debug=1", "debug=3");
      const refused = await call(c, "adapter_run", {
        adapter: "file.patch",
        input: { patch: mixed, root },
      });
      assert.equal(code(refused), "DENIED_BY_POLICY", JSON.stringify(refused));
      assert.equal(await Deno.readTextFile(`${root}/app.conf`), "debug=2\n", "nothing written");
      await call(c, "adapter_undo", { run_id: r.run_id });
      assert.equal(await Deno.readTextFile(`${root}/app.conf`), "debug=1\n");
    });

    let httpRun = "";
    await t.step(
      "http.request creates once with an idempotency key and verifies by GET",
      async () => {
        const r = await call(c, "adapter_run", {
          adapter: "http.request",
          input: { target: "tickets", method: "POST", path: "/tickets", body: { title: "disk" } },
        });
        assert.equal(r.phase, "verified", JSON.stringify(r));
        assert.equal(srv.created(), 1);
        assert.match(srv.keys[0] ?? "", /^idem_[0-9a-f]{32}$/);
        assert.ok(srv.authorized(), "every request carried the configured header");
        httpRun = r.run_id as string;
        const journal = await Deno.readFile(`${home}/adapters.db`).catch(() => new Uint8Array());
        const wal = await Deno.readFile(`${home}/adapters.db-wal`).catch(() => new Uint8Array());
        const all = new TextDecoder().decode(journal) + new TextDecoder().decode(wal);
        assert.ok(!all.includes("adapters-test-s3cret"), "the header is in the journal");
        assert.ok(!(await auditText(d)).includes("adapters-test-s3cret"), "the header is audited");
      },
    );

    await t.step("a verified run proves a mission step; an older run does not", async () => {
      const m = await call(c, "mission_create", {
        goal: "Open a ticket about the disk",
        plan: ["open the ticket", "tell the team"],
      });
      const old = await call(c, "mission_update", {
        mission_id: m.mission_id,
        step_id: "s1",
        step_status: "passed",
        adapter_run_id: httpRun,
      });
      assert.equal(code(old), "INVALID_ARGUMENT", JSON.stringify(old));
      const r = await call(c, "adapter_run", {
        adapter: "http.request",
        input: { target: "tickets", method: "POST", path: "/tickets", body: { title: "again" } },
      });
      assert.equal(r.phase, "verified");
      const u = await call(c, "mission_update", {
        mission_id: m.mission_id,
        step_id: "s1",
        step_status: "passed",
        adapter_run_id: r.run_id,
      });
      const s1 = (u.steps as Obj[])[0]!;
      assert.equal(s1.verified, true, JSON.stringify(s1));
      assert.equal(s1.adapter_run_id, r.run_id);
      const rep = await call(c, "mission_report", { mission_id: m.mission_id });
      assert.match(String(rep.markdown), /adapter run `run_[0-9a-z]{12}`/);
      assert.match(String(rep.markdown), /Verified by runtime: 1 of 2 steps/);
    });
  } finally {
    await Deno.remove(home, { recursive: true });
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("adapters: a daemon killed between execute and verify; the next one finishes the run once", async () => {
  const root = await Deno.makeTempDir({ prefix: "termada-adapt-root-" });
  await using srv = tickets();
  const home = await homeWithConfig(config(root, srv.url));
  try {
    {
      await using d = await startDaemon(home);
      await using c = await stdioClient(home, ["--agent", "dev"]);
      srv.hold = Promise.withResolvers<void>();
      const pending = call(c, "adapter_run", {
        adapter: "http.request",
        input: { target: "tickets", method: "POST", path: "/tickets", body: { title: "crash" } },
      }).catch(() => undefined);
      await pollUntil(() => Promise.resolve(srv.created() === 1 || undefined), "the POST arrived");
      // The side effect happened; the daemon dies before it hears the answer.
      d.proc.kill("SIGKILL");
      await d.proc.status;
      srv.hold.resolve();
      srv.hold = undefined;
      await pending;
    }
    await using d2 = await startDaemon(home);
    await using c2 = await stdioClient(home, ["--agent", "dev"]);
    const listed = await pollUntil(
      async () => {
        const l = await call(c2, "adapter_list", {});
        const runs = l.runs as Obj[];
        return runs.length === 1 && runs[0]!.phase === "verified" ? runs : undefined;
      },
      "the run resumed and verified",
      20_000,
    );
    const runId = listed[0]!.run_id as string;
    assert.equal(srv.created(), 1, "exactly one ticket");
    const s = await call(c2, "adapter_status", { run_id: runId });
    assert.equal(s.verified, true, JSON.stringify(s));
    // Operators see every agent's runs.
    const all = await (await operatorFetch(d2)("/adapters")).json() as {
      runs: { run_id: string; phase: string }[];
      agents: string[];
    };
    assert.deepEqual(all.runs.map((r) => [r.run_id, r.phase]), [[runId, "verified"]]);
    assert.deepEqual(all.agents, ["dev"]);
  } finally {
    await Deno.remove(home, { recursive: true });
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("adapters: a target's cost is the run's estimate, and a cost budget refuses what would exceed it", async () => {
  const root = await Deno.makeTempDir({ prefix: "termada-adapt-root-" });
  await using srv = tickets();
  const budget = `    budgets:
      - name: spend
        scope: principal
        metric: cost
        limit: 5
        window: 1h
        kinds: [adapter]
`;
  const home = await homeWithConfig(config(root, srv.url, budget));
  try {
    await using _d = await startDaemon(home);
    await using c = await stdioClient(home, ["--agent", "dev"]);
    const post = () =>
      call(c, "adapter_run", {
        adapter: "http.request",
        input: { target: "tickets", method: "POST", path: "/tickets", body: { title: "x" } },
      });
    assert.equal((await post()).phase, "verified");
    assert.equal((await post()).phase, "verified");
    const third = await post();
    assert.equal(code(third), "BUDGET_EXCEEDED", JSON.stringify(third));
    assert.equal(srv.created(), 2, "the refused run sent nothing");
  } finally {
    await Deno.remove(home, { recursive: true });
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("adapters: a patch never reaches the daemon's own files, through a symlinked home either", async () => {
  const real = await tempHome();
  const outer = await Deno.makeTempDir({ prefix: "termada-adapt-link-" });
  const home = `${outer}/home`;
  await Deno.symlink(real, home);
  await using srv = tickets();
  try {
    // The operator made the mistake of a root that holds the daemon's state directory.
    await Deno.writeTextFile(
      `${home}/config.yaml`,
      config(outer, srv.url).replace(
        `roots: [${JSON.stringify(outer)}]`,
        `roots: [${JSON.stringify(outer)}, ${JSON.stringify(real)}]`,
      ),
    );
    await using _d = await startDaemon(home);
    await using c = await stdioClient(home, ["--agent", "dev"]);
    const before = await Deno.readTextFile(`${real}/config.yaml`);
    const first = before.split("\n")[0]!;
    for (const root of [home, real]) {
      const r = await call(c, "adapter_run", {
        adapter: "file.patch",
        input: { patch: patch("config.yaml", first, "policies: {}"), root },
      });
      assert.equal(code(r), "DENIED_BY_POLICY", `${root}: ${JSON.stringify(r)}`);
      assert.match(String((r.error as { message?: string }).message), /control plane/);
    }
    assert.equal(await Deno.readTextFile(`${real}/config.yaml`), before);
  } finally {
    await Deno.remove(outer, { recursive: true });
    await Deno.remove(real, { recursive: true });
  }
});
