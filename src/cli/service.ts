/** `berth service` / `magi-code --app service`. */
export async function runServiceCommand(_argv: string[]): Promise<number> {
  process.stderr.write("berth service: not implemented yet\n");
  return 2;
}
export async function runMagiCode(argv: string[]): Promise<number> {
  return runServiceCommand(argv);
}
