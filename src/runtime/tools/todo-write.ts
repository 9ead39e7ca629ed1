/**
 * `todo_write`: the model records its plan as a todo list. It touches nothing (risk `read_only`); each call replaces
 * the whole list. Doors may show the list (ACP projects it as a `plan` update); the result is a short confirmation.
 */
import * as A from "../../core/arg-schema.js";
import { defineLocalTool } from "./define.js";
import { ok } from "./result.js";

export const TODO_MAX_ENTRIES = 50;
export const TODO_MAX_CONTENT_CHARS = 500;

export const TODO_STATUSES = ["pending", "in_progress", "completed"] as const;
export const TODO_PRIORITIES = ["high", "medium", "low"] as const;

const TodoItem = A.object({
  content: A.string({ min: 1, max: TODO_MAX_CONTENT_CHARS, description: "What this step does, one line." }),
  status: A.literal(TODO_STATUSES, { description: "pending, in_progress or completed." }),
  priority: A.optional(A.literal(TODO_PRIORITIES, { description: "high, medium or low. Default medium." })),
});

const TodoArgs = A.object({
  todos: A.array(TodoItem, { max: TODO_MAX_ENTRIES, description: `The complete, current todo list (at most ${TODO_MAX_ENTRIES} entries); it replaces the previous one.` }),
});

export interface TodoEntry {
  content: string;
  status: (typeof TODO_STATUSES)[number];
  priority: (typeof TODO_PRIORITIES)[number];
}

/** The list a `todo_write` call records (priority defaulted to `medium`), or null when the arguments are invalid. */
export function todoEntries(args: unknown): TodoEntry[] | null {
  const r = A.parse(TodoArgs, args);
  return r.ok ? r.value.todos.map((t) => ({ content: t.content, status: t.status, priority: t.priority ?? "medium" })) : null;
}

export const todoWriteTool = defineLocalTool({
  name: "todo_write",
  risk: "read_only",
  description:
    "Record your plan for a multi-step task as a todo list, and update it as you go (send the whole list each time; " +
    "keep at most one entry in_progress). It changes nothing on disk; the user sees the list.",
  schema: TodoArgs,
  execute(args) {
    const n = (s: string) => args.todos.filter((t) => t.status === s).length;
    const total = args.todos.length;
    return Promise.resolve(
      ok(total === 0 ? "Todo list cleared." : `Todo list updated: ${total} ${total === 1 ? "entry" : "entries"} (${n("completed")} completed, ${n("in_progress")} in progress, ${n("pending")} pending).`),
    );
  },
});
