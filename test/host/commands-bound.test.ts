/**
 * A backend that takes commands and never answers them, while a client keeps dispatching: the host keeps a record
 * (and a deadline timer) per unanswered command, so at most MAX_UNANSWERED wait per backend connection; past that a
 * dispatch is refused unsent, naming the cause and the fix, and admission resumes as the backend answers.
 * Real sockets: a fake backend over the backend socket, an AHP client over the WebSocket.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { AhpClient, FakeBackend, until, withHost } from "./helpers.js";
import { MAX_UNANSWERED } from "../../src/protocols/host/commands.js";

test("finding: a backend never answering let one client's dispatches pile up unanswered commands without bound; at most 1024 wait per connection", () =>
  withHost(async (h) => {
    const { be, reg } = await FakeBackend.session(h, { protocolVersion: 3, sourceId: "silent" });
    const session = reg.session as string;
    const { c } = await AhpClient.init(h, [session], "flooder");
    const configure = (level: string) => c.dispatch(session, { type: "session/configChanged", config: { thinkingLevel: level } });
    const commands = () => be.frames.filter((f) => f.type === "command" && f.command.type === "configure");
    for (let i = 0; i < MAX_UNANSWERED; i++) configure(`l${i}`);
    await until(() => commands().length === MAX_UNANSWERED, 10_000, "every command up to the bound sent");
    assert.deepEqual(c.actions(session).filter((e) => e.rejectionReason !== undefined), [], "none refused at the bound");
    const past = configure("one-past");
    const refused = await c.action((e) => e.origin?.clientSeq === past && e.rejectionReason !== undefined, "the dispatch one past the bound refused");
    assert.equal(
      refused.rejectionReason,
      "the host did not send this to the backend: 1024 commands to it are unanswered, the most this host keeps; retry once it answers them (or their 60 s deadline passes)",
      "the host's refusal, not the backend's",
    );
    assert.equal(h.state.commands.pending.size, MAX_UNANSWERED);
    // The backend answers one: the next dispatch is sent again.
    be.send({ type: "command_result", commandId: commands()[0]!.commandId, accepted: true });
    await c.action((e) => e.action.type === "session/configChanged" && e.action.config?.thinkingLevel === "l0", "the answered one echoed");
    configure("after");
    await until(() => commands().length === MAX_UNANSWERED + 1, 10_000, "the next command sent");
    c.close();
    be.close();
  }));
