import assert from "node:assert/strict";
import { TermadaError } from "../shared/mod.ts";
import { RAW_TOKEN_HOLD_MIN, Redactor, SecretSet } from "./redact.ts";
import { fullGc } from "../shared/_test_gc.ts";
import { seededRandom } from "../shared/mod.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

function redact(text: string, redactor = new Redactor()): string {
  return dec.decode(redactor.redact(enc.encode(text)));
}

const prng = seededRandom;

function streamAll(redactor: Redactor, chunks: Uint8Array[]): string {
  const s = redactor.stream();
  const out = chunks.map((c) => dec.decode(s.push(c), { stream: true }));
  return out.join("") + dec.decode(s.flush());
}

const ALNUM36 = "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8";

Deno.test("Redactor masks built-in token patterns", async (t) => {
  const cases: Array<[string, string, string]> = [
    ["GitHub classic token", `tok ghp_${ALNUM36} end`, "tok [REDACTED] end"],
    ["GitHub other prefixes", `gho_${ALNUM36} ghs_${ALNUM36}x`, "[REDACTED] [REDACTED]"],
    ["GitHub fine-grained PAT", "github_pat_11ABCDEFG0123456789_abcdefXYZ", "[REDACTED]"],
    ["AWS access key id", "key AKIAIOSFODNN7EXAMPLE,", "key [REDACTED],"],
    ["AWS temporary key id", "ASIAIOSFODNN7EXAMPLE", "[REDACTED]"],
    ["OpenAI key", "OPENAI sk-proj-4bC9dE0fGh1IjK2lMn3o end", "OPENAI [REDACTED] end"],
    ["Anthropic key", "x sk-ant-api03-AbCdEf012345_GhIjKl-678", "x [REDACTED]"],
    ["Slack token", "xoxb-123456789012-abcdefABCDEF", "[REDACTED]"],
    ["Google API key", "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q", "[REDACTED]"],
    [
      "JWT",
      "jwt=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dBjftJeZ4CVPmB92K27uhbUJU1p1r_wW1gFWFOEjXk end",
      "jwt=[REDACTED] end",
    ],
    [
      "Authorization Bearer",
      "Authorization: Bearer abc.DEF-123_x~",
      "Authorization: Bearer [REDACTED]",
    ],
    [
      "authorization header, any case",
      "-H 'authorization: bearer tok123'",
      "-H 'authorization: bearer ******'",
    ],
    ["Authorization Basic", "Authorization: Basic dXNlcjpwYXNz", "Authorization: Basic [REDACTED]"],
  ];
  for (const [name, input, expected] of cases) {
    await t.step(name, () => assert.equal(redact(input), expected));
  }
});

Deno.test("Redactor masks only the value of key=value secrets", async (t) => {
  const cases: Array<[string, string, string]> = [
    ["password=", "mysql password=hunter2 -h db", "mysql password=******* -h db"],
    ["secret=", "CLIENT_SECRET=abcdefghijklmnop", "CLIENT_SECRET=[REDACTED]"],
    [
      "token= in a URL",
      "GET /cb?access_token=abc123&state=x",
      "GET /cb?access_token=******&state=x",
    ],
    ["api_key=", "api_key=k-123 apikey=zzzz API-KEY=qq", "api_key=***** apikey=**** API-KEY=**"],
    ["flags", "--password=s3cr3t --db-token=t0k", "--password=****** --db-token=***"],
    ["double quoted", 'export DB_PASSWORD="two words"', 'export DB_PASSWORD="*********"'],
    ["single quoted", "secret='x y'", "secret='***'"],
    ["JSON", '{"password": "hunter2", "user": "bob"}', '{"password": "*******", "user": "bob"}'],
    ["YAML", "  db_password: correct horse", "  db_password: [REDACTED]"],
    ["YAML list item", "- secret: abc", "- secret: ***"],
  ];
  for (const [name, input, expected] of cases) {
    await t.step(name, () => assert.equal(redact(input), expected));
  }
});

Deno.test("Redactor leaves look-alikes alone", async (t) => {
  const cases = [
    `ghp_${"a".repeat(35)}`,
    `xghp_${ALNUM36}`,
    "AKIAIOSFODNN7EXAMPL",
    "AKIAIOSFODNN7EXAMPLEX",
    "task-management-system-overview-page",
    "sk-this-is-a-long-name-without-digits",
    "max_tokens=100 tokens=5 token_count=3",
    "const token = getToken();",
    "error: invalid token: expected identifier",
    "PWD=/home/user",
    "eyJhbGciOiJIUzI1NiJ9 alone",
    "a: b = c",
  ];
  for (const input of cases) {
    await t.step(input, () => assert.equal(redact(input), input));
  }
});

Deno.test("Redactor masks PEM private key blocks line by line", async (t) => {
  const key = [
    "-----BEGIN RSA PRIVATE KEY-----",
    "Proc-Type: 4,ENCRYPTED",
    "",
    "MIIEpAIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun",
    "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK",
    "abc=",
    "-----END RSA PRIVATE KEY-----",
    "after the key",
  ].join("\n") + "\n";
  const expected = [
    "-----BEGIN RSA PRIVATE KEY-----",
    "Proc-Type: 4,ENCRYPTED",
    "",
    "[REDACTED]",
    "[REDACTED]",
    "****",
    "-----END RSA PRIVATE KEY-----",
    "after the key",
  ].join("\n") + "\n";
  await t.step("in one chunk", () => assert.equal(redact(key), expected));
  await t.step("one line per redact call", () => {
    const r = new Redactor();
    const out = key.split(/(?<=\n)/).map((line) => redact(line, r)).join("");
    assert.equal(out, expected);
  });
  await t.step("with CRLF line ends", () => {
    assert.equal(redact(key.replaceAll("\n", "\r\n")), expected.replaceAll("\n", "\r\n"));
  });
  await t.step("a line that is not key material ends the block", () => {
    const grep = "a.pem:-----BEGIN PRIVATE KEY-----\nREADME.md: see the docs\nplain\n";
    assert.equal(redact(grep), grep);
  });
  await t.step("a whole key on one line (JSON string)", () => {
    const json =
      '{"k": "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBg\\n-----END PRIVATE KEY-----\\n"}';
    assert.equal(
      redact(json),
      '{"k": "-----BEGIN PRIVATE KEY-----[REDACTED]-----END PRIVATE KEY-----\\n"}',
    );
  });
});

Deno.test("Redactor masks registered literals", async (t) => {
  await t.step("[REDACTED] when it fits, stars otherwise", () => {
    const r = new Redactor({ literals: ["hunter22", "correct-horse-battery"] });
    assert.equal(
      redact("pw hunter22, phrase correct-horse-battery.", r),
      "pw ********, phrase [REDACTED].",
    );
  });
  await t.step("every occurrence, overlapping ones merged", () => {
    const r = new Redactor({ literals: ["abab"] });
    assert.equal(redact("xababab abab", r), "x****** ****");
  });
  await t.step("the longest literal wins at a position", () => {
    const r = new Redactor({ literals: ["pass", "passphrase-long"] });
    assert.equal(redact("passphrase-long pass", r), "[REDACTED] ****");
  });
  await t.step("multibyte literals", () => {
    const r = new Redactor({ literals: ["pässwörd"] });
    assert.equal(redact("x pässwörd y", r), "x [REDACTED] y");
  });
  await t.step("literals apply with patterns off", () => {
    const r = new Redactor({ patterns: false, literals: ["hunter22"] });
    assert.equal(redact("password=hunter22 token=x", r), "password=******** token=x");
  });
  await t.step("a literal added later applies from then on", () => {
    const r = new Redactor();
    assert.equal(redact("say abcd", r), "say abcd");
    r.addLiteral("abcd");
    assert.equal(redact("say abcd", r), "say ****");
  });
});

Deno.test("Redactor refuses literals that would mask ordinary text or exceed the bounds", () => {
  const r = new Redactor();
  for (const bad of ["", "a", "abc"]) {
    assert.throws(
      () => r.addLiteral(bad),
      (e) => e instanceof TermadaError && e.code === "INVALID_ARGUMENT",
    );
  }
  r.addLiteral("é€"); // 5 bytes: the bound is in bytes
  assert.throws(() => r.addLiteral("x".repeat(4097)), TermadaError);
  r.addLiteral("x".repeat(4096));
  for (let i = 0; i < 254; i++) r.addLiteral(`secret-${i}`);
  r.addLiteral("secret-0"); // a duplicate is not counted
  assert.throws(
    () => r.addLiteral("one-too-many"),
    (e) => e instanceof TermadaError && e.code === "INVALID_ARGUMENT",
  );
  assert.throws(() => new Redactor({ literals: ["ab"] }), TermadaError);
});

Deno.test("Redactor returns the input untouched when nothing matches", () => {
  const r = new Redactor({ literals: ["hunter22"] });
  const input = enc.encode("y\n".repeat(1000) + "ordinary output: a=b, c:d\n");
  assert.equal(r.redact(input), input);
  const s = r.stream();
  const chunk = enc.encode("plain text\n");
  assert.equal(s.push(chunk), chunk);
});

Deno.test("Redactor stream catches a literal split across chunks", async (t) => {
  const secret = "s3cr3t-Value!";
  const text = `login ${secret} then s3cr3t and ${secret}${secret} end s3cr`;
  const bytes = enc.encode(text);
  const expected = "login [REDACTED] then s3cr3t and [REDACTED][REDACTED] end s3cr";
  await t.step("every split point", () => {
    for (let i = 0; i <= bytes.length; i++) {
      const r = new Redactor({ literals: [secret] });
      assert.equal(
        streamAll(r, [bytes.subarray(0, i), bytes.subarray(i)]),
        expected,
        `split at ${i}`,
      );
    }
  });
  await t.step("every pair of split points", () => {
    for (let i = 0; i <= bytes.length; i++) {
      for (let j = i; j <= bytes.length; j++) {
        const r = new Redactor({ literals: [secret] });
        const parts = [bytes.subarray(0, i), bytes.subarray(i, j), bytes.subarray(j)];
        assert.equal(streamAll(r, parts), expected, `split at ${i} and ${j}`);
      }
    }
  });
  await t.step("byte by byte, with a literal that is a prefix of another", () => {
    const r = new Redactor({ literals: ["abcd", "abcdefghijkl"] });
    const parts = Array.from(enc.encode("x abcdefghijkl abcdefg abcd"), (b) => Uint8Array.of(b));
    assert.equal(streamAll(r, parts), "x [REDACTED] ****efg ****");
  });
});

Deno.test("Redactor stream does not delay ordinary output", () => {
  const r = new Redactor({ literals: ["hunter22"] });
  const s = r.stream();
  assert.equal(dec.decode(s.push(enc.encode("building...\n"))), "building...\n");
  // Only a tail that could start the secret is held back, and only until it cannot.
  assert.equal(dec.decode(s.push(enc.encode("step 1 hun"))), "step 1 ");
  assert.equal(dec.decode(s.push(enc.encode("dred\n"))), "hundred\n");
  assert.equal(dec.decode(s.push(enc.encode("hunt"))), "");
  assert.equal(dec.decode(s.flush()), "hunt");
  assert.equal(s.flush().length, 0);
});

Deno.test("Redactor stream keeps escape sequences around masked values", () => {
  const r = new Redactor();
  const raw = "\x1b[33mtoken=abc123\x1b[0m\r\nAuthorization: Bearer xyz\x1b[K\r\n";
  assert.equal(
    streamAll(r, [enc.encode(raw)]),
    "\x1b[33mtoken=******\x1b[0m\r\nAuthorization: Bearer ***\x1b[K\r\n",
  );
});

Deno.test("Redactor never lengthens its input and never lets a literal through", async (t) => {
  const secret = "Zq9-secret";
  const fragments = [
    "a",
    " ",
    "\n",
    "\r\n",
    "=",
    ":",
    '"',
    "'",
    "-",
    "_",
    "password",
    "token",
    "api_key",
    "ghp_",
    "AKIA",
    "ASIA",
    "AIza",
    "sk-",
    "xoxb-",
    "eyJ",
    ".",
    "Authorization: Bearer ",
    "-----BEGIN ",
    "PRIVATE KEY-----",
    "-----END ",
    "MIIE",
    "0123456789",
    "ABCDEFGHIJKLMNOP",
    "é",
    "€",
    "😀",
    "\x1b[31m",
    "Zq9",
    "-sec",
    "ret",
    secret,
  ];
  const random = prng(20240611);
  const pick = () => fragments[Math.floor(random() * fragments.length)]!;
  await t.step("redact()", () => {
    const r = new Redactor({ literals: [secret] });
    for (let round = 0; round < 2000; round++) {
      let text = "";
      const parts = 1 + Math.floor(random() * 40);
      for (let k = 0; k < parts; k++) text += pick();
      const input = enc.encode(text);
      const out = r.redact(input);
      assert.ok(out.length <= input.length, `lengthened ${JSON.stringify(text)}`);
      assert.ok(!dec.decode(out).includes(secret), `leaked in ${JSON.stringify(text)}`);
    }
  });
  await t.step("stream() with random chunking", () => {
    for (let round = 0; round < 500; round++) {
      const r = new Redactor({ literals: [secret] });
      let text = "";
      const parts = 1 + Math.floor(random() * 60);
      for (let k = 0; k < parts; k++) text += pick();
      const input = enc.encode(text);
      const chunks: Uint8Array[] = [];
      for (let at = 0; at < input.length;) {
        const len = 1 + Math.floor(random() * 12);
        chunks.push(input.subarray(at, at + len));
        at += len;
      }
      const s = r.stream();
      let outLen = 0;
      const outs: Uint8Array[] = [];
      for (const c of chunks) {
        const o = s.push(c);
        outLen += o.length;
        outs.push(o);
      }
      const tail = s.flush();
      outs.push(tail);
      outLen += tail.length;
      assert.ok(outLen <= input.length, `lengthened ${JSON.stringify(text)}`);
      const joined = dec.decode(Uint8Array.from(outs.flatMap((o) => [...o])));
      assert.ok(!joined.includes(secret), `leaked in ${JSON.stringify(text)}`);
    }
  });
});

Deno.test("a daemon-wide secret is masked in every redactor sharing the set, and its printed forms", async (t) => {
  const secrets = new SecretSet();
  const a = new Redactor({ secrets });
  const b = new Redactor({ secrets, patterns: false });
  const value = "postgres://app:s3cr3t-Pa55@db:5432/prod";
  secrets.add(new TextEncoder().encode(value));
  const red = (r: Redactor, s: string) =>
    new TextDecoder().decode(r.redact(new TextEncoder().encode(s)));
  await t.step("the bytes, in each redactor (registered after they were made)", () => {
    assert.ok(!red(a, `url=${value}\n`).includes("s3cr3t"));
    assert.ok(!red(b, `${value}`).includes("s3cr3t"));
  });
  await t.step("base64 at each alignment, standard and URL-safe, and hex", () => {
    for (const prefix of ["", "x", "xy", "xyz"]) {
      const b64 = btoa(prefix + value + "\n");
      const out = red(b, b64);
      assert.ok(out.includes("[REDACTED]"), `prefix ${JSON.stringify(prefix)}: ${out}`);
      // What stays visible cannot be decoded back into the value.
      assert.ok(!out.includes(btoa(value).slice(4, 20)));
    }
    const hex = Array.from(new TextEncoder().encode(value), (x) => x.toString(16).padStart(2, "0"))
      .join("");
    assert.ok(!red(b, hex).includes(hex.slice(0, 16)));
    assert.ok(!red(b, hex.toUpperCase()).includes(hex.toUpperCase().slice(0, 16)));
  });
  await t.step("split across stream chunks at every byte", () => {
    const bytes = new TextEncoder().encode(`before ${value} after`);
    for (let cut = 1; cut < bytes.length; cut++) {
      const s = b.stream();
      const out = new TextDecoder().decode(
        new Uint8Array([
          ...s.push(bytes.subarray(0, cut)),
          ...s.push(bytes.subarray(cut)),
          ...s.flush(),
        ]),
      );
      assert.equal(out, "before [REDACTED] after", `cut ${cut}`);
    }
  });
  await t.step("a multi-line value: as the terminal shows it (CRLF) and line by line", () => {
    const key = "line-one-of-the-key-0123456789\nline-two-of-the-key-abcdefghij\n";
    secrets.add(new TextEncoder().encode(key));
    const out = red(b, key.replaceAll("\n", "\r\n"));
    assert.ok(!out.includes("line-one") && !out.includes("line-two"), out);
    assert.ok(!red(b, "see: line-two-of-the-key-abcdefghij").includes("abcdefghij"));
  });
  await t.step("values shorter than 4 bytes are refused", () => {
    assert.throws(() => secrets.add(new Uint8Array([1, 2, 3])), /minimum is 4/);
  });
});

Deno.test("stream masks a secret drawn with escape sequences between its characters", async (t) => {
  const secrets = new SecretSet();
  secrets.add(new TextEncoder().encode("Zq8-vault-S3cret"));
  const r = new Redactor({ secrets, patterns: false });
  const drawn = "\x1b[?1049h\x1b[H" +
    [..."Zq8-vault-S3cret"].map((c) => `\x1b[1m${c}\x1b[0m`).join("") + "\x1b]0;title\x07 end";
  const bytes = new TextEncoder().encode(drawn);
  // deno-lint-ignore no-control-regex
  const visible = (s: string) => s.replace(/\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07/g, "");
  await t.step("in one chunk: the characters become stars, the sequences stay", () => {
    const s = r.stream();
    const out = new TextDecoder().decode(new Uint8Array([...s.push(bytes), ...s.flush()]));
    assert.equal(visible(out), "*".repeat(16) + " end");
    assert.ok(out.includes("\x1b[1m") && out.includes("\x1b]0;title\x07"));
  });
  await t.step("split at every byte", () => {
    for (let cut = 1; cut < bytes.length; cut++) {
      const s = r.stream();
      const out = new TextDecoder().decode(
        new Uint8Array([
          ...s.push(bytes.subarray(0, cut)),
          ...s.push(bytes.subarray(cut)),
          ...s.flush(),
        ]),
      );
      assert.equal(visible(out), "*".repeat(16) + " end", `cut ${cut}`);
    }
  });
  await t.step("ordinary coloured output passes unchanged", () => {
    const s = r.stream();
    const plain = new TextEncoder().encode("\x1b[32mok\x1b[0m Zq8 vault\n");
    assert.deepEqual(s.push(plain), plain);
  });
});

Deno.test("a redactor without literals of its own costs no literal tables (one per finished job)", async () => {
  const used = async () => {
    await fullGc();
    const m = Deno.memoryUsage();
    return m.heapUsed + m.external;
  };
  const before = await used();
  const kept = Array.from({ length: 200 }, () => new Redactor());
  const each = (await used() - before) / kept.length;
  assert.ok(each < 16 * 1024, `${Math.round(each)} bytes per redactor`);
  // It still masks what it is told, once told.
  kept[0]!.addLiteral("s3cret-value");
  assert.equal(
    new TextDecoder().decode(kept[0]!.redact(new TextEncoder().encode("x s3cret-value y"))),
    "x [REDACTED] y",
  );
});

Deno.test("raw stream: a token cut by the end of a bulk chunk is held for the next and masked whole", () => {
  const token = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0".repeat(2);
  const pad = "x".repeat(RAW_TOKEN_HOLD_MIN) + " ";
  for (let cut = 1; cut < token.length; cut++) {
    const s = new Redactor().stream();
    const a = dec.decode(s.push(enc.encode(pad + token.slice(0, cut))));
    assert.equal(s.tokenHeld, true, `cut at ${cut}`);
    const b = dec.decode(s.push(enc.encode(token.slice(cut) + " done\n")));
    assert.equal(a + b + dec.decode(s.flush()), pad + "[REDACTED] done\n", `cut at ${cut}`);
  }
});

Deno.test("raw stream: a typed key's echo is never held; a held token tail is released as it is", () => {
  const s = new Redactor().stream();
  assert.equal(dec.decode(s.push(enc.encode("g"))), "g");
  assert.equal(dec.decode(s.push(enc.encode("h"))), "h");
  assert.equal(s.tokenHeld, false);
  const pad = "y".repeat(RAW_TOKEN_HOLD_MIN) + "\n$ ";
  assert.equal(dec.decode(s.push(enc.encode(pad + "ghp_ab"))), pad);
  assert.equal(s.tokenHeld, true);
  assert.equal(dec.decode(s.release()), "ghp_ab");
  assert.equal(s.tokenHeld, false);
  assert.equal(dec.decode(s.flush()), "");
});

Deno.test("raw stream: a registered secret the token hold would cut goes out whole, masked", () => {
  const r = new Redactor();
  r.addLiteral("X=ghp_secretsecret");
  const s = r.stream();
  const pad = "z".repeat(RAW_TOKEN_HOLD_MIN) + " ";
  const out = dec.decode(s.push(enc.encode(pad + "X=ghp_secretsecret"))) +
    dec.decode(s.push(enc.encode("\n"))) + dec.decode(s.flush());
  assert.ok(!out.includes("secretsecret"), out);
  assert.equal(out, pad + "[REDACTED]\n");
});
