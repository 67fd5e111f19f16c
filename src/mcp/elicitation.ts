/**
 * Approvals asked in the agent's own client (MCP elicitation, form mode): when a command waits
 * for approval and the client declared `elicitation`, its human is asked as well as the
 * operators (dashboard, `termada pending`, `termada top`); the first answer wins and both are
 * audited. Only when the operator turned it on (`approvals.elicitation: true`) and only for the
 * default one-approval requirement: an answer in the agent's client is worth one approval by
 * `client:<agent>` — nothing proves who gave it, so quorums, roles, MFA and requester
 * exclusion never count it (docs/GOVERNANCE.md). Clients without the capability keep today's
 * flow.
 */
import type { Server } from "@modelcontextprotocol/sdk/server/index.js";
import type { ElicitResult } from "@modelcontextprotocol/sdk/types.js";
import type { AgentOps } from "../control/mod.ts";
import { logger } from "../shared/mod.ts";

const log = logger("mcp");

/** The command shown in the question, bounded. */
const COMMAND_CHARS = 500;
/** A reason typed in the client, bounded. */
const REASON_CHARS = 500;

/** Asks about `approvalId` when enabled and supported; never throws, never blocks the call. */
export function askApprovalInClient(
  server: Server,
  agents: AgentOps,
  agent: string,
  approvalId: string,
): void {
  const caps = server.getClientCapabilities()?.elicitation as
    | { form?: unknown; url?: unknown }
    | undefined;
  // An empty `elicitation: {}` is form mode (the spec's default before modes existed).
  if (!caps || (caps.url !== undefined && caps.form === undefined)) return;
  const ask = agents.elicitable(agent, approvalId);
  if (!ask) return;
  const text = ask.command.join(" ");
  const shown = text.length > COMMAND_CHARS ? `${text.slice(0, COMMAND_CHARS)}…` : text;
  const timeout = Math.max(1000, ask.expiresAt - Date.now());
  server.elicitInput({
    mode: "form",
    message: `Termada: agent "${agent}" asks to run\n\n  ${shown}\n\nThe policy wants a ` +
      `person to approve it (${approvalId}). Operators see it too; the first answer counts.`,
    requestedSchema: {
      type: "object",
      properties: {
        decision: {
          type: "string",
          title: "Decision",
          enum: ["approve", "deny"],
          description: "Approve runs it once; deny refuses it",
        },
        reason: { type: "string", title: "Reason", maxLength: REASON_CHARS },
      },
      required: ["decision"],
    },
  }, { timeout }).then(async (r: ElicitResult) => {
    const decision = r.action === "accept" ? r.content?.decision : undefined;
    const approve = decision === "approve";
    if (r.action !== "decline" && decision !== "approve" && decision !== "deny") return;
    const reason = typeof r.content?.reason === "string"
      ? r.content.reason.slice(0, REASON_CHARS)
      : undefined;
    await agents.elicitedDecision(agent, approvalId, approve, reason);
  }).catch((err: unknown) => {
    // No answer in time, the client went away, or an operator decided first.
    log.debug("approval not decided in the agent's client", { approval: approvalId, error: err });
  });
}

/**
 * exec_write {human}: clients that support URL elicitation open the one-time page for their
 * human (the agent gets the URL in the result either way; the page takes the answer, so the
 * agent never sees it). Never throws, never blocks the call.
 */
export function openAnswerPageInClient(server: Server, url: string, message: string): void {
  const caps = server.getClientCapabilities()?.elicitation as { url?: unknown } | undefined;
  if (caps?.url === undefined) return;
  server.elicitInput({
    mode: "url",
    url,
    elicitationId: crypto.randomUUID(),
    message:
      `Termada: ${message}. Type the answer on the page that opens; the agent never sees it.`,
  }).catch((err: unknown) => log.debug("the client did not open the answer page", { error: err }));
}
