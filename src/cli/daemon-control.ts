/**
 * `daemon.control` on the daemon's SCV socket: one handler per action over the channel components, the confirm
 * registry and the delegation records.
 *
 * Contract:
 * - The handler computes the whole reply (a `daemon.status` frame or an error) and returns it; the connection writes
 *   it afterwards. No lock (component reconciliation, delegation scans) is held while a reply is written, so a client
 *   that never reads blocks only its own connection.
 * - Mutations (`channel_set`, `channel_logout`) resolve after the reconciliation they cause has joined.
 * - Refusals are fixed messages naming the field and the fix; a client's own text (channel, account, handle) is
 *   never echoed, so nothing it sent can come back as terminal controls.
 * - A `channel_set` workspace is saved canonical (symlinks resolved), as `session.start` resolves its `cwd`: a link
 *   repointed later does not move the account's workspace.
 */
import { isAbsolute } from "node:path";
import { realpath, stat } from "node:fs/promises";
import { checkAccountName } from "../channels/common/files.js";
import { channelOf, type ChannelName } from "../channels/config.js";
import { daemonStatusFrame, parseControl, type ControlAction, type DaemonStatus, type DelegationEntry } from "../protocols/scv/control.js";
import type { ControlCommand, ErrorCode, WireError } from "../protocols/scv/wire.js";
import type { DaemonChannels } from "./daemon-channels.js";
import type { ConfirmRegistry } from "./daemon-confirm.js";

export interface DelegationControl {
  counts(): Promise<{ active: number; reaped: number }>;
  list(all: boolean): Promise<DelegationEntry[]>;
  /** Stops the run named by `handle` and/or every orphan; null `killed` when `handle` names no run. */
  kill(handle: string | undefined, orphans: boolean): Promise<{ killed: string[] } | { unknown: string }>;
}

export interface RestartControl {
  /** The planned restart, or a refusal message (`restart_error`). */
  plan(a: Extract<ControlAction, { action: "restart_when_idle" }>): Promise<Record<string, unknown> | { refused: string }>;
  current(): Record<string, unknown> | null;
}

export interface ControlDeps {
  version: string;
  pid: number;
  channels: () => DaemonChannels | null;
  confirm: ConfirmRegistry;
  delegations: DelegationControl;
  restart: RestartControl;
  /** The selection a session naming none runs (`DaemonStatus.selection`), or null when it cannot be worked out. */
  selection?: () => Promise<{ provider: string; model: string | null } | null>;
}

type Reply = string | WireError;

/** Why the connection's peer may not manage the daemon (a delegated agent run), or null when it may. */
export type CallerCheck = () => Promise<string | null>;

/** The actions a delegated agent run may not take (they change chat accounts or stop other runs). */
const MANAGING: ReadonlySet<ControlAction["action"]> = new Set(["channel_set", "channel_logout", "delegation_kill"]);

export function createDaemonControl(d: ControlDeps): (cmd: ControlCommand, requestId: string, caller?: CallerCheck) => Promise<Reply> {
  const fail = (code: ErrorCode, message: string, requestId: string): WireError => ({ code, message, request_id: requestId });
  const status = async (extra: Partial<DaemonStatus> = {}): Promise<DaemonStatus> => {
    const plan = d.restart.current();
    const [counts, selection] = await Promise.all([d.delegations.counts(), d.selection?.().catch(() => null) ?? null]);
    return {
      version: d.version,
      pid: d.pid,
      components: d.channels()?.status() ?? [],
      ...extra,
      delegations: { ...counts, ...extra.delegations },
      ...(plan !== null ? { restart: plan } : {}),
      ...(selection !== null ? { selection } : {}),
    };
  };
  const channelAccount = (a: { channel: string; account: string }, rid: string): { channel: ChannelName } | WireError => {
    const channel = channelOf(a.channel);
    if (channel === null) return fail("component_error", "unknown channel in `command.channel`: use wechat or feishu (lark is feishu)", rid);
    try {
      checkAccountName(a.account);
    } catch {
      return fail("component_error", "invalid account name in `command.account`: use 1-64 of A-Z a-z 0-9 _ -", rid);
    }
    return { channel };
  };
  const needChannels = (rid: string): DaemonChannels | WireError =>
    d.channels() ?? fail("component_error", "the daemon's channel components are not running yet; retry in a moment", rid);

  const handlers: { [K in ControlAction["action"]]: (a: Extract<ControlAction, { action: K }>, rid: string) => Promise<Reply> } = {
    status: async (_a, rid) => daemonStatusFrame(rid, await status()),
    reload: async (_a, rid) => {
      await d.channels()?.reload();
      return daemonStatusFrame(rid, await status());
    },
    channel_set: async (a, rid) => {
      const target = channelAccount(a, rid);
      if ("code" in target) return target;
      const ch = target.channel;
      let workspace: string | undefined;
      if (a.workspace !== undefined) {
        if (!isAbsolute(a.workspace)) return fail("component_error", "`workspace` must be an absolute path", rid);
        const st = await stat(a.workspace).catch(() => null);
        workspace = st?.isDirectory() === true ? await realpath(a.workspace).catch(() => undefined) : undefined;
        if (workspace === undefined) return fail("component_error", "`workspace` is not an existing directory", rid);
      }
      const c = needChannels(rid);
      if ("code" in c) return c;
      try {
        await c.set(ch, a.account, {
          ...(a.enabled !== undefined ? { enabled: a.enabled } : {}),
          ...(workspace !== undefined ? { workspace } : {}),
          ...(a.remote_tools !== undefined ? { remote_tools: a.remote_tools } : {}),
          ...(a.senders !== undefined ? { senders: a.senders } : {}),
        });
      } catch (e) {
        return fail("component_error", componentMessage(e), rid);
      }
      return daemonStatusFrame(rid, await status());
    },
    channel_logout: async (a, rid) => {
      const target = channelAccount(a, rid);
      if ("code" in target) return target;
      const c = needChannels(rid);
      if ("code" in c) return c;
      try {
        await c.logout(target.channel, a.account);
      } catch (e) {
        return fail("component_error", componentMessage(e), rid);
      }
      return daemonStatusFrame(rid, await status());
    },
    delegations: async (a, rid) => {
      const entries = await d.delegations.list(a.all);
      return daemonStatusFrame(rid, await status({ delegations: { ...(await d.delegations.counts()), entries } }));
    },
    delegation_kill: async (a, rid) => {
      if (a.handle === undefined && !a.orphans) return fail("delegation_error", "name a delegation `handle`, set `orphans: true`, or both", rid);
      const r = await d.delegations.kill(a.handle, a.orphans);
      if ("unknown" in r) return fail("delegation_error", "no delegated run has the `command.handle` given (list them with the `delegations` action)", rid);
      const entries = await d.delegations.list(true);
      return daemonStatusFrame(rid, await status({ delegations: { ...(await d.delegations.counts()), entries, killed: r.killed } }));
    },
    restart_when_idle: async (a, rid) => {
      const r = await d.restart.plan(a);
      if ("refused" in r) return fail("restart_error", String(r.refused), rid);
      return daemonStatusFrame(rid, await status());
    },
    confirm_ask: async (a, rid) => {
      const target = (await d.channels()?.ownerChat(a.parent?.split("/")[1])) ?? null;
      if (target === null)
        return fail("confirm_error", "no owner chat is reachable: connect a chat account whose owner is known (`berth channel login`)", rid);
      if (d.confirm.waiting(target.chat) || target.bridge.questionState()?.state === "pending")
        return fail("confirm_error", `a question already waits for an answer in ${target.chat}; follow it with confirm_status`, rid);
      const view = d.confirm.ask(a.question, a.timeout_seconds, target);
      return daemonStatusFrame(rid, await status({ confirm: view }));
    },
    confirm_status: async (a, rid) => {
      const view = d.confirm.follow(a.id);
      if (view === null) return fail("confirm_error", "unknown question ID (questions live in memory only and end with a daemon restart)", rid);
      return daemonStatusFrame(rid, await status({ confirm: view }));
    },
  };

  return async (cmd, requestId, caller) => {
    const a = parseControl(cmd, requestId);
    if ("code" in a) return a;
    if (MANAGING.has(a.action) && caller !== undefined) {
      const why = await caller();
      if (why !== null)
        return fail(
          a.action === "delegation_kill" ? "delegation_error" : "component_error",
          `a delegated agent run cannot manage the daemon (${why.slice(0, 120)}); ask the user to run this from their own terminal`,
          requestId,
        );
    }
    const h = handlers[a.action] as (a: ControlAction, rid: string) => Promise<Reply>;
    return h(a, requestId);
  };
}

/** Our own fixed messages (account-name checks, settings file errors) pass; anything else is generic. */
function componentMessage(e: unknown): string {
  const m = e instanceof Error ? e.message : "";
  if (/^invalid account name|is not valid JSON|cannot be read|is locked by another berth process/.test(m)) return m.slice(0, 300);
  return "the channel settings could not be saved; check the permissions of $MC_HOME/channels";
}
