/**
 * The typed actions the gateway admits, once for every layer: governance rules and budgets name
 * them (src/config), the actions table records them (src/store).
 */
export const ACTION_KINDS = [
  "exec",
  "input",
  "session",
  "fleet",
  "forward",
  "file.read",
  "file.write",
  "plugin",
  "adapter",
] as const;
export type ActionKind = typeof ACTION_KINDS[number];
