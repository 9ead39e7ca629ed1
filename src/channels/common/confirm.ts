/**
 * Yes/no parsing for `confirm_ask` answers. Pure.
 * An answer is trimmed, lower-cased, and loses trailing `.!。！`; anything else (`ok`, `好`, `可以`) is not an answer.
 */
import { trimEndChars } from "../../core/text-scan.js";

const YES = new Set(["yes", "y", "是", "是的", "确认", "同意"]);
const NO = new Set(["no", "n", "否", "不", "不要", "取消", "算了", "stop"]);

export function parseYesNo(text: string): "yes" | "no" | null {
  const t = trimEndChars(text.trim().toLowerCase(), ".!。！").trim();
  if (YES.has(t)) return "yes";
  if (NO.has(t)) return "no";
  return null;
}

export type ConfirmState = "pending" | "yes" | "no" | "expired" | "withdrawn" | "failed";

export function questionText(question: string, timeoutSeconds: number): string {
  const minutes = Math.max(1, Math.round(timeoutSeconds / 60));
  return `${question}\n\nReply yes or no; no answer in ${minutes} minutes counts as no.`;
}
