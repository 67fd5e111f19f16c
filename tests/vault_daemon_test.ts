/**
 * Black-box: the vault in a real daemon. The operator creates and unlocks it with the CLI, agents
 * (the official MCP SDK client over the stdio shim) use entries by reference, and no value ever
 * shows: not in a reply, the screen, an event, the recording, the spool, the database or the
 * audit log (the whole state directory is searched afterwards, for the value and the forms a
 * program prints it in).
 */
import assert from "node:assert/strict";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import {
  homeWithConfig,
  operatorFetch,
  startDaemon,
  stdioClient,
  termada,
  termadaWithStdin,
} from "./_daemon.ts";
import { denoDir, pollUntil } from "./_clients.ts";

const DENO_DIR = await denoDir();

const SECRET = "pg://app:Zq8-vault-S3cret-7Hn@db.internal:5432/prod";
const PASSWORD = "hunter2-Vault-pw";
const FORBIDDEN = "never-given-out-9f8e7d";

const CONFIG = `policies:
  default:
    vault:
      allow: ["local:db-*", "local:sudo-pw"]
      deny: ["forbidden"]
`;

type Structured = Record<string, unknown>;

/** Calls a tool; returns structuredContent and keeps every reply's text for the leak check. */
function recorder(c: Client, seen: string[]) {
  return async (name: string, args: Structured): Promise<Structured> => {
    const r = await c.callTool({ name, arguments: args });
    seen.push(JSON.stringify(r));
    return r.structuredContent as Structured;
  };
}

async function sha256(s: string): Promise<string> {
  const d = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(s));
  return Array.from(new Uint8Array(d), (b) => b.toString(16).padStart(2, "0")).join("");
}

function b64(s: string): string {
  return btoa(s);
}

/** Every file under `dir` (bytes), for the leak search. */
async function* files(dir: string): AsyncGenerator<[string, Uint8Array]> {
  for await (const e of Deno.readDir(dir)) {
    const p = `${dir}/${e.name}`;
    if (e.isDirectory) yield* files(p);
    else if (e.isFile) yield [p, await Deno.readFile(p)];
  }
}

function leaks(raw: string, values: string[]): string[] {
  const found: string[] = [];
  // Escape sequences left out too (a recording of a program that drew the value in pieces;
  // in JSON, as the asciicast stores it, they are \u001b escapes).
  const text = raw + "\n" + raw
    // deno-lint-ignore no-control-regex
    .replace(/\x1b\[[0-9;?]*[ -\/]*[@-~]|\x1b\][^\x07]*\x07/g, "")
    .replace(/\\u001b\[[0-9;?]*[ -\/]*[@-~]/g, "");
  for (const v of values) {
    for (const form of [v, b64(v + "\n").slice(0, 24), b64(v).slice(0, 24)]) {
      if (text.includes(form)) found.push(form);
    }
  }
  return found;
}

Deno.test({
  name: "vault: agents use entries by reference and no value appears anywhere the daemon writes",
  async fn() {
    const home = await homeWithConfig(CONFIG);
    const env = { DENO_DIR };
    const seen: string[] = [];
    try {
      await using d = await startDaemon(home, { env });
      await using c = await stdioClient(home, ["--agent", "dev"], env);
      const call = recorder(c, seen);

      // No vault yet: a reference says so, with the operator's next step.
      const none = await call("vault_list", {});
      assert.equal((none.error as { code: string }).code, "VAULT_LOCKED", JSON.stringify(none));
      assert.match((none.error as { hint: string }).hint, /vault init/);

      const idFile = `${home}/operator-key.txt`;
      const init = await termada(home, ["vault", "init", "--identity", idFile], env);
      assert.equal(init.code, 0, init.stderr);
      assert.match(init.stdout, /public key age1/);
      // Locked until an operator unlocks it.
      const locked = await call("exec_run", {
        command: ["echo $X"],
        env: { X: { vault: "db-url" } },
      });
      assert.equal((locked.error as { code: string }).code, "VAULT_LOCKED");
      assert.match((locked.error as { hint: string }).hint, /termada unlock/);

      const unlock = await termada(home, ["unlock", "--identity", idFile], env);
      assert.equal(unlock.code, 0, unlock.stderr);
      for (
        const [name, value, kind] of [
          ["db-url", SECRET, "secret"],
          ["sudo-pw", PASSWORD, "password"],
          ["forbidden", FORBIDDEN, "secret"],
        ]
      ) {
        const set = await termadaWithStdin(
          home,
          ["vault", "set", name!, "--kind", kind!],
          value!,
          env,
        );
        assert.equal(set.code, 0, set.stderr);
        assert.ok(!set.stdout.includes(value!));
      }
      const list = await termada(home, ["vault", "list", "--json"], env);
      assert.equal(list.code, 0, list.stderr);
      assert.deepEqual(
        (JSON.parse(list.stdout) as { name: string }[]).map((e) => e.name),
        ["db-url", "forbidden", "sudo-pw"],
      );
      assert.ok(!list.stdout.includes(SECRET));

      // vault_list: only what the policy allows, names and kinds only.
      const mine = await call("vault_list", {});
      assert.deepEqual(mine.entries, [
        { name: "db-url", kind: "secret" },
        { name: "sudo-pw", kind: "password" },
      ]);

      // Echoed, in base64, split across two writes, sliced: the program gets the value, the
      // agent never sees it.
      const r = await call("exec_run", {
        command: [
          'echo "$DB_URL"; printf "%s\\n" "$DB_URL" | base64 -w0; echo; ' +
          'printf "%s" "${DB_URL:0:17}"; sleep 0.2; printf "%s\\n" "${DB_URL:17}"; ' +
          'printf "%s" "$DB_URL" | sha256sum',
        ],
        env: { DB_URL: { vault: "db-url" } },
      });
      assert.equal(r.status, "exited", JSON.stringify(r));
      assert.equal(r.exit_code, 0);
      assert.ok((r.output as string).includes(await sha256(SECRET)), "the program got the value");
      assert.match(r.output as string, /\[REDACTED\]/);
      const session = r.session_id as string;

      // A full-screen program drawing the value with attributes between its characters.
      const tui = await call("exec_start", {
        command: [
          'printf "\\033[?1049h\\033[H"; v="$DB_URL"; i=0; while [ $i -lt ${#v} ]; do ' +
          'printf "\\033[1m%s\\033[0m" "${v:$i:1}"; i=$((i+1)); done; sleep 3; printf "\\033[?1049l"',
        ],
        env: { DB_URL: { vault: "db-url" } },
        session_id: session,
      });
      assert.equal(tui.status, "running", JSON.stringify(tui));
      const screen = await pollUntil(
        async () => {
          const s = await call("session_screen", { session_id: session });
          return (s.lines as string[]).some((l) => l.length > 10) ? s : undefined;
        },
        "the program's screen",
      );
      assert.ok(
        !(screen.lines as string[]).join("\n").includes("Zq8-vault"),
        JSON.stringify(screen.lines),
      );
      await call("exec_wait", { job_id: tui.job_id, timeout_ms: 10_000 });

      // Two writes with a pause between, read while it pauses: the agent is handed the line
      // without the tail that may start the value, then the whole line masked.
      const split = await call("exec_start", {
        command: [
          'printf "url=%s" "${DB_URL:0:17}"; sleep 1.5; printf "%s done\\n" "${DB_URL:17}"',
        ],
        env: { DB_URL: { vault: "db-url" } },
        session_id: session,
      });
      assert.equal(split.status, "running", JSON.stringify(split));
      let seenText = "";
      let cursor: string | undefined;
      for (const end = Date.now() + 10_000; Date.now() < end;) {
        const p = await call("exec_poll", {
          job_id: split.job_id,
          wait_ms: 200,
          ...(cursor ? { cursor } : {}),
        });
        seenText += String(p.output ?? "");
        if (!p.output) await new Promise((r) => setTimeout(r, 20));
        cursor = p.next_cursor as string | undefined;
        if (p.status !== "running" && p.status !== "awaiting_input") break;
      }
      assert.match(seenText, /\[REDACTED\] done/, seenText);
      assert.ok(!seenText.includes(SECRET.slice(0, 12)), seenText);

      // A session whose environment holds a value.
      const s2 = await call("session_create", { env: { TOKEN: { vault: "db-url" } } });
      const inS2 = await call("exec_run", {
        session_id: s2.session_id,
        command: ['test -n "$TOKEN" && echo "len ${#TOKEN}"; echo "$TOKEN"'],
      });
      assert.match(inS2.output as string, new RegExp(`len ${SECRET.length}`));
      assert.ok(!(inS2.output as string).includes("Zq8"), inS2.output as string);

      // A password prompt answered from the vault.
      const prompt = await call("exec_start", {
        command: [
          `read -s -p "Password: " P; echo; [ "$(printf %s "$P" | sha256sum | cut -c1-64)" = ` +
          `"${await sha256(PASSWORD)}" ] && echo accepted || echo wrong`,
        ],
        session_id: session,
      });
      await pollUntil(
        async () => {
          const p = await call("exec_poll", { job_id: prompt.job_id, wait_ms: 500 });
          return p.status === "awaiting_input" ? p : undefined;
        },
        "the password prompt",
      );
      const typed = await call("exec_write", { job_id: prompt.job_id, vault: "sudo-pw" });
      assert.equal(typed.ok, true, JSON.stringify(typed));
      const answered = await call("exec_wait", { job_id: prompt.job_id, timeout_ms: 10_000 });
      assert.match(answered.output as string, /accepted/, JSON.stringify(answered));

      // Denied and unknown entries; an entry allowed locally only is refused on another target.
      const denied = await call("exec_run", {
        command: ["echo $A"],
        env: { A: { vault: "forbidden" } },
      });
      assert.equal((denied.error as { code: string }).code, "DENIED_BY_POLICY");
      const unknown = await call("exec_run", {
        command: ["echo $A"],
        env: { A: { vault: "db-nothing" } },
      });
      assert.equal((unknown.error as { code: string }).code, "NOT_FOUND");
      const both = await call("exec_write", { job_id: prompt.job_id, input: "x", vault: "x" });
      assert.equal((both.error as { code: string }).code, "INVALID_ARGUMENT");

      // The operator's view: status and names, never values; lock makes references fail.
      const op = operatorFetch(d);
      const st = await (await op("/vault")).json();
      assert.equal(st.unlocked, true);
      assert.equal(st.entries, 3);
      assert.ok(!JSON.stringify(st).includes(SECRET));
      const lock = await termada(home, ["lock"], env);
      assert.equal(lock.code, 0, lock.stderr);
      const after = await call("exec_run", { command: ["true"], env: { A: { vault: "db-url" } } });
      assert.equal((after.error as { code: string }).code, "VAULT_LOCKED");

      const audit = await termada(home, ["audit", "-n", "400", "--json"], env);
      assert.match(audit.stdout, /vault\.used/);
      assert.match(audit.stdout, /"entry":"db-url"|"entry": "db-url"/);
      assert.match(audit.stdout, /vault\.denied/);
      seen.push(audit.stdout);
      const events = await (await op("/audit?n=400")).text();
      seen.push(events);
      await d.stop();

      // Nothing the daemon wrote holds a value (the vault file is age-encrypted).
      const values = [SECRET, PASSWORD, FORBIDDEN];
      for await (const [path, bytes] of files(home)) {
        if (path.endsWith("operator-key.txt")) continue;
        const text = new TextDecoder("latin1").decode(bytes);
        assert.deepEqual(leaks(text, values), [], `a value in ${path}`);
      }
      // Nor did any reply, event or audit record an agent or operator saw.
      for (const reply of seen) assert.deepEqual(leaks(reply, values), [], reply.slice(0, 400));
    } finally {
      await Deno.remove(home, { recursive: true });
    }
  },
});

Deno.test({
  name: "vault: a passphrase vault, a wrong passphrase, usage errors of the CLI",
  async fn() {
    const home = await homeWithConfig("");
    const env = { DENO_DIR };
    try {
      const pass = `${home}/pass.txt`;
      await Deno.writeTextFile(pass, "correct horse battery\n");
      const init = await termada(home, ["vault", "init", "--passphrase-file", pass], env);
      assert.equal(init.code, 0, init.stderr);
      const again = await termada(home, ["vault", "init", "--passphrase-file", pass], env);
      assert.notEqual(again.code, 0);
      assert.match(again.stderr, /exists/);
      // Without a daemon: straight on the file, with the key given here.
      const set = await termadaWithStdin(
        home,
        ["vault", "set", "api-token", "--passphrase-file", pass],
        "tok-123456789",
        env,
      );
      assert.equal(set.code, 0, set.stderr);
      const argv = await termada(home, ["vault", "set", "x", "some-value"], env);
      assert.equal(argv.code, 2);
      assert.match(argv.stderr, /Unexpected argument/);
      const badKind = await termada(home, ["vault", "set", "x", "--kind", "nope"], env);
      assert.equal(badKind.code, 2);
      const reset = await termada(home, ["vault", "reset"], env);
      assert.equal(reset.code, 2);
      assert.match(reset.stderr, /--yes/);

      await using _d = await startDaemon(home, { env });
      const wrong = await termadaWithStdin(home, ["unlock"], "not the passphrase\n", env);
      assert.equal(wrong.code, 1);
      assert.match(wrong.stderr, /VAULT_LOCKED|passphrase/i);
      const right = await termadaWithStdin(home, ["unlock"], "correct horse battery\n", env);
      assert.equal(right.code, 0, right.stderr);
      assert.match(right.stdout, /1 entries/);
      const list = await termada(home, ["vault", "list"], env);
      assert.match(list.stdout, /api-token\s+secret\s+13/);
      assert.ok(!list.stdout.includes("tok-123456789"));
    } finally {
      await Deno.remove(home, { recursive: true });
    }
  },
});
