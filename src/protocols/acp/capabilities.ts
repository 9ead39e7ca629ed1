/**
 * What `berth acp` advertises in `initialize`. Contract: every advertised capability is implemented; everything
 * omitted is unsupported (ACP: omitted means unsupported).
 * - Prompts: text and resource links (baseline), images (a model that takes none gets a placeholder line instead),
 *   embedded resources; no audio.
 * - MCP: stdio servers only (Berth's MCP client runs local commands).
 * - Sessions: load (with replay), list, resume (no replay), close.
 */
import type { AgentCapabilities } from "@agentclientprotocol/sdk";

export const AGENT_CAPABILITIES: AgentCapabilities = {
  loadSession: true,
  promptCapabilities: { image: true, audio: false, embeddedContext: true },
  mcpCapabilities: { http: false, sse: false },
  sessionCapabilities: { list: {}, resume: {}, close: {} },
  auth: { logout: {} },
};
