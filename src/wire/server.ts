/** What a daemon tells an agent about itself (`capabilities`). */
import { z } from "zod";

export const CapabilitiesInput = z.strictObject({});

export const Capabilities = z.object({
  version: z.string(),
  platform: z.string(),
  shells: z.array(z.string()),
  tools: z.array(z.string()),
  /** Named bounds (sessions per agent, output retention, page size, waits…). */
  limits: z.record(z.string(), z.number()),
  /** Named features and whether this daemon has them. */
  features: z.record(z.string(), z.boolean()),
  /** The caller's agent id. */
  agent: z.string(),
});
export type Capabilities = z.infer<typeof Capabilities>;

export const Empty = z.strictObject({});
