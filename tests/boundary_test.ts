/**
 * Black-box tests of the boundary around sessions (docs/SECURITY.md): every attack is made from
 * inside a session, through exec_run, against a real daemon, and each case asserts both that the
 * attempt failed and that its effect did not happen. A control case shows the same read working
 * with `security.exec_gate: off`, so these tests can fail.
 */
import assert from "node:assert/strict";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { call, homeWithConfig, startDaemon, stdioClient, tempHome } from "./_daemon.ts";
import { initializeRequest } from "./_clients.ts";
import { allPids, procStat, readProcFile } from "../src/pty/mod.ts";

const MARKER = `boundary-marker-${crypto.randomUUID()}`;
/** In the daemon's environment only: TERMADA_* variables never reach a session. */
const SECRET = `probe-secret-${crypto.randomUUID()}`;
const CONFIG = `# ${MARKER}\nlog:\n  level: warn\n`;
/** The sleep another session runs, for the signal and /proc cases. */
const OTHER_SLEEP = 31901;

interface Shell {
  code: number;
  out: string;
}

/** Runs one shell line in `session_id` and returns its exit code and output. */
async function inside(c: Client, sessionId: string, line: string): Promise<Shell> {
  const r = await call(c, "exec_run", {
    session_id: sessionId,
    command: [line],
    timeout_ms: 20_000,
  });
  assert.equal(r.status, "exited", `${line}\n${JSON.stringify(r)}`);
  // The whole output or the assertions on it mean nothing.
  assert.ok(!r.has_more && !r.omitted_bytes, `${line}: output was cut`);
  return { code: r.exit_code as number, out: r.output as string };
}

/**
 * A tiny client run inside a session: connects (Unix path or TCP port on 127.0.0.1), sends the
 * payload and prints `REPLY <first line>` or `CONNECT_FAILED <error>`. Python when the session has
 * it, else Deno (bash's /dev/tcp does not do Unix sockets).
 */
const PY_PROBE = `import base64, socket, sys
kind, addr, payload = sys.argv[1], sys.argv[2], base64.b64decode(sys.argv[3])
try:
    if kind == "unix":
        s = socket.socket(socket.AF_UNIX)
        s.connect(addr)
    else:
        s = socket.create_connection(("127.0.0.1", int(addr)), 5)
except OSError as e:
    print("CONNECT_FAILED", e)
    sys.exit(0)
s.settimeout(5)
s.sendall(payload)
data = b""
try:
    while b"\\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
except socket.timeout:
    pass
print("REPLY", data.decode(errors="replace").split("\\n")[0].strip())
`;
const DENO_PROBE = `const [kind, addr, b64] = Deno.args;
let conn;
try {
  conn = kind === "unix"
    ? await Deno.connect({ transport: "unix", path: addr })
    : await Deno.connect({ hostname: "127.0.0.1", port: Number(addr) });
} catch (e) {
  console.log("CONNECT_FAILED " + e);
  Deno.exit(0);
}
await conn.write(Uint8Array.from(atob(b64), (ch) => ch.charCodeAt(0)));
const timer = setTimeout(() => { console.log("REPLY (timeout)"); Deno.exit(0); }, 5000);
const buf = new Uint8Array(65536);
let got = "";
while (!got.includes("\\n")) {
  const n = await conn.read(buf);
  if (n === null) break;
  got += new TextDecoder().decode(buf.subarray(0, n));
}
clearTimeout(timer);
console.log("REPLY " + got.split("\\n")[0].trim());
Deno.exit(0);
`;

/** Writes the probe scripts outside the state dir and returns how to run one from a session. */
async function netProbe(
  c: Client,
  sessionId: string,
): Promise<
  { run: (kind: "unix" | "tcp", addr: string, payload: string) => Promise<string>; dir: string }
> {
  const dir = await Deno.makeTempDir({ prefix: "termada-bt-probe-" });
  await Deno.writeTextFile(`${dir}/probe.py`, PY_PROBE);
  await Deno.writeTextFile(`${dir}/probe.ts`, DENO_PROBE);
  const py = await inside(c, sessionId, "command -v python3 >/dev/null && echo yes || echo no");
  const runner = py.out.trim() === "yes"
    ? `python3 ${dir}/probe.py`
    : `${Deno.execPath()} run --allow-net --allow-read --allow-write --no-prompt --quiet ${dir}/probe.ts`;
  return {
    dir,
    run: async (kind, addr, payload) => {
      const b64 = btoa(String.fromCharCode(...new TextEncoder().encode(payload)));
      const r = await inside(c, sessionId, `${runner} ${kind} ${addr} ${b64}`);
      assert.match(r.out, /REPLY|CONNECT_FAILED/, r.out);
      return r.out.trim();
    },
  };
}

const INITIALIZE = JSON.stringify(initializeRequest("inside"));
const helloLine = (key?: string) =>
  JSON.stringify({ termada: "hello", v: 1, agent: "intruder", ...(key ? { key } : {}) });

/** One raw HTTP/1.1 request; `host` must name the listener on TCP (its DNS-rebinding guard). */
function httpRequest(
  method: string,
  path: string,
  headers: Record<string, string>,
  options: { body?: string; host?: string } = {},
) {
  const body = options.body ?? "";
  const host = options.host ?? "localhost";
  const lines = [`${method} ${path} HTTP/1.1`, `host: ${host}`, "connection: close"];
  for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`);
  if (body) {
    lines.push("content-type: application/json", "accept: application/json, text/event-stream");
  }
  lines.push(`content-length: ${new TextEncoder().encode(body).length}`);
  return lines.join("\r\n") + "\r\n\r\n" + body;
}

/** A session's attempt on a socket failed: nothing reachable, or an error, never a result. */
function assertRefused(reply: string, what: string): void {
  assert.doesNotMatch(reply, /"result"/, `${what}: ${reply}`);
  assert.match(
    reply,
    /^CONNECT_FAILED|^REPLY .*"error"|^REPLY HTTP\/1\.[01] 40[13]/,
    `${what}: ${reply}`,
  );
}

/** Resolves once `pid` runs `argv` (a fork execs a moment after `$!` is known). */
async function untilArgv(pid: number, argv: string[], ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    const now = (readProcFile(`/proc/${pid}/cmdline`) ?? "").split("\0").slice(0, argv.length);
    if (now.join("\0") === argv.join("\0")) return;
    if (Date.now() > deadline) throw new Error(`${pid} runs ${JSON.stringify(now)}, not ${argv}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

function isAlive(pid: number): boolean {
  const st = procStat(pid);
  return st !== undefined && st.state !== "Z";
}

function killMarked(marker: number): void {
  for (const pid of allPids()) {
    const argv = (readProcFile(`/proc/${pid}/cmdline`) ?? "").split("\0");
    if (argv[0] === "sleep" && argv[1] === String(marker)) {
      try {
        Deno.kill(pid, "SIGKILL");
      } catch {
        // already gone
      }
    }
  }
}

function fileText(path: string): string | undefined {
  try {
    return Deno.readTextFileSync(path);
  } catch {
    return undefined;
  }
}

/** `test -e` from outside (Deno's own file APIs refuse /sys with this permission set). */
async function existsOutside(path: string): Promise<boolean> {
  return (await new Deno.Command("test", { args: ["-e", path] }).output()).success;
}

Deno.test("a session cannot reach the control plane (mount namespace)", async (t) => {
  const home = await homeWithConfig(CONFIG);
  let probeDir: string | undefined;
  try {
    await using d = await startDaemon(home, { env: { TERMADA_PROBE_SECRET: SECRET } });
    await using c = await stdioClient(home, ["--agent", "dev"]);
    const caps = await call(c, "capabilities", {});
    const boundary = caps.boundary as { hiding: { active: boolean; how?: string } };
    assert.equal(boundary.hiding.active, true, JSON.stringify(boundary));
    assert.equal(boundary.hiding.how, "mounts", JSON.stringify(boundary));
    const a = (await call(c, "session_create", {})).session_id as string;
    const b = (await call(c, "session_create", {})).session_id as string;
    const auditName = [...Deno.readDirSync(`${home}/audit`)].map((e) => e.name)
      .find((n) => n.endsWith(".jsonl"));
    assert.ok(auditName, "an audit segment exists");
    const daemonPid = d.proc.pid;
    const token = Deno.readTextFileSync(`${home}/token`).trim();
    const socketKey = Deno.readTextFileSync(`${home}/termada-mcp.sock.key`).trim();
    const auditFile = `${home}/audit/${auditName}`;
    assert.ok(token.length >= 32 && socketKey.length >= 16);
    const probe = await netProbe(c, a);
    probeDir = probe.dir;

    await t.step(
      "config.yaml, token, termada.db, audit files and the socket key cannot be read",
      async () => {
        const secrets: [string, string][] = [
          [`${home}/config.yaml`, MARKER],
          [`${home}/token`, token],
          [`${home}/termada-mcp.sock.key`, socketKey],
          [auditFile, Deno.readTextFileSync(auditFile).slice(0, 60)],
          [`${home}/termada.db`, "SQLite format 3"],
        ];
        for (const [path, secret] of secrets) {
          const r = await inside(c, a, `head -c 4096 ${path}`);
          assert.notEqual(r.code, 0, `${path} was readable: ${r.out}`);
          assert.ok(!r.out.includes(secret), `${path} leaked: ${r.out}`);
        }
        const ls = await inside(c, a, `ls -a ${home} ${home}/audit 2>&1`);
        for (
          const name of ["token", "config.yaml", "termada.db", "termada-mcp.sock.key", auditName]
        ) {
          assert.ok(!new RegExp(`(^|\\s)${name!.replace(".", "\\.")}(\\s|$)`).test(ls.out), ls.out);
        }
      },
    );

    await t.step(
      "they cannot be written, removed or replaced, nor a new config.yaml created",
      async () => {
        const before = {
          config: fileText(`${home}/config.yaml`),
          token: fileText(`${home}/token`),
          key: fileText(`${home}/termada-mcp.sock.key`),
        };
        // What lands in a file is `x<uuid>y`, never the command's own text (which the audit keeps).
        const uuid = crypto.randomUUID();
        const injected = `x${uuid}y`;
        const targets = [
          "config.yaml",
          "token",
          "termada.db",
          `audit/${auditName}`,
          "termada-mcp.sock.key",
        ];
        for (const name of targets) {
          const r = await inside(c, a, `printf 'x%sy\\n' ${uuid} >> ${home}/${name}`);
          assert.notEqual(r.code, 0, `${name} was writable`);
          assert.match(r.out, /Read-only file system|Permission denied|No such file/, r.out);
        }
        const rm = await inside(c, a, `rm ${home}/token ${home}/config.yaml`);
        assert.notEqual(rm.code, 0, rm.out);
        const mv = await inside(
          c,
          a,
          // A subshell: `exit` in the session's own shell would end the session.
          `(printf 'policies: {}\\n' > /tmp/bt-config-${a}.yaml && ` +
            `mv -f /tmp/bt-config-${a}.yaml ${home}/config.yaml; s=$?; rm -f /tmp/bt-config-${a}.yaml; exit $s)`,
        );
        assert.notEqual(mv.code, 0, mv.out);
        const create = await inside(c, a, `printf 'log: {}\\n' > ${home}/new-config.yaml`);
        assert.notEqual(create.code, 0, create.out);
        assert.deepEqual({
          config: fileText(`${home}/config.yaml`),
          token: fileText(`${home}/token`),
          key: fileText(`${home}/termada-mcp.sock.key`),
        }, before);
        assert.equal(await existsOutside(`${home}/new-config.yaml`), false);
        for (const name of targets) {
          const bytes = Deno.readFileSync(`${home}/${name}`);
          assert.ok(!new TextDecoder().decode(bytes).includes(injected), `${name} was written`);
        }
      },
    );

    await t.step("another session's scratch directory cannot be read or written", async () => {
      const bDir = `${home}/run/sessions/${b}`;
      const bFiles = [...Deno.readDirSync(bDir)].map((e) => e.name);
      assert.ok(bFiles.length > 0, "session B has scratch files");
      const bText = Deno.readTextFileSync(`${bDir}/${bFiles[0]}`);
      const line = bText.split("\n").find((l) => l.trim().length > 8) ?? bText;
      const ls = await inside(c, a, `ls -a ${bDir}`);
      assert.notEqual(ls.code, 0, ls.out);
      const cat = await inside(c, a, `cat ${bDir}/${bFiles[0]}`);
      assert.notEqual(cat.code, 0, cat.out);
      assert.ok(!cat.out.includes(line), cat.out);
      const w = await inside(c, a, `echo evil > ${bDir}/evil`);
      assert.notEqual(w.code, 0, w.out);
      assert.deepEqual([...Deno.readDirSync(bDir)].map((e) => e.name).sort(), [...bFiles].sort());
      // Its own scratch directory is there, so its rc file works.
      const own = await inside(c, a, `ls ${home}/run/sessions/${a}`);
      assert.equal(own.code, 0, own.out);
    });

    await t.step("the daemon cannot be signalled", async () => {
      const r = await inside(
        c,
        a,
        `kill -TERM ${daemonPid}; echo "term=$?"; kill -0 ${daemonPid}; echo "zero=$?"`,
      );
      assert.match(r.out, /term=1/, r.out);
      assert.match(r.out, /zero=1/, r.out);
      assert.equal(r.out.match(/Operation not permitted/g)?.length, 2, r.out);
      assert.ok(isAlive(daemonPid), "the daemon is alive");
      assert.equal(
        (await call(c, "exec_run", { session_id: a, command: ["echo alive"] })).output,
        "alive\n",
      );
    });

    await t.step("another session's process cannot be signalled", async () => {
      const started = await inside(c, b, `sleep ${OTHER_SLEEP} >/dev/null 2>&1 & echo "PID=$!"`);
      const pid = Number(/PID=(\d+)/.exec(started.out)?.[1]);
      assert.ok(pid > 0, started.out);
      try {
        await untilArgv(pid, ["sleep", String(OTHER_SLEEP)]);
        const r = await inside(
          c,
          a,
          `kill -TERM ${pid}; echo "term=$?"; kill -KILL ${pid}; echo "kill=$?"; kill -0 ${pid}; echo "zero=$?"`,
        );
        for (const k of ["term", "kill", "zero"]) assert.match(r.out, new RegExp(`${k}=1`), r.out);
        assert.equal(r.out.match(/Operation not permitted/g)?.length, 3, r.out);
        assert.ok(isAlive(pid), `session B's sleep ${pid} was killed from session A`);
        const argv = (readProcFile(`/proc/${pid}/cmdline`) ?? "").split("\0");
        assert.deepEqual(argv.slice(0, 2), ["sleep", String(OTHER_SLEEP)]);
      } finally {
        killMarked(OTHER_SLEEP);
      }
    });

    await t.step("the daemon's /proc/<pid>/environ cannot be read", async () => {
      // Counted inside: output redaction would hide the value itself from a check out here.
      const r = await inside(
        c,
        a,
        `n=$(cat /proc/${daemonPid}/environ | tr '\\0' '\\n' | ` +
          `grep -c -F -e 'TERMADA_PROBE_SECRET=${SECRET}' -e 'TERMADA_HOME=${home}'); ` +
          `echo "leaked=$n"`,
      );
      assert.match(r.out, /leaked=0/, `the daemon's environment was read: ${r.out}`);
    });

    // Landlock's scoping does not cover reading /proc/<pid>/environ of a same-user process, and
    // a session's processes are dumpable: another session's environment is readable (a known
    // gap, docs/SECURITY.md). What must hold: it carries no secret of the daemon's.
    await t.step("another session's environment carries no secret of the daemon", async () => {
      const started = await inside(
        c,
        b,
        `sleep ${OTHER_SLEEP + 1} >/dev/null 2>&1 & echo "PID=$!"`,
      );
      const pid = Number(/PID=(\d+)/.exec(started.out)?.[1]);
      assert.ok(pid > 0, started.out);
      try {
        await untilArgv(pid, ["sleep", String(OTHER_SLEEP + 1)]);
        const r = await inside(
          c,
          a,
          `n=$(cat /proc/${pid}/environ | tr '\\0' '\\n' | grep -c -F ` +
            `-e 'TERMADA_PROBE_SECRET=${SECRET}' -e '${token}' -e 'TERMADA_HOME='); ` +
            `echo "leaked=$n"`,
        );
        assert.match(r.out, /leaked=0/, `session B's environment holds a secret: ${r.out}`);
      } finally {
        killMarked(OTHER_SLEEP + 1);
      }
    });

    await t.step("the daemon's /proc/<pid>/root and /proc/<pid>/mem are out of reach", async () => {
      const root = await inside(c, a, `cat /proc/${daemonPid}/root${home}/token`);
      assert.notEqual(root.code, 0, root.out);
      assert.ok(!root.out.includes(token), "the token leaked through /proc/<pid>/root");
      const mem = await inside(c, a, `dd if=/proc/${daemonPid}/mem of=/dev/null bs=1 count=1 2>&1`);
      assert.notEqual(mem.code, 0, mem.out);
      assert.match(
        mem.out,
        /failed to open.*(Permission denied|Operation not permitted|No such file or directory)/,
        mem.out,
      );
    });

    await t.step("the MCP socket gives a session no identity (dev-mode hello)", async () => {
      for (const key of ["0".repeat(64), undefined]) {
        const reply = await probe.run(
          "unix",
          `${home}/termada-mcp.sock`,
          `${helloLine(key)}\n${INITIALIZE}\n`,
        );
        assertRefused(reply, `hello with key ${key ? "guessed" : "absent"}`);
      }
    });

    await t.step("the HTTP Unix socket gives a session no identity", async () => {
      const reply = await probe.run(
        "unix",
        `${home}/termada.sock`,
        httpRequest("POST", "/mcp", {
          "x-termada-agent": "intruder",
          "x-termada-key": "0".repeat(64),
        }, { body: INITIALIZE }),
      );
      assertRefused(reply, "dev-mode HTTP on the Unix socket");
    });

    await t.step("the TCP port answers 401 without a token, and nothing stops", async () => {
      const port = String(d.port);
      const host = `127.0.0.1:${port}`;
      const stop = await probe.run(
        "tcp",
        port,
        httpRequest("POST", "/api/stop", {}, { body: "{}", host }),
      );
      assert.match(stop, /^REPLY HTTP\/1\.1 401/, stop);
      const sessions = await probe.run(
        "tcp",
        port,
        httpRequest("GET", "/api/sessions", {}, { host }),
      );
      assert.match(sessions, /^REPLY HTTP\/1\.1 401/, sessions);
      const mcp = await probe.run(
        "tcp",
        port,
        httpRequest("POST", "/mcp", { "x-termada-agent": "intruder" }, { body: INITIALIZE, host }),
      );
      assert.match(mcp, /^REPLY HTTP\/1\.1 401/, mcp);
      // No barrier went up: work is still admitted.
      const r = await c.callTool({
        name: "exec_run",
        arguments: { session_id: a, command: ["echo still-admitted"] },
      });
      assert.notEqual(r.isError, true, JSON.stringify(r.structuredContent));
      assert.equal((r.structuredContent as { output: string }).output, "still-admitted\n");
    });

    await t.step("the session's environment holds no token", async () => {
      const grep = await inside(c, a, "env | grep -i termada");
      assert.deepEqual(grep.out.trim().split("\n"), [`TERMADA_SESSION_ID=${a}`]);
      // Counted inside: output redaction would hide a value from a check out here.
      for (const secret of [token, socketKey, SECRET]) {
        const n = await inside(c, a, `n=$(env | grep -c -F '${secret}'); echo "found=$n"`);
        assert.match(n.out, /found=0/, "a secret is in the session's environment");
      }
    });

    await t.step("a session cannot leave its cgroup", async () => {
      const shellPid = Number((await inside(c, a, "echo $$")).out.trim());
      const cgroupOf = () =>
        (readProcFile(`/proc/${shellPid}/cgroup`) ?? "").split("\n").find((l) =>
          l.startsWith("0::")
        );
      const mine = cgroupOf();
      assert.equal(mine, `0::/termada-${daemonPid}/${a}`);
      const escape = `bt-escape-${a}`;
      const r = await inside(
        c,
        a,
        `echo $$ > /sys/fs/cgroup/unified/cgroup.procs; echo "root=$?"; ` +
          `echo $$ > /sys/fs/cgroup/unified/termada-${daemonPid}/cgroup.procs; echo "daemon=$?"; ` +
          `mkdir /sys/fs/cgroup/unified/${escape}; echo "mkdir=$?"`,
      );
      for (const k of ["root", "daemon", "mkdir"]) assert.match(r.out, new RegExp(`${k}=1`), r.out);
      assert.equal(cgroupOf(), mine, "the shell moved cgroup");
      assert.equal(await existsOutside(`/sys/fs/cgroup/unified/${escape}`), false);
    });

    await t.step("the hiding cannot be unmounted, nor the layout changed", async () => {
      const mnt = `/tmp/bt-mnt-${a}`;
      try {
        const r = await inside(
          c,
          a,
          `umount ${home}; echo "umount=$?"; umount -l ${home}; echo "lazy=$?"; ` +
            `umount /sys/fs/cgroup/unified; echo "cgroup=$?"; ` +
            `mkdir -p ${mnt} && mount --bind / ${mnt}; echo "bind=$?"; ` +
            `cat ${mnt}${home}/token; cat ${home}/token`,
        );
        for (const k of ["umount", "lazy", "cgroup"]) {
          assert.match(r.out, new RegExp(`${k}=32`), r.out);
        }
        assert.match(r.out, /bind=32/, r.out);
        assert.ok(!r.out.includes(token), "the token became readable");
      } finally {
        await Deno.remove(mnt).catch(() => {});
      }
    });

    await t.step("each session has a terminal of its own, and opens new ones from it", async () => {
      assert.equal((caps.boundary as { terminals: { active: boolean } }).terminals.active, true);
      const mine = await inside(c, a, "tty; ls /dev/pts | sort | tr '\\n' ' '; echo");
      assert.match(mine.out, /^\/dev\/pts\/0\r?\n0 ptmx \r?$/m, mine.out);
      // A terminal tmux opens inside the session comes from the same instance and works.
      const sock = `/tmp/termada-bt-tmux-${a}`;
      const tmux = await inside(
        c,
        a,
        `tmux -S ${sock} new-session -d -x 40 -y 5 'echo nested-ok; sleep 30' && sleep 0.5 && ` +
          `tmux -S ${sock} capture-pane -p | head -1; ls /dev/pts | sort | tr '\\n' ' '; ` +
          `tmux -S ${sock} kill-server; rm -f ${sock}`,
      );
      assert.match(tmux.out, /nested-ok/, tmux.out);
      assert.match(tmux.out, /0 1 ptmx/, tmux.out);
      // The other session's terminal is not there, nor any other process's /proc entry.
      const other = await inside(
        c,
        b,
        `echo "seen=$(ls /proc | grep -c -x -e ${daemonPid})"; ls /dev/pts | sort | tr '\\n' ' '`,
      );
      assert.match(other.out, /seen=0/, other.out);
      assert.match(other.out, /^0 ptmx /m, other.out);
    });

    await t.step("ordinary work in $HOME and /tmp still works", async () => {
      const name = `termada-bt-${a}`;
      const made = await inside(
        c,
        a,
        `mkdir -p "$HOME/${name}" /tmp/${name} && echo hi > "$HOME/${name}/f" && ` +
          `echo hi > /tmp/${name}/f && cat "$HOME/${name}/f" /tmp/${name}/f && echo "HOME=$HOME"`,
      );
      assert.equal(made.code, 0, made.out);
      const userHome = /HOME=(\S+)/.exec(made.out)![1]!;
      try {
        assert.equal(Deno.readTextFileSync(`${userHome}/${name}/f`), "hi\n");
        assert.equal(Deno.readTextFileSync(`/tmp/${name}/f`), "hi\n");
        const rm = await inside(c, a, `rm -r "$HOME/${name}" /tmp/${name}`);
        assert.equal(rm.code, 0, rm.out);
        assert.equal(await existsOutside(`${userHome}/${name}`), false);
        assert.equal(await existsOutside(`/tmp/${name}`), false);
      } finally {
        await Deno.remove(`${userHome}/${name}`, { recursive: true }).catch(() => {});
        await Deno.remove(`/tmp/${name}`, { recursive: true }).catch(() => {});
      }
    });
  } finally {
    killMarked(OTHER_SLEEP);
    killMarked(OTHER_SLEEP + 1);
    if (probeDir) await Deno.remove(probeDir, { recursive: true });
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("a session cannot create a config.yaml where there is none", async () => {
  const home = await tempHome();
  try {
    await using _d = await startDaemon(home);
    await using c = await stdioClient(home, ["--agent", "dev"]);
    assert.equal(await existsOutside(`${home}/config.yaml`), false);
    const a = (await call(c, "session_create", {})).session_id as string;
    const r = await inside(c, a, `printf 'security:\\n  exec_gate: off\\n' > ${home}/config.yaml`);
    assert.notEqual(r.code, 0, r.out);
    assert.equal(await existsOutside(`${home}/config.yaml`), false, "config.yaml was created");
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("control: with security.exec_gate off, the same reads succeed (the tests can fail)", async () => {
  const home = await homeWithConfig(`${CONFIG}security:\n  exec_gate: "off"\n`);
  let probeDir: string | undefined;
  try {
    await using d = await startDaemon(home);
    await using c = await stdioClient(home, ["--agent", "dev"]);
    const boundary = (await call(c, "capabilities", {})).boundary as { mode: string };
    assert.equal(boundary.mode, "off");
    const a = (await call(c, "session_create", {})).session_id as string;
    const token = Deno.readTextFileSync(`${home}/token`).trim();
    const r = await inside(c, a, `cat ${home}/token`);
    assert.equal(r.code, 0, r.out);
    assert.ok(r.out.includes(token), "the token is readable without the boundary");
    const cfg = await inside(c, a, `cat ${home}/config.yaml`);
    assert.ok(cfg.out.includes(MARKER));
    const environ = await inside(
      c,
      a,
      `n=$(cat /proc/${d.proc.pid}/environ | tr '\\0' '\\n' | grep -c -F 'TERMADA_HOME=${home}'); ` +
        `echo "leaked=$n"`,
    );
    assert.match(environ.out, /leaked=1/, environ.out);
    const kill0 = await inside(c, a, `kill -0 ${d.proc.pid}; echo "zero=$?"`);
    assert.match(kill0.out, /zero=0/, kill0.out);
    // The probe works: with the key in hand, a session names itself on the MCP socket.
    const probe = await netProbe(c, a);
    probeDir = probe.dir;
    const key = Deno.readTextFileSync(`${home}/termada-mcp.sock.key`).trim();
    const reply = await probe.run(
      "unix",
      `${home}/termada-mcp.sock`,
      `${helloLine(key)}\n${INITIALIZE}\n`,
    );
    assert.match(reply, /^REPLY .*"result"/, reply);
    const ok = await probe.run(
      "tcp",
      String(d.port),
      httpRequest("GET", "/api/sessions", { authorization: `Bearer ${token}` }, {
        host: `127.0.0.1:${d.port}`,
      }),
    );
    assert.match(ok, /^REPLY HTTP\/1\.1 200/, ok);
  } finally {
    if (probeDir) await Deno.remove(probeDir, { recursive: true });
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("without mounts, hiding falls back to Landlock rules and still holds", async (t) => {
  // Landlock freezes the directories above a hidden path (docs/SECURITY.md): a home outside
  // /tmp keeps /tmp and $HOME ordinary for the session.
  const home = await Deno.makeTempDir({ dir: "/var/tmp", prefix: "termada-home-" });
  await Deno.writeTextFile(`${home}/config.yaml`, CONFIG);
  let probeDir: string | undefined;
  try {
    await using _d = await startDaemon(home, { env: { TERMADA_SIMULATE_MISSING: "mounts" } });
    await using c = await stdioClient(home, ["--agent", "dev"]);
    const boundary = (await call(c, "capabilities", {})).boundary as {
      hiding: { active: boolean; how?: string };
      terminals: { active: boolean; reason?: string };
    };
    assert.equal(boundary.hiding.active, true, JSON.stringify(boundary));
    assert.equal(boundary.hiding.how, "landlock", JSON.stringify(boundary));
    // No mount namespace, no devpts of its own: said, with why.
    assert.equal(boundary.terminals.active, false, JSON.stringify(boundary));
    assert.match(boundary.terminals.reason ?? "", /mount namespace/);
    const a = (await call(c, "session_create", {})).session_id as string;
    const token = Deno.readTextFileSync(`${home}/token`).trim();
    const key = Deno.readTextFileSync(`${home}/termada-mcp.sock.key`).trim();

    await t.step("token, socket key and config.yaml cannot be read or written", async () => {
      for (
        const [name, secret] of [["token", token], ["termada-mcp.sock.key", key], [
          "config.yaml",
          MARKER,
        ]]
      ) {
        const r = await inside(c, a, `cat ${home}/${name}`);
        assert.notEqual(r.code, 0, r.out);
        assert.ok(!r.out.includes(secret!), `${name} leaked`);
        const w = await inside(c, a, `echo x >> ${home}/${name}`);
        assert.notEqual(w.code, 0, w.out);
      }
      assert.equal(Deno.readTextFileSync(`${home}/token`).trim(), token);
      assert.equal(Deno.readTextFileSync(`${home}/config.yaml`), CONFIG);
    });

    await t.step("the reachable MCP socket refuses a hello without the key", async () => {
      const probe = await netProbe(c, a);
      probeDir = probe.dir;
      const reply = await probe.run(
        "unix",
        `${home}/termada-mcp.sock`,
        `${helloLine("0".repeat(64))}\n${INITIALIZE}\n`,
      );
      assertRefused(reply, "dev-mode hello with a guessed key");
      const http = await probe.run(
        "unix",
        `${home}/termada.sock`,
        httpRequest("POST", "/mcp", { "x-termada-agent": "intruder" }, { body: INITIALIZE }),
      );
      assertRefused(http, "dev-mode HTTP on the Unix socket");
    });

    await t.step("ordinary work in $HOME and /tmp still works", async () => {
      const name = `termada-bt-ll-${a}`;
      const r = await inside(
        c,
        a,
        `(for d in "$HOME/${name}" /tmp/${name}; do mkdir "$d" && echo hi > "$d/f" && cat "$d/f" ` +
          `&& rm -r "$d" || exit 1; done; echo "HOME=$HOME")`,
      );
      const userHome = /HOME=(\S+)/.exec(r.out)?.[1];
      try {
        assert.equal(r.code, 0, r.out);
        assert.equal(r.out, `hi\nhi\nHOME=${userHome}\n`);
        assert.equal(await existsOutside(`/tmp/${name}`), false);
        assert.equal(await existsOutside(`${userHome}/${name}`), false);
      } finally {
        await Deno.remove(`/tmp/${name}`, { recursive: true }).catch(() => {});
        if (userHome) await Deno.remove(`${userHome}/${name}`, { recursive: true }).catch(() => {});
      }
    });
  } finally {
    if (probeDir) await Deno.remove(probeDir, { recursive: true });
    await Deno.remove(home, { recursive: true });
  }
});
