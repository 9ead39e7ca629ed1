/** `berth daemon`: the live-backend host. (Owned by the host work; placeholder until it lands.) */
export async function runDaemon(_argv: string[]): Promise<number> {
  process.stderr.write("berth daemon: not implemented yet\n");
  return 2;
}
