/**
 * Child process for the crash test (not a test file): holds a session and appends large records forever,
 * printing "ready" once some are durable. The parent kills it with SIGKILL mid-append. Stops appending (and
 * waits to be killed) after MAX_RECORDS, so a slow parent cannot let it fill the disk.
 * argv: <home> <session id>
 */
import { SessionStore } from "../../src/store/sessions/index.js";

const [home, id] = process.argv.slice(2) as [string, string];
const store = new SessionStore({ home });
const h = await store.acquire(id);
const MAX_RECORDS = 400;
let i = 0;
while (i < MAX_RECORDS) {
  const batch: Array<Promise<unknown>> = [];
  for (let k = 0; k < 8; k++, i++) batch.push(h.writer.append({ kind: "user", turn_id: `t${i}`, text: `r${i}:` + "é".repeat(20_000 + (i % 7) * 3000) }));
  await Promise.all(batch);
  if (i === 32) {
    await h.writer.flush();
    process.stdout.write("ready\n");
  }
}
setInterval(() => undefined, 60_000);
