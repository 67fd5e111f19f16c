/**
 * Black-box: the vault on servers. A real OpenSSH sshd on 127.0.0.1 accepts only the key kept in
 * the vault (the daemon's HOME has no ~/.ssh key and no ssh-agent), so a session there proves the
 * server's `auth` entry logged in; a value given to a command in that session is staged (never
 * typed) and wiped on the server once the command ends; paths that would put a value on an SSH
 * exec line (visible in the server's `ps`) are refused.
 */
import assert from "node:assert/strict";
import { homeWithConfig, startDaemon, stdioClient, termada, termadaWithStdin } from "./_daemon.ts";
import { denoDir } from "./_clients.ts";
import { sshdAvailable, TestSshd } from "../src/remote/_test_sshd.ts";

const DENO_DIR = await denoDir();
const SECRET = "remote-Vault-value-5Kp9-xyzzy";

type Structured = Record<string, unknown>;
const code = (r: Structured) => (r.error as { code?: string } | undefined)?.code;

async function sha256(s: string): Promise<string> {
  const d = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(s));
  return Array.from(new Uint8Array(d), (b) => b.toString(16).padStart(2, "0")).join("");
}

Deno.test({
  name:
    "vault on a server: auth from an ssh_key entry, staged values wiped, exec-line paths refused",
  ignore: !sshdAvailable(),
  async fn() {
    await using sshd = await TestSshd.start();
    const userHome = await Deno.makeTempDir({ prefix: "termada-nokeys-" });
    const home = await homeWithConfig(`servers:
  - name: box
    host: 127.0.0.1
    port: ${sshd.port}
    user: ${sshd.user}
    auth: box-key
policies:
  default:
    vault:
      allow: ["box:db-*"]
`);
    const env = { HOME: userHome, SSH_AUTH_SOCK: "", DENO_DIR };
    try {
      await using _d = await startDaemon(home, { env });
      await using c = await stdioClient(home, ["--agent", "dev"], env);
      const call = async (name: string, args: Structured) =>
        (await c.callTool({ name, arguments: args })).structuredContent as Structured;

      const idFile = `${home}/key.txt`;
      assert.equal((await termada(home, ["vault", "init", "--identity", idFile], env)).code, 0);
      // Locked: the server's login needs the vault.
      const locked = await call("session_create", { target: "box" });
      assert.equal(code(locked), "VAULT_LOCKED", JSON.stringify(locked));
      assert.match(JSON.stringify(locked), /box-key/);

      const unlock = await termada(home, ["unlock", "--identity", idFile], env);
      assert.equal(unlock.code, 0, unlock.stderr);
      for (
        const [name, value, kind] of [["box-key", sshd.clientKey, "ssh_key"], [
          "db-pass",
          SECRET,
          "secret",
        ]]
      ) {
        const set = await termadaWithStdin(home, ["vault", "set", name!, "--kind", kind!], value!, {
          DENO_DIR,
        });
        assert.equal(set.code, 0, set.stderr);
      }

      const s = await call("session_create", { target: "box" });
      assert.equal(s.target, "box", JSON.stringify(s));
      const sid = s.session_id as string;
      const r = await call("exec_run", {
        session_id: sid,
        command: ['echo "$DB_PASS"; printf "%s" "$DB_PASS" | sha256sum; echo "home=$HOME"'],
        env: { DB_PASS: { vault: "db-pass" } },
      });
      assert.equal(r.exit_code, 0, JSON.stringify(r));
      const out = r.output as string;
      assert.ok(out.includes(await sha256(SECRET)), out);
      assert.ok(!out.includes(SECRET), out);
      const remoteHome = /home=(\S+)/.exec(out)![1]!;
      // The staged script on the server no longer holds the value.
      const staged = `${remoteHome}/.cache/termada/sessions/${sid}/cmd.sh`;
      let text = "";
      for (let i = 0; i < 100; i++) {
        text = await Deno.readTextFile(staged).catch(() => "");
        if (!text.includes(SECRET)) break;
        await new Promise((res) => setTimeout(res, 50));
      }
      assert.ok(!text.includes(SECRET), "the staged script was wiped");
      // The variable did not stay in the session (the command ran in a subshell).
      const after = await call("exec_run", { session_id: sid, command: ['echo "[${DB_PASS-}]"'] });
      assert.equal(after.output, "[]\n");

      const bg = await call("exec_start", {
        session_id: sid,
        mode: "background",
        command: ["true"],
        env: { X: { vault: "db-pass" } },
      });
      assert.equal(code(bg), "NOT_SUPPORTED", JSON.stringify(bg));
      const sessEnv = await call("session_create", {
        target: "box",
        env: { X: { vault: "db-pass" } },
      });
      assert.equal(code(sessEnv), "NOT_SUPPORTED", JSON.stringify(sessEnv));
      // Allowed on "box" only: a local use is denied.
      const local = await call("exec_run", {
        command: ["true"],
        env: { X: { vault: "db-pass" } },
      });
      assert.equal(code(local), "DENIED_BY_POLICY", JSON.stringify(local));
    } finally {
      await Deno.remove(home, { recursive: true });
      await Deno.remove(userHome, { recursive: true });
    }
  },
});
