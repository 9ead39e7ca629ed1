import { statSync } from "node:fs";
import { STABLE_AFTER_MS } from "../../src/store/settings/locked-json.js";

/**
 * Resolves once `file` last changed more than the settings memos' stability window ago (by the wall clock the memos
 * use), so a memo reading it now really keeps it.
 */
export async function settled(file: string): Promise<void> {
  for (;;) {
    const st = statSync(file, { bigint: true });
    const changed = Number((st.mtimeNs > st.ctimeNs ? st.mtimeNs : st.ctimeNs) / 1_000_000n);
    if (Date.now() - changed > STABLE_AFTER_MS + 1) return;
    await new Promise((r) => setImmediate(r));
  }
}
