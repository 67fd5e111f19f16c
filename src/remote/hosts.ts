/**
 * Host names as rules and connections see them: one spelling per address, so a rule about
 * `127.0.0.1` also holds for `127.1`, `0x7f000001`, `2130706433`, `0177.0.0.1` or `LOCALHOST`.
 */

/** Lower case; an IP literal in any form the resolver accepts becomes its usual notation. */
export function canonicalHost(host: string): string {
  const h = host.trim().toLowerCase().replace(/^\[(.*)\]$/, "$1");
  if (h.includes(":")) {
    let v6: string;
    try {
      v6 = new URL(`http://[${h}]/`).hostname.replace(/^\[(.*)\]$/, "$1");
    } catch {
      return h;
    }
    // An IPv4-mapped address is that IPv4 address.
    const m = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(v6);
    if (!m) return v6;
    const hi = parseInt(m[1]!, 16), lo = parseInt(m[2]!, 16);
    return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  }
  // Only what could be an IPv4 literal (digits, dots, hex): names stay as they are.
  if (/^(0x[0-9a-f]+|[0-9]+)(\.(0x[0-9a-f]+|[0-9]+)){0,3}$/.test(h)) {
    try {
      return new URL(`http://${h}/`).hostname;
    } catch {
      return h;
    }
  }
  return h.replace(/\.$/, "");
}

/** 127.0.0.0/8, ::1, 0.0.0.0, localhost and *.localhost: this machine. */
export function isLoopbackHost(host: string): boolean {
  const h = canonicalHost(host);
  return h === "localhost" || h.endsWith(".localhost") || h === "::1" || h === "0.0.0.0" ||
    h === "::" || /^127\.\d+\.\d+\.\d+$/.test(h);
}
