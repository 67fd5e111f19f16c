import assert from "node:assert/strict";
import { NOTIFICATION_KINDS, NotificationsConfig } from "./schema.ts";

const parse = (v: unknown) => NotificationsConfig.safeParse(v);
const telegram = (t: Record<string, unknown>) => ({
  telegram: { enabled: true, bot_token_file: "/etc/termada/bot-token", chat_id: "123456", ...t },
});

Deno.test("notifications config: an empty section means everything off with safe defaults", () => {
  const c = NotificationsConfig.parse({});
  assert.equal(c.desktop.enabled, false);
  assert.equal(c.telegram.enabled, false);
  assert.equal(c.telegram.api_base, "https://api.telegram.org");
  assert.deepEqual(c.events, [...NOTIFICATION_KINDS]);
  assert.deepEqual(c.rate, { per_minute: 20, burst: 5 });
  assert.equal(c.queue_size, 256);
  assert.equal(c.max_retries, 6);
  assert.deepEqual(c.failures, {
    statuses: ["failed", "timed_out", "killed"],
    nonzero_exit: false,
  });
});

Deno.test("notifications config accepts a full telegram and desktop setup", () => {
  const c = NotificationsConfig.parse({
    desktop: { enabled: true, urgency: "normal" },
    telegram: {
      enabled: true,
      bot_token_vault: "telegram-bot",
      chat_id: -1001234567890,
      api_base: "https://tg-proxy.internal:8443/",
      ca_file: "/etc/termada/ca.pem",
      timeout_ms: 5000,
    },
    events: ["approval_pending", "stop_all"],
    rate: { per_minute: 6, burst: 2 },
  });
  assert.equal(c.telegram.chat_id, "-1001234567890");
  assert.equal(c.desktop.urgency, "normal");
  assert.equal(parse(telegram({ chat_id: "@termada_alerts" })).success, true);
});

Deno.test("notifications config refuses what would leak or be unbounded", async (t) => {
  const bad: Record<string, unknown> = {
    "an http api_base": telegram({ api_base: "http://api.telegram.org" }),
    "an http loopback api_base": telegram({ api_base: "http://127.0.0.1:8080" }),
    "credentials in api_base": telegram({ api_base: "https://u:p@api.telegram.org" }),
    "a query in api_base": telegram({ api_base: "https://api.telegram.org/?x=1" }),
    "an inline token": telegram({ bot_token: "123:abc" }),
    "unknown top-level keys": { sounds: true },
    "unknown desktop keys": { desktop: { enabled: true, icon: "x" } },
    "a relative token file": telegram({ bot_token_file: "bot-token" }),
    "both token sources": telegram({ bot_token_vault: "bot" }),
    "no token source": { telegram: { enabled: true, chat_id: "1" } },
    "no chat id": { telegram: { enabled: true, bot_token_file: "/t" } },
    "a malformed chat id": telegram({ chat_id: "12; DROP" }),
    "an oversized chat id": telegram({ chat_id: "1".repeat(40) }),
    "chat id 0": telegram({ chat_id: 0 }),
    "a huge api_base": telegram({ api_base: "https://a.example/" + "x".repeat(3000) }),
    "a huge token path": telegram({ bot_token_file: "/" + "x".repeat(5000) }),
    "a rate over the maximum": { rate: { per_minute: 100_000 } },
    "a zero burst": { rate: { burst: 0 } },
    "a fractional rate": { rate: { per_minute: 1.5 } },
    "a huge queue": { queue_size: 1_000_000 },
    "too many retries": { max_retries: 100 },
    "a kind listed twice": { events: ["stop_all", "stop_all"] },
    "an unknown kind": { events: ["job_started"] },
    "a tiny request timeout": telegram({ timeout_ms: 1 }),
  };
  for (const [name, value] of Object.entries(bad)) {
    await t.step(name, () => assert.equal(parse(value).success, false, name));
  }
});
