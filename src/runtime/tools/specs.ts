/**
 * What the model is told about each built-in tool (name, description, risk and argument schema), apart from the code
 * that runs it: a registry lists tools and a provider request carries their schemas with only this module loaded;
 * each tool's implementation (its file, node built-ins and helpers) loads on its first call (`lazy.ts`). The
 * implementation modules build their `Tool` from these same definitions, so both paths validate alike.
 */
import * as A from "../../core/arg-schema.js";
import type { ToolRisk } from "../types.js";
// The search worker imports glob-match.ts alone: the bound lives there, not here.
import { MAX_GLOB_PATTERN_CHARS } from "./glob-match.js";

/** A tool's model-facing definition: everything but `execute`. */
export interface ToolDef<T extends Record<string, unknown>> {
  name: string;
  description: string;
  risk: ToolRisk;
  schema: A.ArgSchema<T>;
}

const def = <T extends Record<string, unknown>>(d: ToolDef<T>): ToolDef<T> => d;

export const READ_DEFAULT_LIMIT = 2000;
export const READ_MAX_LIMIT = 10_000;

export const READ_DEF = def({
  name: "read",
  risk: "read_only",
  description:
    "Read a text file. Returns its lines from `offset` (1-based) for up to `limit` lines; a note at the end says where to continue when more remain.",
  schema: A.object({
    path: A.string({ min: 1, description: "File to read; relative paths resolve against the working directory." }),
    offset: A.optional(A.number({ integer: true, min: 1, description: "First line to return (1-based). Default 1." })),
    limit: A.optional(A.number({ integer: true, min: 1, max: READ_MAX_LIMIT, description: `Maximum lines to return. Default ${READ_DEFAULT_LIMIT}.` })),
  }),
});

export const WRITE_DEF = def({
  name: "write",
  risk: "filesystem",
  description: "Create or overwrite a file with `content`. Parent directories are created as needed.",
  schema: A.object({
    path: A.string({ min: 1, description: "File to write; relative paths resolve against the working directory." }),
    content: A.string({ description: "The complete new file content." }),
  }),
});

export const EDIT_DEF = def({
  name: "edit",
  risk: "filesystem",
  description:
    "Replace exact text in a file. `old_string` must match exactly once (include surrounding lines to make it unique) unless `replace_all` is true.",
  schema: A.object({
    path: A.string({ min: 1, description: "File to edit; relative paths resolve against the working directory." }),
    old_string: A.string({ min: 1, description: "Exact text to replace (whitespace included). Must be unique in the file unless replace_all." }),
    new_string: A.string({ description: "Replacement text." }),
    replace_all: A.optional(A.boolean({ description: "Replace every occurrence instead of requiring exactly one." })),
  }),
});

export const BASH_DEFAULT_TIMEOUT_MS = 120_000;
export const BASH_MAX_TIMEOUT_MS = 600_000;
export const MAX_COMMAND_CHARS = 100_000;

/**
 * `bash`'s definition for the given timeouts (its schema states them): one per pair of timeouts (a few kept), so every
 * session's registry with the same timeouts shares it, its frozen model schema and that schema's cached encoding
 * instead of building and freezing its own (define.ts `toModelSchema`).
 */
export function bashDef(defaultTimeoutMs = BASH_DEFAULT_TIMEOUT_MS, maxTimeoutMs = BASH_MAX_TIMEOUT_MS): BashDef {
  const key = `${defaultTimeoutMs}/${maxTimeoutMs}`;
  let d = bashDefs.get(key);
  if (d === undefined) {
    if (bashDefs.size >= MAX_BASH_DEFS) bashDefs.clear();
    bashDefs.set(key, (d = makeBashDef(defaultTimeoutMs, maxTimeoutMs)));
  }
  return d;
}

type BashDef = ReturnType<typeof makeBashDef>;
const bashDefs = new Map<string, BashDef>();
const MAX_BASH_DEFS = 8;

function makeBashDef(defaultTimeoutMs: number, maxTimeoutMs: number) {
  return def({
    name: "bash",
    risk: "process",
    description:
      "Run a shell command with bash in the working directory. Returns combined stdout/stderr (long output keeps its start and end) and the exit code. Background processes are stopped when the command ends.",
    schema: A.object({
      command: A.string({ min: 1, max: MAX_COMMAND_CHARS, description: "Shell command, run with `bash -c` in the working directory." }),
      timeout: A.optional(A.number({ exclusiveMin: 0, max: maxTimeoutMs / 1000, description: `Timeout in seconds (default ${defaultTimeoutMs / 1000}, at most ${maxTimeoutMs / 1000}).` })),
    }),
  });
}

export { MAX_GLOB_PATTERN_CHARS };
export const GREP_DEFAULT_LIMIT = 100;
export const GREP_MAX_LIMIT = 1000;

export const GREP_DEF = def({
  name: "grep",
  risk: "read_only",
  description:
    "Search file contents with a JavaScript regular expression. Returns `path:line: text` lines. Skips .git, node_modules and binary files.",
  schema: A.object({
    pattern: A.string({ min: 1, max: 4096, description: "JavaScript regular expression, matched against each line." }),
    path: A.optional(A.string({ min: 1, description: "Directory or file to search. Default: the working directory." })),
    glob: A.optional(A.string({ min: 1, max: MAX_GLOB_PATTERN_CHARS, description: "Only search files matching this glob (e.g. `*.ts`; without a `/` it matches file names at any depth)." })),
    ignore_case: A.optional(A.boolean({ description: "Case-insensitive match." })),
    limit: A.optional(A.number({ integer: true, min: 1, max: GREP_MAX_LIMIT, description: `Maximum matches. Default ${GREP_DEFAULT_LIMIT}.` })),
  }),
});

export const GLOB_DEFAULT_LIMIT = 500;
export const GLOB_MAX_LIMIT = 5000;

export const GLOB_DEF = def({
  name: "glob",
  risk: "read_only",
  description: "Find files whose path matches a glob pattern (e.g. `src/**/*.{ts,tsx}`). Skips .git and node_modules.",
  schema: A.object({
    pattern: A.string({ min: 1, max: MAX_GLOB_PATTERN_CHARS, description: "Glob matched against paths relative to `path`: `**` spans directories, `*` and `?` stay within one, `{a,b}` alternatives. Use `**/*.ts` to search recursively." }),
    path: A.optional(A.string({ min: 1, description: "Directory to search. Default: the working directory." })),
    limit: A.optional(A.number({ integer: true, min: 1, max: GLOB_MAX_LIMIT, description: `Maximum paths. Default ${GLOB_DEFAULT_LIMIT}.` })),
  }),
});

export const LS_DEFAULT_LIMIT = 500;
export const LS_MAX_LIMIT = 5000;

export const LS_DEF = def({
  name: "ls",
  risk: "read_only",
  description: "List a directory's entries (including dotfiles), sorted; directories end with `/`.",
  schema: A.object({
    path: A.optional(A.string({ min: 1, description: "Directory to list. Default: the working directory." })),
    limit: A.optional(A.number({ integer: true, min: 1, max: LS_MAX_LIMIT, description: `Maximum entries. Default ${LS_DEFAULT_LIMIT}.` })),
  }),
});

export const READ_SKILL_TOOL_NAME = "read_skill";
/** Risk class for the approval layer: this tool only reads. */
export const READ_SKILL_RISK = "read_only" as const;

export const READ_SKILL_DEF = def({
  name: READ_SKILL_TOOL_NAME,
  risk: READ_SKILL_RISK,
  description:
    "Read the instructions (SKILL.md) of one of the skills listed in the system prompt. Read a skill before doing a task it describes; files it mentions are relative to its directory, given in the first line.",
  schema: A.object({
    name: A.string({ min: 1, max: 64, description: "The skill's name, exactly as listed under Skills in the system prompt." }),
  }),
});

export const CHAT_ATTACH_TOOL_NAME = "chat_attach";
/** Largest file a chat bridge sends (the owner's per-file limit for inbound files, applied outbound too). */
export const CHAT_ATTACH_MAX_BYTES = 50 * 1024 * 1024;
export const CHAT_ATTACH_MAX_CAPTION_CHARS = 1000;

export const CHAT_ATTACH_DEF = def({
  name: CHAT_ATTACH_TOOL_NAME,
  risk: "read_only",
  description:
    `Send a file from the workspace to the user in this chat, after your reply (at most ${CHAT_ATTACH_MAX_BYTES / 1024 / 1024} MiB; ` +
    "at most 8 files per reply). Use it when the user asks for a file or an image; mention the file in your reply.",
  schema: A.object({
    path: A.string({ min: 1, max: 4096, description: "The file to send, absolute or relative to the working directory." }),
    caption: A.optional(A.string({ max: CHAT_ATTACH_MAX_CAPTION_CHARS, description: "A short caption sent with the file." })),
  }),
});

export const WEB_FETCH_TOOL_NAME = "web_fetch";
/** Risk class for the approval layer. */
export const WEB_FETCH_RISK = "network" as const;
export const MAX_URL_CHARS = 4096;

export const WEB_FETCH_DEF = def({
  name: WEB_FETCH_TOOL_NAME,
  risk: WEB_FETCH_RISK,
  description:
    "Fetch one public web page or API response (http/https GET) and return it as text: HTML is converted to readable text with numbered link references; JSON and text pass through. Long results come in pages: pass the `offset` named at the end to read the next one. Private, local and cloud-metadata addresses are refused.",
  schema: A.object({
    url: A.string({ min: 1, max: MAX_URL_CHARS, description: "The http(s) URL to fetch." }),
    offset: A.optional(A.number({ integer: true, min: 0, description: "Character offset of the page to return (from the previous result's note). Default 0." })),
  }),
});

/**
 * `web_fetch`'s approval exemption: an `https:` URL without credentials on one of `hosts` (lowercase names).
 * Shared by the tool and its lazy stand-in, so asking never waits for the implementation to load.
 */
export function webFetchAutoApprove(hosts: ReadonlySet<string>, raw: unknown): boolean {
  if (typeof raw !== "string") return false;
  try {
    const u = new URL(raw);
    return u.protocol === "https:" && u.username === "" && u.password === "" && hosts.has(u.hostname.replace(/^\[|\]$/g, "").toLowerCase());
  } catch {
    return false;
  }
}
