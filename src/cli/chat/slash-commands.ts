/**
 * The interactive chat's slash commands: a table keyed by command, each handler given the words after it.
 * Contract: `runSlash` runs the command a line names; an unknown one is named (cut to 32 characters) with where the
 * list is, never run as a prompt.
 */
import { HELP } from "./render.js";
import type { ServiceCommands } from "./service-commands.js";
import type { SessionCommands } from "./session-commands.js";

/** What the commands use of the chat. */
export interface SlashHost {
  write(text: string): void;
  status(text: string): void;
  finish(code: number): void;
  newConversation(): Promise<void>;
  readonly sc: SessionCommands;
  readonly cmds: ServiceCommands;
}

type Handler = (h: SlashHost, args: string[]) => Promise<void> | void;

const COMMANDS: Record<string, Handler> = {
  "/help": (h) => h.write(HELP),
  "/exit": (h) => h.finish(0),
  "/quit": (h) => h.finish(0),
  "/new": async (h) => {
    await h.newConversation();
    h.status("new conversation");
  },
  "/sessions": (h) => h.sc.sessions(),
  "/resume": async (h, args) => {
    if (args[0] === undefined) h.status("usage: /resume <n|id-prefix> (see /sessions)");
    else await h.sc.resume(args[0]);
  },
  "/tools": (h) => h.sc.tools(false),
  "/mcp": (h) => h.sc.tools(true),
  "/model": (h, args) => h.cmds.model(args),
  "/login": (h, args) => h.cmds.startLogin(args[0] ?? "openai-codex"),
  "/logout": (h, args) => h.cmds.logout(args[0]),
};

/** Runs the slash command `text` starts with. */
export function runSlash(h: SlashHost, text: string): Promise<void> | void {
  const [cmd = "", ...args] = text.split(/\s+/);
  const run = Object.hasOwn(COMMANDS, cmd) ? COMMANDS[cmd] : undefined;
  if (run === undefined) return h.status(`unknown command ${cmd.slice(0, 32)}; /help lists commands`);
  return run(h, args);
}
