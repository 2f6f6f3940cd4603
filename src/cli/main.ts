import { type Command, runCommand } from './frame/command.js';
import { Exit } from './frame/exit.js';
import { type CommandIo, processIo } from './frame/io.js';
import { VERSION } from '../version.js';
import { printable } from './printable.js';

/** Each command lives in its own module, loaded only when it runs. */
export const COMMANDS: Readonly<Record<string, () => Promise<Command>>> = {
  run: async () => (await import('./commands/run.js')).run,
  status: async () => (await import('./commands/status.js')).status,
  provision: async () => (await import('./commands/provision.js')).provision,
  token: async () => (await import('./commands/token.js')).token,
  key: async () => (await import('./commands/key.js')).key,
  doctor: async () => (await import('./commands/doctor.js')).doctor,
  serve: async () => (await import('./commands/serve.js')).serve,
  demo: async () => (await import('./commands/demo.js')).demo,
  chat: async () => (await import('./commands/chat.js')).chat,
  logs: async () => (await import('./commands/logs.js')).logs,
  watch: async () => (await import('./commands/watch.js')).watch,
  broker: async () => (await import('./commands/broker.js')).broker,
  // Hidden: the demo's app, a separate process attached to the relay.
  'demo-app': async () => (await import('./commands/demo-app.js')).demoApp,
};

const USAGE = `usage: botlink <command> [options]

commands:
  run        the daemon, in the foreground
  status     what the agent holds and whether the daemon runs
  provision  register this device and store its botId
  token      print a valid access token
  key        broker mode: this device's key, made if none, as deviceId,publicKey
  doctor     field diagnostics
  serve      the reference token service
  demo       reference service and agent on loopback
  chat       one conversation round through the running daemon (TEXT, or --audio FILE)
  logs       the daemon's log in words, rotated files included; -f follows
  watch      the live conversation through the running daemon, read-only
  broker     the vendor's broker (broker mode), and its operator commands

botlink <command> --help for its options; botlink --version`;

/** `botlink …argv` with `io`, the process's unless a caller (a test) gives its own; resolves with the exit code. */
export async function main(argv: readonly string[], io: CommandIo = processIo()): Promise<number> {
  const [name, ...rest] = argv;
  if (name === '--version' || name === '-v') {
    io.stdout.write(`${VERSION}\n`);
    return Exit.OK;
  }
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    io.stdout.write(`${USAGE}\n`);
    return name === undefined ? Exit.USAGE : Exit.OK;
  }
  const load = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
  if (!load) {
    io.stderr.write(`botlink: unknown command '${printable(name)}'\n${USAGE}\n`);
    return Exit.USAGE;
  }
  return runCommand(name, await load(), rest, io);
}
