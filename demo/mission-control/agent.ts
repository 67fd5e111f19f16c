/**
 * The scripted agent of the Mission Control demo: an MCP client (the official SDK, no LLM) that
 * works one mission through Termada exactly as a model would, and stops loudly at the first
 * thing that is not what the contract promises.
 *
 *   TERMADA_DEMO_TOKEN=… deno run --config deno.json --allow-net=127.0.0.1 --allow-env \
 *     --allow-read=WORKDIR --allow-write=WORKDIR demo/mission-control/agent.ts \
 *     --mcp http://127.0.0.1:PORT/mcp --service http://127.0.0.1:PORT/ --workdir WORKDIR
 *
 * Flow: mission_create → probe (HTTP 503) → diagnose → guarded repair (parked until an operator
 * approves) → verify (HTTP 200) → steps passed with their job ids → succeeded → report.md.
 * Along the way it makes two claims the runtime must refuse (a failing job, a job still waiting
 * for approval) and checks that they are refused.
 */
import { parseArgs } from "node:util";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

type Json = Record<string, unknown>;

const enc = new TextEncoder();
function say(text: string): void {
  Deno.stdout.writeSync(enc.encode(text + "\n"));
}

class DemoFailure extends Error {}

function fail(what: string, got?: unknown): never {
  throw new DemoFailure(
    what + (got === undefined ? "" : `\n  got: ${JSON.stringify(got, null, 2)}`),
  );
}

function expect(ok: boolean, what: string, got?: unknown): void {
  if (!ok) fail(what, got);
}

const { values } = parseArgs({
  args: Deno.args,
  options: {
    mcp: { type: "string" },
    service: { type: "string" },
    workdir: { type: "string" },
  },
});
const mcpUrl = values.mcp ?? Deno.env.get("TERMADA_MCP_URL");
const serviceUrl = values.service ?? Deno.env.get("DEMO_SERVICE_URL");
const workdir = values.workdir ?? Deno.env.get("DEMO_WORKDIR");
const token = Deno.env.get("TERMADA_DEMO_TOKEN");
if (!mcpUrl || !serviceUrl || !workdir || !token) {
  say(
    "usage: TERMADA_DEMO_TOKEN=… agent.ts --mcp URL --service URL --workdir DIR " +
      "(or TERMADA_MCP_URL, DEMO_SERVICE_URL, DEMO_WORKDIR)",
  );
  Deno.exit(2);
}

const client = new Client({ name: "mission-control-demo", version: "1.0.0" });

/** Calls a tool; an error result throws with its code. Returns structuredContent. */
async function call(name: string, args: Json, timeoutMs = 90_000): Promise<Json> {
  const r = await client.callTool({ name, arguments: args }, undefined, {
    timeout: timeoutMs,
    resetTimeoutOnProgress: true,
  });
  const sc = (r.structuredContent ?? {}) as Json;
  if (r.isError) {
    const e = (sc.error ?? {}) as Json;
    throw new ToolError(name, String(e.code ?? "UNKNOWN"), String(e.message ?? "(no message)"));
  }
  return sc;
}

class ToolError extends Error {
  constructor(readonly tool: string, readonly code: string, message: string) {
    super(`${tool} failed: ${code}: ${message}`);
  }
}

/** Calls a tool that must refuse; returns the error. */
async function refused(name: string, args: Json, code: string): Promise<ToolError> {
  try {
    const r = await call(name, args);
    return fail(`${name} accepted a claim it must refuse (expected ${code})`, r);
  } catch (e) {
    if (!(e instanceof ToolError)) throw e;
    expect(e.code === code, `${name} refused with ${e.code}, expected ${code}: ${e.message}`);
    return e;
  }
}

function step(mission: Json, id: string): Json {
  const s = (mission.steps as Json[]).find((x) => x.step_id === id);
  return s ?? fail(`mission has no step ${id}`, mission.steps);
}

function header(text: string): void {
  say(`\n== ${text}`);
}

function showJob(j: Json): void {
  say(
    `   job ${j.job_id}: ${j.status}${j.exit_code === undefined ? "" : ` (exit ${j.exit_code})`}`,
  );
  const out = String(j.output ?? "").trimEnd();
  if (out) { for (const line of out.split("\n")) say(`   │ ${line}`); }
}

/**
 * exec_run in the mission's session, as an argv job the daemon spawns itself (`mode:
 * "background"`: the session's cwd and env, its exit status from the kernel — what makes a step
 * verified); a finished job is returned as is.
 */
async function run(session: string, command: string[]): Promise<Json> {
  say(`   $ ${command.length === 1 ? command[0] : JSON.stringify(command)}`);
  return await call("exec_run", { command, session, mode: "background", timeout_ms: 30_000 });
}

function mustExit0(j: Json, what: string): void {
  expect(
    j.status === "exited" && j.exit_code === 0,
    `${what}: expected the job to exit 0`,
    { status: j.status, exit_code: j.exit_code, reason: j.reason, output: j.output },
  );
}

async function markPassed(missionId: string, stepId: string, jobId: unknown, note: string) {
  const m = await call("mission_update", {
    mission_id: missionId,
    step_id: stepId,
    step_status: "passed",
    job_id: jobId,
    note,
  });
  const s = step(m, stepId);
  expect(
    s.status === "passed" && s.verified === true && s.job_id === jobId,
    `${stepId} should be passed and verified by the runtime with ${jobId}`,
    s,
  );
  const ev = s.evidence as Json | undefined;
  expect(ev?.job_id === jobId && ev?.exit_code === 0, `${stepId} evidence is not the job`, ev);
  say(`   ✔ ${stepId} passed, verified by runtime (evidence ${jobId})`);
  return m;
}

const GOAL = "Bring the demo service back: it answers HTTP 503. Find the cause, fix it with the " +
  "approved repair script (repair.sh, which needs an operator's approval), and prove that the " +
  `service answers HTTP 200 at ${serviceUrl}.`;
const PLAN = [
  "Probe the service and confirm the outage (HTTP 503)",
  "Diagnose the cause from service.log and app.conf",
  "Run the repair script ./repair.sh under operator approval",
  "Verify that the service answers HTTP 200",
];

async function main(): Promise<void> {
  const transport = new StreamableHTTPClientTransport(new URL(mcpUrl!), {
    requestInit: { headers: { authorization: `Bearer ${token}` } },
  });
  await client.connect(transport);
  try {
    const caps = await call("capabilities", {});
    say(`Connected to Termada as agent "${caps.agent}" (${mcpUrl})`);
    // listTools arms the SDK's output-schema checks; Termada's declared outputs admit the
    // {error} shape, so refused claims below still arrive as error results.
    const listed = await client.listTools();
    const tools = listed.tools.map((t: { name: string }) => t.name);
    for (const t of ["mission_create", "mission_update", "mission_get", "mission_report"]) {
      expect(tools.includes(t), `the daemon does not offer the MCP tool ${t}`, tools);
    }

    header("mission_create");
    let m = await call("mission_create", {
      title: "Repair the demo service (HTTP 503)",
      goal: GOAL,
      plan: PLAN,
      cwd: workdir,
    });
    const id = String(m.mission_id);
    const session = String(m.session_id);
    expect(/^msn_/.test(id), "mission_create returned no mission_id", m);
    expect(typeof m.session_id === "string", "the new mission has no session_id", m);
    expect(m.status === "planned", `a new mission should be planned, not ${m.status}`, m);
    expect(
      (m.steps as Json[]).map((s) => s.step_id).join(",") === "s1,s2,s3,s4",
      "the plan should be steps s1…s4",
      m.steps,
    );
    say(`   mission ${id} (${m.status}), session ${session}`);
    PLAN.forEach((p, i) => say(`   s${i + 1}. ${p}`));

    header("s1: probe the service");
    // Each probe's exit status is its assertion: grep -x exits 0 only on that exact status line.
    const probe = await run(session, [
      `curl -sS -o /dev/null -w 'HTTP %{http_code}\\n' ${serviceUrl} | grep -x 'HTTP 503'`,
    ]);
    showJob(probe);
    mustExit0(probe, "probe (expects HTTP 503)");
    expect(String(probe.output).trim() === "HTTP 503", "the probe should observe HTTP 503", probe);
    m = await markPassed(id, "s1", probe.job_id, "Observed HTTP 503: the outage is real.");
    expect(m.status === "running", `after the first job the mission should be running`, m.status);

    // A claim the runtime must refuse: a check that failed cannot prove the service works.
    say("   (a false claim) curl -f exits 22 on a 503; try to mark s4 passed with it:");
    const failing = await run(session, ["curl", "-fsS", serviceUrl!]);
    showJob(failing);
    expect(
      failing.status === "exited" && failing.exit_code !== 0,
      "curl -f against the broken service should fail",
      failing,
    );
    const e1 = await refused("mission_update", {
      mission_id: id,
      step_id: "s4",
      step_status: "passed",
      job_id: failing.job_id,
    }, "INVALID_ARGUMENT");
    say(`   ✔ refused by the runtime: ${e1.message}`);

    header("s2: diagnose");
    const diag = await run(session, [
      "tail -n 3 service.log && grep -n data_dir app.conf && ls -d data*",
    ]);
    showJob(diag);
    mustExit0(diag, "diagnosis");
    const out = String(diag.output);
    expect(/data_dir.*missing/.test(out), "service.log should name the missing data_dir", out);
    expect(/data_dir=\.\/data-v2/.test(out), "app.conf should show data_dir=./data-v2", out);
    await markPassed(
      id,
      "s2",
      diag.job_id,
      "app.conf points data_dir at ./data-v2, which does not exist; ./data holds the data.",
    );

    header("s3: repair under operator approval");
    const repair = await run(session, ["./repair.sh"]);
    expect(
      repair.status === "pending_approval" && typeof repair.approval_id === "string",
      "the policy should park ./repair.sh for approval",
      repair,
    );
    const approval = String(repair.approval_id);
    m = await call("mission_get", { mission_id: id });
    expect(m.status === "needs_attention", "a parked job should make the mission needs_attention", {
      status: m.status,
    });
    const pend = (m.pending_approvals as Json[]).map((a) => a.approval_id);
    expect(pend.includes(approval), "the mission should list the pending approval", pend);
    say(`   job ${repair.job_id} is parked: pending_approval ${approval}`);

    // Another claim the runtime must refuse: a job that has not run yet proves nothing.
    const e2 = await refused("mission_update", {
      mission_id: id,
      step_id: "s3",
      step_status: "passed",
      job_id: repair.job_id,
    }, "INVALID_ARGUMENT");
    say(`   ✔ claiming s3 before the repair ran is refused: ${e2.message}`);

    say("");
    say("   ┌───────────────────────────────────────────────────────────────────────────");
    say(`   │ waiting for operator approval: termada approve ${approval}`);
    say("   │ (or approve it in the dashboard: Approvals)");
    say("   └───────────────────────────────────────────────────────────────────────────");
    let fixed: Json = repair;
    for (let i = 0; i < 120 && !isFinal(fixed.status); i++) {
      fixed = await call("exec_wait", {
        job_id: repair.job_id,
        until: { exit: true },
        timeout_ms: 30_000,
      });
    }
    showJob(fixed);
    mustExit0(fixed, "repair.sh (after approval)");
    expect(/data_dir/.test(String(fixed.output)), "repair.sh should say what it changed", fixed);
    m = await markPassed(
      id,
      "s3",
      repair.job_id,
      "repair.sh set data_dir=./data after the operator approved it.",
    );
    const appr = (step(m, "s3").evidence as Json).approval as Json | undefined;
    expect(
      appr?.approval_id === approval && appr?.status === "approved",
      "the s3 evidence should carry the approval",
      appr,
    );
    say(`   approval ${approval}: ${appr!.status} by ${appr!.decided_by}`);

    header("s4: verify HTTP 200");
    const verify = await run(session, [
      `curl -fsS -w '\\nHTTP %{http_code}\\n' ${serviceUrl} | grep -x 'HTTP 200'`,
    ]);
    showJob(verify);
    mustExit0(verify, "final probe (expects HTTP 200)");
    expect(
      String(verify.output).trim() === "HTTP 200",
      "the final probe must see HTTP 200",
      verify,
    );
    await markPassed(id, "s4", verify.job_id, "Observed HTTP 200: the service works again.");

    header("mission_update: succeeded");
    m = await call("mission_update", {
      mission_id: id,
      status: "succeeded",
      summary: "The service answered 503 because app.conf pointed data_dir at ./data-v2, which " +
        "does not exist. The operator approved repair.sh, which set data_dir=./data; the final " +
        "probe observed HTTP 200.",
    });
    const prog = m.progress as Json;
    expect(m.status === "succeeded", "the mission should be succeeded", m.status);
    expect(prog.passed === 4 && prog.total === 4, "every step should be passed", prog);
    say(`   mission ${id}: ${m.status}, ${prog.passed}/${prog.total} steps verified`);

    header("mission_report");
    const rep = await call("mission_report", { mission_id: id });
    const md = String(rep.markdown ?? "");
    expect(md.length > 0, "mission_report returned no markdown", rep);
    const digest = await sha256(md);
    expect(digest === rep.sha256, "the report's sha256 does not match its markdown", {
      computed: digest,
      returned: rep.sha256,
    });
    const file = join(workdir!, "report.md");
    await Deno.writeTextFile(file, md);
    await Deno.writeTextFile(
      join(workdir!, "report.json"),
      JSON.stringify(
        { mission_id: id, sha256: rep.sha256, audit_seq: rep.audit_seq, approval_id: approval },
        null,
        2,
      ) + "\n",
    );
    say(`   report: ${file}`);
    say(`   sha256 ${rep.sha256} (audit record seq ${rep.audit_seq})`);
    say("\nMISSION SUCCEEDED");
  } finally {
    await client.close();
  }
}

function isFinal(status: unknown): boolean {
  return !["running", "awaiting_input", "pending_approval"].includes(String(status));
}

async function sha256(text: string): Promise<string> {
  const d = await crypto.subtle.digest("SHA-256", enc.encode(text));
  return Array.from(new Uint8Array(d), (b) => b.toString(16).padStart(2, "0")).join("");
}

try {
  await main();
  // Exit explicitly: with Deno 2.9's fetch over TCP and SDK 1.32, a large response (tools/list,
  // the report) leaves a pending read behind after client.close() that keeps the process
  // alive. The daemon ends those streams (curl returns at once); our stdio shim, which uses a
  // socket fetch, exits normally.
  Deno.exit(0);
} catch (e) {
  const msg = e instanceof DemoFailure || e instanceof ToolError
    ? e.message
    : (e as Error).stack ?? String(e);
  Deno.stderr.writeSync(enc.encode(`\n!!! DEMO AGENT FAILED: ${msg}\n`));
  Deno.exit(1);
}
