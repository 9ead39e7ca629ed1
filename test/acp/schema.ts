/**
 * Strict wire checks the SDK's client does not do: every frame `berth acp` writes is validated against the ACP v1
 * JSON schema the SDK ships (`schema/v1/schema.json`), per method: requests and notifications by their params
 * definition, results by the response definition of the request they answer, errors by `Error`.
 */
import { createRequire } from "node:module";
import { Ajv2020 } from "ajv/dist/2020.js";

const require = createRequire(import.meta.url);
const ajv = new Ajv2020({ strict: false, allErrors: true, logger: false });
ajv.addSchema(require("@agentclientprotocol/sdk/schema/v1/schema.json") as object, "acp");

/** Agent → client requests and notifications: method → params definition. */
const OUTGOING: Record<string, string> = {
  "session/update": "SessionNotification",
  "session/request_permission": "RequestPermissionRequest",
  "fs/read_text_file": "ReadTextFileRequest",
  "fs/write_text_file": "WriteTextFileRequest",
  "terminal/create": "CreateTerminalRequest",
  "terminal/output": "TerminalOutputRequest",
  "terminal/wait_for_exit": "WaitForTerminalExitRequest",
  "terminal/kill": "KillTerminalRequest",
  "terminal/release": "ReleaseTerminalRequest",
  "$/cancel_request": "CancelRequestNotification",
};

/** Client → agent request method → the result definition of its response. */
const RESULTS: Record<string, string> = {
  initialize: "InitializeResponse",
  authenticate: "AuthenticateResponse",
  logout: "LogoutResponse",
  "session/new": "NewSessionResponse",
  "session/load": "LoadSessionResponse",
  "session/list": "ListSessionsResponse",
  "session/resume": "ResumeSessionResponse",
  "session/close": "CloseSessionResponse",
  "session/set_mode": "SetSessionModeResponse",
  "session/set_config_option": "SetSessionConfigOptionResponse",
  "session/prompt": "PromptResponse",
};

function check(def: string, value: unknown): string | null {
  const v = ajv.getSchema(`acp#/$defs/${def}`);
  if (v === undefined) return `no schema definition ${def}`;
  return v(value) ? null : `${def}: ${ajv.errorsText(v.errors)}`;
}

/**
 * Validates one frame the agent sent. `requestMethod` resolves the method of the client request a response
 * answers. Returns null when valid, else a description.
 */
export function validateAgentFrame(frame: unknown, requestMethod: (id: unknown) => string | undefined): string | null {
  if (typeof frame !== "object" || frame === null || Array.isArray(frame)) return "not a JSON object";
  const m = frame as Record<string, unknown>;
  if (m["jsonrpc"] !== "2.0") return "jsonrpc is not '2.0'";
  if (typeof m["method"] === "string") {
    const def = OUTGOING[m["method"]];
    if (def === undefined) return `unexpected agent method ${m["method"]}`;
    return check(def, m["params"]);
  }
  if ("error" in m) return check("Error", m["error"]);
  if ("result" in m) {
    const method = requestMethod(m["id"]);
    if (method === undefined) return `response to unknown id ${JSON.stringify(m["id"])}`;
    const def = RESULTS[method];
    if (def === undefined) return `no result definition for ${method}`;
    return check(def, m["result"]);
  }
  return "neither request, notification nor response";
}
