/** Public surface of the tools layer. */
export { createToolRegistry, openToolRegistry, builtinTools, BUILTIN_TOOL_NAMES, type ToolRegistry, type ToolRegistryOptions } from "./registry.js";
export { createBashTool, bashTool, type BashOptions } from "./bash.js";
export { readTool } from "./read.js";
export { writeTool } from "./write.js";
export { editTool } from "./edit.js";
export { grepTool } from "./grep.js";
export { globTool } from "./glob.js";
export { lsTool } from "./ls.js";
export { createChatAttachTool, chatOutboxDir, CHAT_ATTACH_MAX_BYTES, CHAT_ATTACH_TOOL_NAME } from "./chat-attach.js";
export { todoWriteTool, todoEntries, type TodoEntry } from "./todo-write.js";
// MCP is loaded lazily by the registry; import "./mcp.js" directly for its functions.
export type { McpOptions, McpServerStatus, McpConnections } from "./mcp.js";
export { defineLocalTool, toModelSchema } from "./define.js";
export { boundText, MAX_RESULT_BYTES } from "./result.js";
export { compileGlob, globMatch } from "./glob-match.js";
export { validateJsonSchema } from "./json-schema.js";
export { DEFAULT_TOOL_POLICY, type ToolPolicy, type FileAccessPolicy, type SandboxMode } from "./confine.js";
export { toolPolicyFromSettings } from "./policy.js";
