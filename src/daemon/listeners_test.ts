import assert from "node:assert/strict";
import { TermadaError } from "../shared/mod.ts";
import { containerBind, tcpBind } from "./listeners.ts";

Deno.test("0.0.0.0 is accepted only in a container that asks for it, loopback everywhere", async (t) => {
  const marker = await Deno.makeTempFile({ prefix: "termada-dockerenv-" });
  try {
    const on = { TERMADA_CONTAINER: "1" };
    await t.step("a container image that asks, with a runtime's marker file", () => {
      assert.deepEqual(containerBind("0.0.0.0:7717", on, [marker]), {
        hostname: "0.0.0.0",
        port: 7717,
        explicit: true,
      });
    });
    await t.step("no marker file, the variable unset or another value: refused", () => {
      assert.equal(containerBind("0.0.0.0:7717", on, [`${marker}-absent`]), undefined);
      assert.equal(containerBind("0.0.0.0:7717", {}, [marker]), undefined);
      assert.equal(
        containerBind("0.0.0.0:7717", { TERMADA_CONTAINER: "yes" }, [marker]),
        undefined,
      );
    });
    await t.step("only the any-address, and a real port", () => {
      for (const v of ["192.168.1.2:7717", "0.0.0.0:70000", "0.0.0.0:07717", "0.0.0.0", "[::]:1"]) {
        assert.equal(containerBind(v, on, [marker]), undefined, v);
      }
    });
    await t.step(
      "tcpBind: loopback is explicit, anything else outside a container is refused",
      () => {
        assert.deepEqual(tcpBind("127.0.0.1:0", {}), {
          hostname: "127.0.0.1",
          port: 0,
          explicit: true,
        });
        assert.equal(tcpBind(null, {}).explicit, false);
        assert.throws(
          () => tcpBind("0.0.0.0:7717", {}),
          (e: unknown) =>
            e instanceof TermadaError && e.code === "INVALID_ARGUMENT" &&
            /loopback/.test(e.message),
        );
      },
    );
  } finally {
    await Deno.remove(marker);
  }
});
