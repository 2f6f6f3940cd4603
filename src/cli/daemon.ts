import { run } from './commands/run.js';
import { runCommand } from './frame/command.js';

/**
 * The daemon bundle's main (dist/botlink-daemon.cjs): `botlink run` and nothing else, so the daemon's
 * start reads, deserializes and sets up only the code the daemon runs (scripts/build.mjs, APPS). The
 * entry hands every other command to main.ts's bundle.
 */
export function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name !== 'run') throw new Error(`the daemon bundle runs \`botlink run\` only, not ${JSON.stringify(name)}: reinstall botlink`);
  return runCommand(name, run, rest);
}
