/** Entry points for `bin/berth` and `bin/magi-code`. */
export async function main(argv: string[]): Promise<void> {
  process.stderr.write(`berth: unknown command ${argv[0] ?? ""}\n`);
  process.exitCode = 2;
}

export async function magiCode(argv: string[]): Promise<void> {
  await main(argv);
}
