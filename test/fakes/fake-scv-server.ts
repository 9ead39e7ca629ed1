/**
 * A loopback SCV v3 server on a Unix socket, speaking the spec's frames, for testing the SCV client and the bridges
 * where the real server cannot yet play a part (`chat_attach`). One session per connection, like the server. Sessions
 * record their `session.start` fields. Turns:
 * - default: `turn.started`, two `assistant.delta`s, `assistant.completed` (`echo: <prompt>`), `turn.completed`;
 * - a prompt containing `edit FILE`: in a tool session, proposes a `write` call and asks approval; when approved,
 *   writes FILE in the session cwd, copies it into `outbox/` and completes `chat_attach` with the spec's output;
 *   a denied call completes with `error: "denied"`. Without tools it just answers;
 * - `hang`: no terminal event until `turn.cancel` (then `turn.cancelled`);
 * - `fail`: `turn.failed` with `provider_error`.
 */
import { copyFile, mkdir, stat, writeFile } from "node:fs/promises";
import { createServer, type Server, type Socket } from "node:net";
import { join } from "node:path";
import { textOf } from "../../src/core/json-text.js";

interface Session {
  id: string;
  cwd: string;
  start: Record<string, unknown>;
  seq: number;
}

export class FakeScvServer {
  readonly sessions: Session[] = [];
  readonly turns: Array<{ sessionId: string; prompt: string; attachments: unknown }> = [];
  readonly approvals: Array<{ approved: boolean }> = [];
  readonly cancels: string[] = [];
  private server: Server | null = null;

  constructor(
    readonly socketPath: string,
    readonly outbox: string,
  ) {}

  async start(): Promise<this> {
    this.server = createServer((s) => this.serve(s));
    await new Promise<void>((r) => this.server!.listen(this.socketPath, r));
    return this;
  }

  async close(): Promise<void> {
    await new Promise<void>((r) => this.server?.close(() => r()) ?? r());
  }

  private serve(sock: Socket): void {
    let buf = "";
    let initialized = false;
    let hasSession = false;
    const pending = new Map<string, (msg: Record<string, unknown>) => void>();
    const send = (o: Record<string, unknown>): void => void sock.write(JSON.stringify(o) + "\n");
    sock.on("error", () => undefined);
    sock.on("data", (d: Buffer) => {
      buf += d.toString("utf8");
      let nl: number;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        let m: Record<string, unknown>;
        try {
          m = JSON.parse(line) as Record<string, unknown>;
        } catch {
          send({ type: "error", request_id: null, code: "invalid_json", message: "not JSON", fatal: false });
          continue;
        }
        const rid = m["request_id"];
        if (m["type"] === "initialize") {
          if (m["protocol_version"] !== 3) {
            send({ type: "error", request_id: rid, code: "version_mismatch", message: "protocol 3 only", fatal: true });
            sock.end();
            return;
          }
          initialized = true;
          send({ type: "initialized", request_id: rid, protocol_version: 3, server: { name: "fake-scv", version: "0.3.0" } });
          continue;
        }
        if (!initialized) {
          send({ type: "error", request_id: rid, code: "not_initialized", message: "initialize first", fatal: false });
          continue;
        }
        if (m["type"] === "session.start") {
          if (hasSession) {
            send({ type: "error", request_id: rid, code: "invalid_request", message: "this connection already has a session (one session per connection)", fatal: false });
            continue;
          }
          hasSession = true;
        }
        void this.handle(m, send, pending);
      }
    });
  }

  private async handle(m: Record<string, unknown>, send: (o: Record<string, unknown>) => void, pending: Map<string, (msg: Record<string, unknown>) => void>): Promise<void> {
    const rid = m["request_id"];
    const type = m["type"];
    if (type === "session.start") {
      const cwd = m["cwd"];
      const channel = m["channel"];
      const isDir = typeof cwd === "string" && cwd.startsWith("/") && (await stat(cwd).then((s) => s.isDirectory(), () => false));
      if (!isDir) return send({ type: "error", request_id: rid, code: "invalid_request", message: "cwd is not a directory", fatal: false });
      if (channel !== undefined && (typeof channel !== "string" || Buffer.byteLength(channel) > 32 || /[\x00-\x1f]/.test(channel))) {
        return send({ type: "error", request_id: rid, code: "invalid_request", message: "invalid channel", fatal: false });
      }
      const s: Session = { id: `sess-${this.sessions.length + 1}`, cwd: cwd, start: m, seq: 0 };
      this.sessions.push(s);
      return send({ type: "session.started", request_id: rid, session_id: s.id, cwd: s.cwd, model: "fake", context_max_tokens: 128000, max_server_frame_bytes: 8388608 });
    }
    if (type === "approval.resolve" || type === "turn.cancel") {
      const key = type === "approval.resolve" ? String(m["approval_id"]) : `cancel:${String(m["turn_id"])}`;
      if (type === "turn.cancel") this.cancels.push(String(m["turn_id"]));
      pending.get(key)?.(m);
      return;
    }
    if (type !== "turn.start") return send({ type: "error", request_id: rid, code: "invalid_json", message: "unknown type", fatal: false });
    const s = this.sessions.find((x) => x.id === m["session_id"]);
    if (!s) return send({ type: "error", request_id: rid, code: "session_not_found", message: "no such session", fatal: false });
    const prompt = textOf(m["prompt"]);
    this.turns.push({ sessionId: s.id, prompt, attachments: m["attachments"] });
    const turnId = `turn-${this.turns.length}`;
    const ev = (t: string, extra: Record<string, unknown> = {}): void => send({ type: t, request_id: rid, session_id: s.id, turn_id: turnId, seq: ++s.seq, ...extra });
    ev("turn.started");
    if (prompt.includes("hang")) {
      await new Promise<void>((r) => pending.set(`cancel:${turnId}`, () => r()));
      return ev("turn.cancelled");
    }
    if (prompt.includes("fail")) return ev("turn.failed", { code: "provider_error", message: "upstream failed" });
    const edit = /edit (\S+)/.exec(prompt);
    if (edit && s.start["no_tools"] === false) {
      const file = edit[1]!;
      ev("assistant.completed", { content: "" });
      ev("tool.proposed", { call_id: "c1", name: "write", arguments: { path: file } });
      const approval = `ap-${turnId}`;
      const answer = new Promise<Record<string, unknown>>((r) => pending.set(approval, r));
      ev("approval.requested", { approval_id: approval, call_id: "c1", name: "write", risk: "write", cwd: s.cwd, summary: `Write ${file}` });
      const approved = (await answer)["approved"] === true;
      this.approvals.push({ approved });
      if (!approved) {
        ev("tool.completed", { call_id: "c1", name: "write", success: false, output: "tool call denied by policy or user", truncated: false, error: "denied" });
        ev("assistant.completed", { content: "I was not allowed to write." });
        return ev("turn.completed", { steps: 2, usage: {} });
      }
      ev("tool.started", { call_id: "c1", name: "write" });
      const path = join(s.cwd, file);
      await writeFile(path, `edited: ${file}\n`);
      ev("tool.completed", { call_id: "c1", name: "write", success: true, output: "ok", truncated: false });
      await mkdir(this.outbox, { recursive: true });
      const copy = join(this.outbox, `${turnId}-${file}`);
      await copyFile(path, copy);
      const size = (await stat(copy)).size;
      ev("tool.completed", { call_id: "c2", name: "chat_attach", success: true, truncated: false, output: JSON.stringify({ attached: { path: copy, name: file, size, caption: null }, note: "will be sent after the reply" }) });
      ev("assistant.delta", { content: "Done: " });
      ev("assistant.completed", { content: `Done: ${file} changed and attached.` });
      return ev("turn.completed", { steps: 3, usage: { input_tokens: 10, output_tokens: 5 } });
    }
    const answer = `echo: ${prompt}`;
    ev("assistant.delta", { content: answer.slice(0, 3) });
    ev("tool.progress", { call_id: "x", text: "not for chat" });
    ev("assistant.delta", { content: answer.slice(3) });
    ev("assistant.completed", { content: answer });
    ev("turn.completed", { steps: 1, usage: {} });
  }
}
