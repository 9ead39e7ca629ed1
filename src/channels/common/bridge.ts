/**
 * The platform-neutral chat bridge: inbound messages in, one SCV-style turn per accepted message, the final
 * assistant message (and `chat_attach` files) out.
 *
 * Contract:
 * - `accept(batch)` resolves only after every claim in the batch is durable; the caller then saves its cursor or
 *   acks. A seen or claimed ID is ignored (redelivery answered once).
 * - Sessions: one per direct-chat sender, one per group + sender, one per Feishu thread. Tools (with auto-approve)
 *   only in the owner's direct chat when `remoteTools = "owner"` and the owner is known; `no_tools` otherwise.
 * - `senders = "owner"`: others' messages are marked ignored and never answered. Groups answer only when mentioned.
 * - `recover()` (before the first `accept`) answers every claim a previous run left in flight with a short failure
 *   reply and marks it seen; it never starts a turn for it.
 * - Replies: final text only, capped at 64 KiB, split for the platform; a refused reply is held and carried by the
 *   next reply to that conversation.
 */
import { randomBytes } from "node:crypto";
import { rm } from "node:fs/promises";
import { realClock, type Clock } from "./backoff.js";
import { parseYesNo, questionText, type ConfirmState } from "./confirm.js";
import type { ChatSessionDriver, OutboundFile } from "./driver.js";
import { oversizedField } from "./ids.js";
import { fetchMedia, MAX_FILES_OUT } from "./media.js";
import { PlatformError, type InboundMessage, type PlatformPort } from "./port.js";
import type { DeliveryState, ReplyTarget } from "./state.js";
import { sanitizeError } from "./status.js";
import { BUSY_REPLY, BusyThrottle, FAILURE_REPLY, fitPrompt, FORWARD_UNREADABLE, NO_TRANSCRIPT_REPLY, NOTHING_READABLE_REPLY, TURN_FAILED_REPLY, TURN_TIMEOUT_REPLY } from "./replies.js";
import { shapeReply, systemMessage, withHeld } from "./text.js";

export * from "./replies.js";

export interface BridgePolicy {
  /** Session `channel` name: `WeChat`, `Feishu` or `Lark`. */
  channelName: string;
  ownerId: string | null;
  senders: "owner" | "anyone";
  remoteTools: "none" | "owner";
  workspace: string;
}

export interface BridgeOptions {
  port: PlatformPort;
  driver: ChatSessionDriver;
  state: DeliveryState;
  policy: BridgePolicy;
  mediaRoot: string;
  clock?: Clock | undefined;
  /** Diagnostic lines without message content or credentials. */
  log?: ((line: string) => void) | undefined;
}

/** Sessions idle this long are released; at most MAX_SESSIONS stay live (least recently used released first). */
export const SESSION_IDLE_MS = 30 * 60 * 1000;
export const MAX_SESSIONS = 32;
/** Turns running at once across all conversations of an account. */
export const MAX_CONCURRENT_TURNS = 4;

/**
 * Claimed (queued or running) messages per conversation and per account; beyond them a busy notice answers (at most
 * one per conversation a minute, see BusyThrottle).
 */
export const MAX_CLAIMS_PER_CONVERSATION = 8;
export const MAX_CLAIMS_PER_ACCOUNT = 64;

/** `confirm_ask` deadlines: default 30 minutes, at most 4 hours. */
export const CONFIRM_DEFAULT_SECONDS = 1800;
export const CONFIRM_MAX_SECONDS = 14_400;

/** Turn time limits: tool-enabled owner turns 4 h 5 min, all others 5 minutes; then the turn is cancelled. */
export const OWNER_TURN_TIMEOUT_MS = (4 * 3600 + 5 * 60) * 1000;
export const TURN_TIMEOUT_MS = 5 * 60 * 1000;

/** What a failed send logs: a platform client's own message (it carries no secret), else only the error's kind. */
function why(err: unknown): string {
  return err instanceof PlatformError ? sanitizeError(err.message) : err instanceof Error ? err.name : "unknown error";
}

/** Removes outbox copies that will not be sent (never throws). */
async function discardFiles(files: OutboundFile[]): Promise<void> {
  await Promise.all(files.map((f) => rm(f.path, { force: true }).catch(() => undefined)));
}

interface Question {
  id: string;
  state: ConfirmState;
  deliveredAt: number;
  deadline: number;
  settle: (s: ConfirmState) => void;
  done: Promise<ConfirmState>;
}

export class ChatBridge {
  private readonly clock: Clock;
  private readonly sessions = new Map<string, Promise<string>>();
  private readonly lastUsed = new Map<string, number>();
  private active = 0;
  private slotWaiters: Array<() => void> = [];
  private readonly queues = new Map<string, Promise<void>>();
  private readonly running = new Set<Promise<void>>();
  /** Notices sent outside a turn (a question's acknowledgement, withdrawal or expiry): `stop` waits for them. */
  private readonly notices = new Set<Promise<unknown>>();
  private readonly abort = new AbortController();
  private question: Question | null = null;
  private readonly busyNotices = new BusyThrottle();
  /** Busy notices go out one after another (in the order their messages came), never in a burst. */
  private noticeQueue: Promise<unknown> = Promise.resolve();

  constructor(private readonly o: BridgeOptions) {
    this.clock = o.clock ?? realClock;
  }

  private get log(): (line: string) => void {
    return this.o.log ?? (() => undefined);
  }

  isOwner(sender: string): boolean {
    return this.o.policy.ownerId !== null && sender === this.o.policy.ownerId;
  }

  conversationOf(m: InboundMessage): string {
    if (m.kind === "thread" && m.thread) return `thread:${m.thread}`;
    if (m.kind === "group") return `group:${m.chat ?? ""}:${m.sender}`;
    return `dm:${m.sender}`;
  }

  private targetOf(m: InboundMessage): ReplyTarget {
    return { to: m.sender, handle: m.handle, chat: m.kind === "direct" ? null : m.chat, inThread: m.kind === "thread" };
  }

  /** Sends `parts` from index `from`; `progress(i)` runs after part i-1 was accepted (to persist it). */
  private async sendParts(
    target: ReplyTarget,
    parts: readonly string[],
    idBase: string,
    from = 0,
    progress?: (next: number) => Promise<void>,
    signal?: AbortSignal,
  ): Promise<"sent" | "refused"> {
    for (let i = from; i < parts.length; i++) {
      const r = await this.o.port.sendPart(target, parts[i]!, `${idBase}-${i}`, i === 0, signal);
      if (r === "refused") return "refused";
      if (progress) await progress(i + 1);
    }
    return "sent";
  }

  /** A notice; tracked, so `stop` returns only once every notice (some are sent outside any turn) is sent or refused. */
  private note(target: ReplyTarget, text: string, id: string): Promise<"sent" | "refused"> {
    const p = this.sendParts(target, [systemMessage(this.o.port.platform, text)], id).catch((err: unknown) => {
      this.log(`notice not sent: ${(err as Error).name}`);
      return "refused" as const;
    });
    this.notices.add(p);
    void p.finally(() => this.notices.delete(p));
    return p;
  }

  /**
   * Claims a previous run left behind: a claim whose reply was ready resumes sending where it stopped (same part
   * and file IDs, so nothing shows twice); one still in its turn gets the short failure reply. Never a turn.
   */
  async recover(): Promise<void> {
    const claims = [...this.o.state.claims()];
    for (const c of claims) {
      if (c.pending) await this.deliver(c.id, c.conversation, c.target, "", true);
      else {
        await this.note(c.target, FAILURE_REPLY, `fail-${c.id}`);
        this.o.state.release(c.id);
      }
    }
    if (claims.length > 0) await this.o.state.save();
  }

  /** Dedups, classifies and claims a batch; resolves once the claims are durable. Turns run afterwards. */
  async accept(batch: readonly InboundMessage[]): Promise<void> {
    const st = this.o.state;
    const toRun: InboundMessage[] = [];
    const busy: InboundMessage[] = [];
    const touched = new Set<string>();
    let dirty = false;
    for (const m of batch) {
      if (st.has(m.id)) continue;
      dirty = true;
      touched.add(m.id);
      const over = oversizedField(m);
      if (over !== null) {
        // Never claimed, so no identifier of it reaches the state: only its ID (a digest when that is the long one).
        st.markIgnored(m.id);
        this.log(`${this.o.port.platform}: a message was not delivered: its ${over}`);
        continue;
      }
      const owner = this.isOwner(m.sender);
      if ((!owner && this.o.policy.senders === "owner") || (m.kind !== "direct" && !m.mentioned)) {
        st.markIgnored(m.id);
        continue;
      }
      if (this.answersQuestion(m)) {
        st.markSeen(m.id);
        continue;
      }
      const conv = this.conversationOf(m);
      const claims = st.claims();
      if (claims.length >= MAX_CLAIMS_PER_ACCOUNT || claims.filter((c) => c.conversation === conv).length >= MAX_CLAIMS_PER_CONVERSATION) {
        st.markIgnored(m.id); // it starts no turn: a redelivery may be looked at again
        busy.push(m);
        continue;
      }
      st.claim({ id: m.id, conversation: conv, target: this.targetOf(m) });
      toRun.push(m);
    }
    if (dirty) {
      try {
        await st.save();
      } catch (err) {
        st.forget(touched); // nothing new of this batch counts: it is redelivered and retried
        throw err;
      }
    }
    for (const m of toRun) this.schedule(m);
    const now = this.clock.now();
    for (const m of busy.filter((b) => this.busyNotices.allow(this.conversationOf(b), now))) {
      this.noticeQueue = this.noticeQueue.then(() => this.note(this.targetOf(m), BUSY_REPLY, `busy-${m.id}`));
    }
  }

  private schedule(m: InboundMessage): void {
    const conv = this.conversationOf(m);
    const prev = this.queues.get(conv) ?? Promise.resolve();
    const next = prev.then(() => this.runOne(m, conv)).catch((err: unknown) => this.log(`turn error: ${(err as Error).name}`));
    this.queues.set(conv, next);
    this.running.add(next);
    void next.finally(() => {
      this.running.delete(next);
      if (this.queues.get(conv) === next) this.queues.delete(conv);
    });
  }

  /** Claimed messages not yet answered: turns queued or running (what a planned restart waits for). */
  get unanswered(): number {
    return this.running.size;
  }

  /** Resolves when no turn is queued or running. */
  async idle(): Promise<void> {
    while (this.running.size > 0) await Promise.allSettled([...this.running]);
  }

  private async slot(): Promise<() => void> {
    while (this.active >= MAX_CONCURRENT_TURNS) await new Promise<void>((r) => this.slotWaiters.push(r));
    this.active++;
    return () => {
      this.active--;
      this.slotWaiters.shift()?.();
    };
  }

  /** Releases sessions idle past SESSION_IDLE_MS, then the least recently used beyond MAX_SESSIONS (never `keep`). */
  private evict(keep: string): void {
    const now = this.clock.now();
    const idle = [...this.lastUsed].filter(([c]) => c !== keep && !this.queues.has(c)).sort((a, b) => a[1] - b[1]);
    let live = this.sessions.size;
    for (const [c, t] of idle) {
      if (now - t < SESSION_IDLE_MS && live < MAX_SESSIONS) break;
      const s = this.sessions.get(c);
      this.sessions.delete(c);
      this.lastUsed.delete(c);
      live--;
      void s?.then((id) => this.o.driver.closeSession(id)).catch(() => undefined);
    }
  }

  private session(conv: string, tools: boolean): Promise<string> {
    this.evict(conv);
    this.lastUsed.set(conv, this.clock.now());
    let s = this.sessions.get(conv);
    if (!s) {
      s = this.o.driver.startSession({
        cwd: this.o.policy.workspace,
        channel: this.o.policy.channelName,
        noTools: !tools,
        autoApprove: tools,
      });
      this.sessions.set(conv, s);
      s.catch(() => this.sessions.delete(conv));
    }
    return s;
  }

  private async runOne(m: InboundMessage, conv: string): Promise<void> {
    // Stopping: a queued message starts no turn (nothing would cancel it); its claim stays for the next start.
    if (this.abort.signal.aborted) return;
    const owner = this.isOwner(m.sender);
    const tools = owner && m.kind === "direct" && this.o.policy.remoteTools === "owner";
    const target = this.targetOf(m);
    let text = m.text;
    if (m.voiceTranscript !== undefined) {
      if (!m.voiceTranscript) return this.finish(m, target, conv, systemMessage(this.o.port.platform, NO_TRANSCRIPT_REPLY), [], false);
      text = [text, m.voiceTranscript].filter((t) => t !== "").join("\n");
    }
    if (m.forwardOf !== undefined && this.o.port.forwarded !== undefined) {
      const fwd = await this.o.port.forwarded(m).catch(() => FORWARD_UNREADABLE);
      text = [text, fwd].filter((t) => t !== "").join("\n");
    }
    const { attachments, notes } = await fetchMedia(this.o.port, m, owner, this.o.mediaRoot, conv);
    const prompt = fitPrompt(text, notes);
    if (prompt === "" && attachments.length === 0) {
      return this.finish(m, target, conv, systemMessage(this.o.port.platform, NOTHING_READABLE_REPLY), [], false);
    }
    let reply: string;
    let files: OutboundFile[] = [];
    const release = await this.slot();
    if (this.abort.signal.aborted) return release();
    const turn = new AbortController();
    const onStop = (): void => turn.abort();
    this.abort.signal.addEventListener("abort", onStop, { once: true });
    const deadline = new AbortController();
    let timedOut = false;
    void this.clock.sleep(tools ? OWNER_TURN_TIMEOUT_MS : TURN_TIMEOUT_MS, deadline.signal).then((fired) => {
      if (!fired) return;
      timedOut = true;
      turn.abort();
    });
    try {
      const sid = await this.session(conv, tools);
      const out = await this.o.driver.runTurn(sid, prompt, attachments, turn.signal);
      this.lastUsed.set(conv, this.clock.now());
      // Only a completed turn's attachments go out; a failed, timed-out or cancelled turn's copies are deleted.
      const complete = out.terminal === "completed" && !timedOut && tools;
      if (!complete) await discardFiles(out.files);
      if (out.terminal === "cancelled" && this.abort.signal.aborted) return; // shutting down: the claim stays for recovery
      reply = out.text ?? "";
      files = complete ? out.files : [];
      if (timedOut) reply = systemMessage(this.o.port.platform, TURN_TIMEOUT_REPLY);
      else if (out.terminal !== "completed" && reply === "") reply = systemMessage(this.o.port.platform, TURN_FAILED_REPLY);
    } catch {
      if (this.abort.signal.aborted) return;
      // the session host is gone or lost the session: the next message starts a fresh one
      const s = this.sessions.get(conv);
      this.sessions.delete(conv);
      this.lastUsed.delete(conv);
      void s?.then((sid) => this.o.driver.closeSession(sid)).catch(() => undefined);
      reply = systemMessage(this.o.port.platform, TURN_FAILED_REPLY);
    } finally {
      deadline.abort();
      this.abort.signal.removeEventListener("abort", onStop);
      release();
    }
    await this.finish(m, target, conv, reply, files, true);
  }

  private async finish(m: InboundMessage, target: ReplyTarget, conv: string, reply: string, files: OutboundFile[], holdable: boolean): Promise<void> {
    const st = this.o.state;
    const claim = st.claimOf(m.id);
    const held = holdable ? st.takeHeld(conv, this.clock.now()) : [];
    const parts = shapeReply(withHeld(held, reply), this.o.port.partBytes);
    const dropped = Math.max(0, files.length - MAX_FILES_OUT);
    if (claim) {
      claim.pending = { parts, next: 0, files: files.slice(0, MAX_FILES_OUT), nextFile: 0, dropped };
      await st.save();
    }
    await this.deliver(m.id, conv, target, holdable ? reply : "", false, held);
  }

  /**
   * Sends a claim's pending reply and files from where they stand, persisting progress, then releases the claim.
   * Stopping ends it where it stands: the claim keeps the rest for the next start, which resumes with the same IDs.
   */
  private async deliver(id: string, conv: string, target: ReplyTarget, holdText: string, recovering: boolean, held: string[] = []): Promise<void> {
    const st = this.o.state;
    const claim = st.claimOf(id);
    const p = claim?.pending;
    if (!claim || !p) return;
    const stopping = this.abort.signal;
    let result: "sent" | "refused";
    try {
      result = await this.sendParts(
        target,
        p.parts,
        `r-${id}`,
        p.next,
        async (next) => {
          p.next = next;
          await st.save();
        },
        stopping,
      );
    } catch (err) {
      if (stopping.aborted) return;
      this.log(`reply not sent: ${why(err)}`);
      result = "refused";
    }
    if (result === "refused") {
      const now = this.clock.now();
      // Once a part went out, only what the chat has not seen is held (the earlier held replies led that part).
      const started = p.next > 0;
      if (!started) for (const h of held) st.hold(conv, h, now, this.o.port.partBytes / 2);
      const rest = recovering || started ? p.parts.slice(p.next).join("") : holdText;
      if (rest !== "") st.hold(conv, rest, now, this.o.port.partBytes / 2);
    }
    const fileTarget = { ...target, handle: null };
    for (let i = p.nextFile; i < p.files.length; i++) {
      const f = p.files[i]!;
      try {
        const r = await this.o.port.sendFile(fileTarget, f, `f-${id}-${i}`, stopping);
        if (r === "refused") p.dropped++;
      } catch (err) {
        if (stopping.aborted) return;
        this.log(`file not sent: ${why(err)}`);
        p.dropped++;
      }
      p.nextFile = i + 1;
      await st.save();
      await rm(f.path, { force: true });
    }
    if (p.dropped > 0) await this.note(fileTarget, `[${p.dropped} attached file${p.dropped === 1 ? "" : "s"} could not be sent]`, `n-${id}`);
    st.release(id);
    await st.save();
  }

  // ---- confirm_ask ----

  /** Asks the owner in their direct chat; resolves with the final state. At most one open question per bridge. */
  async ask(question: string, timeoutSeconds = CONFIRM_DEFAULT_SECONDS): Promise<{ id: string; state: ConfirmState }> {
    timeoutSeconds = Math.min(CONFIRM_MAX_SECONDS, Math.max(1, Math.floor(timeoutSeconds)));
    const owner = this.o.policy.ownerId;
    const id = randomBytes(6).toString("hex");
    if (owner === null || (this.question && this.question.state === "pending")) return { id, state: "failed" as ConfirmState };
    const text = systemMessage(this.o.port.platform, questionText(question, timeoutSeconds));
    let sent: "sent" | "refused";
    try {
      sent = await this.sendParts({ to: owner, handle: null, chat: null }, [text], `q-${id}`);
    } catch {
      sent = "refused";
    }
    if (sent !== "sent") return { id, state: "failed" as ConfirmState };
    let settle!: (s: ConfirmState) => void;
    const done = new Promise<ConfirmState>((r) => (settle = r));
    const deliveredAt = this.clock.now();
    const q: Question = { id, state: "pending", deliveredAt, deadline: deliveredAt + timeoutSeconds * 1000, settle, done };
    this.question = q;
    const timer = new AbortController();
    void this.clock.sleep(timeoutSeconds * 1000, timer.signal).then(async (fired) => {
      if (!fired || q.state !== "pending") return;
      q.state = "expired";
      q.settle("expired");
      await this.note({ to: owner, handle: null, chat: null }, "No answer in time: counted as no.", `qx-${id}`);
    });
    const state = await done;
    timer.abort();
    return { id, state };
  }

  /** True when one of this bridge's chat conversations runs on SCV session `sessionId` (`confirm_ask` routing). */
  async holdsSession(sessionId: string): Promise<boolean> {
    for (const s of [...this.sessions.values()]) if ((await s.catch(() => null)) === sessionId) return true;
    return false;
  }

  /** The open question, if any (for `confirm_status`). */
  questionState(): { id: string; state: ConfirmState; deadlineMs: number } | null {
    const q = this.question;
    return q ? { id: q.id, state: q.state, deadlineMs: q.deadline } : null;
  }

  /** Withdraws the open question (its asker stopped following it, or the bridge stops) and tells the owner. */
  withdrawQuestion(): void {
    const q = this.question;
    if (q && q.state === "pending" && this.o.policy.ownerId !== null) {
      q.state = "withdrawn";
      void this.note({ to: this.o.policy.ownerId, handle: null, chat: null }, "The question was withdrawn; no answer is needed.", `qw-${q.id}`);
      q.settle("withdrawn");
    }
  }

  private answersQuestion(m: InboundMessage): boolean {
    const q = this.question;
    if (!q || q.state !== "pending") return false;
    if (!this.isOwner(m.sender) || m.kind !== "direct" || m.media.length > 0) return false;
    if (m.timeMs < q.deliveredAt) return false;
    const ans = parseYesNo(m.text);
    if (ans === null) return false;
    q.state = ans;
    const ack = ans === "yes" ? "Answer received: going ahead." : "Answer received: stopped.";
    void this.note({ to: m.sender, handle: m.handle, chat: null }, ack, `qa-${q.id}`).finally(() => q.settle(ans));
    return true;
  }

  /** Stops: running turns are cancelled, their claims stay for the next start's recovery. */
  async stop(): Promise<void> {
    this.abort.abort();
    this.withdrawQuestion();
    await this.idle();
    while (this.notices.size > 0) await Promise.allSettled([...this.notices]); // they save the delivery state
    for (const s of this.sessions.values()) await s.then((id) => this.o.driver.closeSession(id)).catch(() => undefined);
  }
}
