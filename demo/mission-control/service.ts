/**
 * The demo's broken service: a tiny HTTP server on loopback that re-reads its config file on
 * every request and answers 503 while the config is wrong, 200 once it is repaired.
 *
 *   deno run --allow-net=127.0.0.1 --allow-read=WORKDIR --allow-write=WORKDIR \
 *     demo/mission-control/service.ts WORKDIR [PORT]
 *
 * WORKDIR holds `app.conf` (key=value lines) and gets `service.log`. The deliberate fault:
 * `data_dir` names a directory that does not exist, so the service cannot serve its data.
 * PORT 0 (the default) picks a free port; the chosen port is written to WORKDIR/service.port.
 */
import { join, resolve } from "node:path";

const workdir = resolve(Deno.args[0] ?? ".");
const port = Number(Deno.args[1] ?? Deno.env.get("DEMO_SERVICE_PORT") ?? "0");
const confFile = join(workdir, "app.conf");
const logFile = join(workdir, "service.log");

function log(line: string): void {
  Deno.writeTextFileSync(logFile, `${new Date().toISOString()} ${line}\n`, { append: true });
}

/** Parses `key=value` lines; `#` starts a comment. */
function readConf(): Map<string, string> {
  const conf = new Map<string, string>();
  for (const raw of Deno.readTextFileSync(confFile).split("\n")) {
    const line = raw.replace(/#.*/, "").trim();
    const eq = line.indexOf("=");
    if (eq > 0) conf.set(line.slice(0, eq).trim(), line.slice(eq + 1).trim());
  }
  return conf;
}

/** Why the service cannot work with this config, or undefined when it can. */
function fault(conf: Map<string, string>): string | undefined {
  const dataDir = conf.get("data_dir");
  if (!dataDir) return "app.conf has no data_dir";
  const dir = resolve(workdir, dataDir);
  try {
    if (!Deno.statSync(dir).isDirectory) return `data_dir "${dataDir}" is not a directory`;
    Deno.statSync(join(dir, "items.json"));
  } catch {
    return `data_dir "${dataDir}" (from app.conf) has no items.json: ${dir} is missing`;
  }
  return undefined;
}

const server = Deno.serve({
  hostname: "127.0.0.1",
  port,
  onListen: ({ port }) => {
    Deno.writeTextFileSync(join(workdir, "service.port"), `${port}\n`);
    log(`listening on http://127.0.0.1:${port}/ (config ${confFile})`);
  },
}, (req) => {
  const path = new URL(req.url).pathname;
  let cause: string | undefined;
  let items = "";
  try {
    const conf = readConf();
    cause = fault(conf);
    if (!cause) {
      items = Deno.readTextFileSync(join(resolve(workdir, conf.get("data_dir")!), "items.json"));
    }
  } catch (e) {
    cause = `cannot read app.conf: ${(e as Error).message}`;
  }
  if (cause) {
    log(`503 ${req.method} ${path} cause: ${cause}`);
    return new Response(`503 Service Unavailable: ${cause}\n`, { status: 503 });
  }
  log(`200 ${req.method} ${path}`);
  return new Response(`200 OK: ${items.trim()}\n`, { status: 200 });
});

for (const sig of ["SIGINT", "SIGTERM"] as const) {
  Deno.addSignalListener(sig, () => server.shutdown());
}
await server.finished;
