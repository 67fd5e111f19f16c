/**
 * Secrets a job's cleaned output must not show however the program prints them: a value whose
 * key went out before a pause (a commit of the partial line), a token or quoted value cut by
 * such a commit, a line drawn over after a CR or backspace, and a partial line looked at many
 * times (prompts, waits) inside a PEM block.
 */
import assert from "node:assert/strict";
import { classify, Redactor } from "../output/mod.ts";
import { RULE_SAMPLES } from "../output/_rule_samples.ts";
import type { Job } from "./job.ts";
import { testJob as job } from "./_test_job.ts";

const enc = new TextEncoder();
/** Everything handed out so far (a live job's read says there is more until it ends). */
function output(j: Job): string {
  return j.buffer.read(undefined, 1 << 20).output;
}

/**
 * Feeds `chunks`, committing the partial line (an idle reader, a prompt) after each one but the
 * last; returns every view an agent had: what was read after each commit, each pending text, and
 * the final output.
 */
function views(chunks: string[], redactor?: Redactor): { seen: string[]; final: string } {
  const j = job(redactor);
  const seen: string[] = [];
  chunks.forEach((text, i) => {
    const c = enc.encode(text);
    j.feed(c, classify(c));
    seen.push(j.pendingText());
    if (i < chunks.length - 1) {
      j.commitPending();
      seen.push(output(j));
    }
  });
  j.finish("exited", { exitCode: 0 });
  return { seen, final: output(j) };
}

const TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0".repeat(2);

Deno.test("a secret cut by a commit of the partial line is masked in every view", async (t) => {
  const cases: [string, string[], string][] = [
    ["a value whose key went out first", ["export TOKEN=", "s3cr3tvalue123\n"], "s3cr3tvalue"],
    [
      "a token cut in its body",
      [`x ${TOKEN.slice(0, 20)}`, `${TOKEN.slice(20)}\n`],
      TOKEN.slice(4, 20),
    ],
    ["a token cut in its lead", ["use gh", `${TOKEN.slice(2)} now\n`], TOKEN.slice(4, 16)],
    ["a token cut at every third byte", TOKEN.match(/.{1,3}/g)!.concat(["\n"]), TOKEN.slice(4, 12)],
    ["a quoted value cut before its closing quote", ['password="hunt', 'er2-long"\n'], "hunt"],
    ["a JSON value cut", ['{"api_key": "ab', 'cdefgh12345"}\n'], "cdefgh"],
    ["a YAML value cut", ["password: correct ", "horse battery\n"], "horse"],
    ["an Authorization header cut", ["Authorization: Bearer abc", "defghijkl\n"], "defghijkl"],
  ];
  for (const [name, chunks, secret] of cases) {
    await t.step(name, () => {
      const { seen, final } = views(chunks);
      for (const v of [...seen, final]) {
        assert.ok(!v.includes(secret), `${name}: ${JSON.stringify(v)}`);
      }
      assert.ok(final.includes("[REDACTED]") || final.includes("***"), final);
    });
  }
});

Deno.test("a held partial line still goes out: plain text at once, a held tail with the rest or at the end", () => {
  const j = job();
  j.feed(enc.encode("Continue? [y/N] "));
  j.commitPending();
  assert.equal(output(j), "Continue? [y/N] ");
  assert.equal(j.pendingText(), "");
  j.feed(enc.encode("ok\nskip gh"));
  j.commitPending();
  assert.equal(output(j), "Continue? [y/N] ok\nskip ");
  j.finish("exited", { exitCode: 0 });
  assert.equal(output(j), "Continue? [y/N] ok\nskip gh"); // the end hands out everything
});

Deno.test("a line drawn over after a CR or backspaces keeps its secret masked", async (t) => {
  const cases: [string, string[], string][] = [
    ["the key overwritten after a CR", ["token=abcdef123456\rXXXXXX\n"], "abcdef"],
    ["in two chunks", ["password=hunter2hunter2", "\rxxxxxxxxx\n"], "hunter2"],
    ["backspaces over the key", ["secret=zyxwvut98765" + "\b".repeat(19) + "______\n"], "zyxw"],
    ["a token's lead drawn over", [`${TOKEN}\rgh-`, "\n"], TOKEN.slice(4, 20)],
    ["a literal partly drawn over", ["hunter2isthepw\rab\n"], "nter2is"],
  ];
  for (const [name, chunks, secret] of cases) {
    await t.step(name, () => {
      const r = new Redactor();
      r.addLiteral("hunter2isthepw");
      const { seen, final } = views(chunks, r);
      for (const v of [...seen, final]) {
        assert.ok(!v.includes(secret), `${name}: ${JSON.stringify(v)}`);
      }
    });
  }
  await t.step("text written over the secret is shown: it is not the secret", () => {
    const { final } = views(["token=abcdef123456\rtoken=[hidden]plain\n"]);
    assert.equal(final, "token=[REDACTED]\n"); // the value rule masks the new value too
    const other = views(["token=abcdef\r                 \n"]).final;
    assert.equal(other, " ".repeat(17) + "\n");
  });
  await t.step("a progress bar drawn over again and again is untouched", () => {
    const { final } = views(["\r 10%\r 50%\r100% done\n"]);
    assert.equal(final, "100% done\n");
  });
});

Deno.test("looking at a partial line inside a PEM block does not end the block", () => {
  const j = job();
  j.feed(enc.encode("-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nMIIEv"));
  for (let i = 0; i < 600; i++) j.pendingText(); // a waiter looking at each change
  j.feed(
    enc.encode("QIBADANBgkqhkiG9w0BAQEFAASC\nBKcwggSjAgEAAoIBAQC7\n-----END PRIVATE KEY-----\n"),
  );
  j.finish("exited", { exitCode: 0 });
  const out = output(j);
  assert.ok(!out.includes("BKcwggSjAgEAAoIBAQC7"), out);
  assert.ok(!out.includes("MIIEv"), out);
});

Deno.test("every built-in rule's sample cut at every byte by a commit shows none of its secret", () => {
  for (const sample of RULE_SAMPLES) {
    const bytes = enc.encode(sample);
    const spans = new Redactor().spansOf(bytes);
    const plain = sample.split("\n").join(" ");
    const secrets: string[] = [];
    for (let k = 0; k < spans.length; k += 2) {
      const s = new TextDecoder().decode(bytes.subarray(spans[k]!, spans[k + 1]!)).slice(0, 6);
      if (s.length >= 4) secrets.push(s);
    }
    assert.ok(secrets.length > 0, sample);
    for (let cut = 1; cut < sample.length; cut++) {
      const { seen, final } = views([sample.slice(0, cut), sample.slice(cut) + "\n"]);
      for (const v of [...seen, final]) {
        for (const secret of secrets) {
          // Text outside the secret that happens to hold the same characters is not a leak.
          const elsewhere = plain.split(secret).length - 1 > 1;
          assert.ok(
            elsewhere || !v.includes(secret),
            `${sample} cut at ${cut}: ${JSON.stringify(v)}`,
          );
        }
      }
    }
  }
});
