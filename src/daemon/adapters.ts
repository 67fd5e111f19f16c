/**
 * The adapters the config's `adapters:` section offers, built once at start: `file.patch` under
 * its roots, `http.request` over its named endpoints (docs/PLUGINS.md "Adapters").
 */
import { type AnyAdapter, filePatchAdapter, httpTargetsAdapter } from "../adapters/mod.ts";
import type { AdaptersConfig } from "../config/mod.ts";

export function configuredAdapters(config: AdaptersConfig): AnyAdapter[] {
  const out: AnyAdapter[] = [];
  if (config.file_patch) out.push(filePatchAdapter({ roots: [...config.file_patch.roots] }));
  if (config.http.length > 0) {
    out.push(httpTargetsAdapter(Object.fromEntries(config.http.map((t) => [t.name, {
      baseUrl: t.base_url,
      headers: { ...t.headers },
      ...(t.verify ? { verify: t.verify } : {}),
      ...(t.reconcile ? { reconcile: t.reconcile } : {}),
      ...(t.compensate ? { compensate: t.compensate } : {}),
      timeoutMs: t.timeout_ms,
      ...(t.cost !== undefined ? { cost: t.cost } : {}),
    }]))));
  }
  return out;
}
