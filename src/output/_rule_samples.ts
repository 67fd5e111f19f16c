/**
 * One sample per built-in redaction rule, in the order of redact.ts (a rule added there needs a
 * sample here: scan_test.ts counts them against BUILTIN_RULE_COUNT).
 */
export const RULE_SAMPLES: readonly string[] = [
  "export T=ghp_" + "a1B2".repeat(9),
  "github_pat_" + "x1_".repeat(8),
  "key AKIAABCDEFGHIJKLMNOP here",
  "sk-proj-abcdefghij0123456789xyz",
  "xoxb-1234567890-abcdef",
  "AIza" + "b".repeat(35),
  "eyJhbGciOi.eyJzdWIiOi.c2lnbmF0dXJl",
  "Authorization: Bearer abcdef.ghijk",
  'db_password="hunter2 secret"',
  "API_KEY=abc123xyz",
  '"client_secret": "abcdef123"',
  "  password: hunter2x",
  "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAx\n-----END RSA PRIVATE KEY-----",
  '{"k": "-----BEGIN EC PRIVATE KEY-----\\nMHcCAQEEI\\n-----END EC PRIVATE KEY-----"}',
];
