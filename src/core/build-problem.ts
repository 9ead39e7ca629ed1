/**
 * An installation fault the launcher reports (bin/berth: a split script's second part that cannot be read or does not
 * compile): an Error whose `code` is `BERTH_BUILD` and whose message names the file and the fix (`npm run build`). It
 * carries no user data, so it may be logged whole where other errors are logged by name only.
 */
export function buildProblem(err: unknown): string | undefined {
  return err instanceof Error && (err as { code?: unknown }).code === "BERTH_BUILD" ? err.message : undefined;
}
