/**
 * What ships: the container image's recipe (non-root, the container-only bind, the pinned Deno)
 * and the container start path itself — `serve --bind 0.0.0.0:PORT` is refused outside a
 * container that asks for it, and works inside one (this CI machine is a Docker container).
 */
import assert from "node:assert/strict";
import { ROOT, startDaemon, tempHome, termada } from "./_daemon.ts";

const DOCKERFILE = Deno.readTextFileSync(`${ROOT}Dockerfile`);
const IN_CONTAINER = ["/.dockerenv", "/run/.containerenv"].some((f) => {
  try {
    return Deno.statSync(f).isFile;
  } catch {
    return false; // not this runtime
  }
});

Deno.test("the Dockerfile runs the compiled binary as uid 10001 and binds 0.0.0.0 only as a container", () => {
  const stages = DOCKERFILE.split(/^FROM /m).slice(1);
  assert.equal(stages.length, 2, "a build stage and a runtime stage");
  const [build, runtime] = stages as [string, string];
  const deno = /"deno@([0-9.]+)"|deno@([0-9.]+)/.exec(Deno.readTextFileSync(`${ROOT}.ci/run`));
  const pinned = deno?.[1] ?? deno?.[2];
  assert.ok(pinned, ".ci/run pins a Deno version");
  assert.match(
    build,
    new RegExp(`^denoland/deno:debian-${pinned.replaceAll(".", "\\.")} AS build`),
  );
  assert.match(build, /^RUN deno task compile\b/m);
  const users = [...runtime.matchAll(/^USER (\S+)/gm)].map((m) => m[1]);
  assert.deepEqual(users, ["10001:10001"], "the runtime stage runs as uid 10001 only");
  assert.match(runtime, /TERMADA_CONTAINER=1/);
  assert.match(runtime, /^CMD \["serve", "--bind", "0\.0\.0\.0:7717"\]$/m);
  assert.match(runtime, /^EXPOSE 7717$/m);
  assert.match(DOCKERFILE, /-p 127\.0\.0\.1:7717:7717/, "the documented run publishes on loopback");
});

Deno.test("deno task compile embeds files that exist, under the daemon permission set", () => {
  const config = JSON.parse(Deno.readTextFileSync(`${ROOT}deno.json`));
  const compile = config.tasks.compile.command as string;
  assert.match(compile, /^deno compile -P=daemon /);
  const includes = [...compile.matchAll(/--include (\S+)/g)].map((m) => m[1]!);
  assert.ok(includes.length >= 3);
  for (const path of includes) Deno.statSync(`${ROOT}${path}`); // throws when missing
});

Deno.test("serve --bind 0.0.0.0 is refused outside a container that asks for it", async () => {
  const home = await tempHome();
  try {
    const r = await termada(home, ["serve", "--bind", "0.0.0.0:0"]);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /not a loopback HOST:PORT/);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test({
  name: "in a container with TERMADA_CONTAINER=1 the daemon listens on 0.0.0.0 and says 127.0.0.1",
  ignore: !IN_CONTAINER,
  async fn() {
    const home = await tempHome();
    try {
      await using d = await startDaemon(home, {
        args: ["--bind", "0.0.0.0:0"],
        env: { TERMADA_CONTAINER: "1" },
      });
      const r = await fetch(`http://127.0.0.1:${d.port}/healthz`);
      assert.equal(r.status, 200);
      assert.equal((await r.json()).ok, true);
      // startDaemon found the banner's http://127.0.0.1:PORT/mcp; the log says what it bound.
      assert.match(d.stderr(), /every interface of this container's network namespace/);
    } finally {
      await Deno.remove(home, { recursive: true });
    }
  },
});
