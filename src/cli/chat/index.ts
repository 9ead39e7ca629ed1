/** `berth chat`: the terminal client. (Placeholder until the client work lands.) */
export async function runChat(_argv: string[]): Promise<number> {
  process.stderr.write("berth chat: not implemented yet\n");
  return 2;
}
