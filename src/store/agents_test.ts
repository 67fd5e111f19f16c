import assert from "node:assert/strict";
import { Store } from "./db.ts";
import { fakeClock, isCode, withDb } from "./_testing.ts";

Deno.test("agents.upsert keeps first_seen and the name, updates last_seen and via", () => {
  withDb((path) => {
    const clock = fakeClock(1000);
    using store = Store.open(path, { clock });
    store.agents.upsert({ id: "agt_a", name: "claude", via: "stdio" });
    clock.set(2000);
    store.agents.upsert({ id: "agt_b", via: "http" });
    clock.set(3000);
    store.agents.upsert({ id: "agt_a", via: "http" });
    assert.deepEqual(store.agents.list(), [
      { id: "agt_a", name: "claude", via: "http", first_seen: 1000, last_seen: 3000 },
      { id: "agt_b", name: null, via: "http", first_seen: 2000, last_seen: 2000 },
    ]);
  });
});

Deno.test("agents.upsert refuses an id longer than 64 characters", () => {
  withDb((path) => {
    using store = Store.open(path);
    assert.throws(
      () => store.agents.upsert({ id: "a".repeat(65), via: "stdio" }),
      isCode("INVALID_ARGUMENT"),
    );
    assert.deepEqual(store.agents.list(), []);
  });
});
