/**
 * Test-only: a private CA and a server certificate for 127.0.0.1 it signed (openssl CLI,
 * EC P-256), for the tests that stand up a local HTTPS server (notification Bot API, anchor
 * receivers, the release server). Files go into `dir`, which the caller owns and removes.
 */
import { join } from "node:path";

export interface TestCerts {
  /** PEM of the private CA, and its file in `dir`. */
  ca: string;
  caFile: string;
  /** The 127.0.0.1 server certificate and key (PEM). */
  cert: string;
  key: string;
}

export async function makeTestCerts(dir: string): Promise<TestCerts> {
  const run = async (args: string[]) => {
    const out = await new Deno.Command("openssl", {
      args,
      cwd: dir,
      stdout: "piped",
      stderr: "piped",
    }).output();
    if (!out.success) {
      throw new Error(`openssl ${args[0]}: ${new TextDecoder().decode(out.stderr)}`);
    }
  };
  await Deno.writeTextFile(
    join(dir, "ext.cnf"),
    "subjectAltName=IP:127.0.0.1\nbasicConstraints=critical,CA:FALSE\n" +
      "keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n",
  );
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];
  await run([
    "req",
    "-x509",
    ...ec,
    "-keyout",
    "ca.key",
    "-out",
    "ca.pem",
    "-days",
    "2",
    "-subj",
    "/CN=termada-test-ca",
    "-addext",
    "basicConstraints=critical,CA:TRUE",
    "-addext",
    "keyUsage=critical,keyCertSign",
  ]);
  await run(["req", ...ec, "-keyout", "srv.key", "-out", "srv.csr", "-subj", "/CN=127.0.0.1"]);
  await run([
    "x509",
    "-req",
    "-in",
    "srv.csr",
    "-CA",
    "ca.pem",
    "-CAkey",
    "ca.key",
    "-set_serial",
    "2",
    "-days",
    "2",
    "-extfile",
    "ext.cnf",
    "-out",
    "srv.pem",
  ]);
  return {
    ca: await Deno.readTextFile(join(dir, "ca.pem")),
    caFile: join(dir, "ca.pem"),
    cert: await Deno.readTextFile(join(dir, "srv.pem")),
    key: await Deno.readTextFile(join(dir, "srv.key")),
  };
}
