import { parseArgs } from 'node:util';
import { messageOf } from '../../protocol/errors.js';
import { Exit, UsageError } from './exit.js';
import { exitOf, failureText } from './failures.js';
import { printable } from '../printable.js';
import { type FlagSpecs, type FlagValues, parseOptions, readFlags } from './flags.js';
import { type CommandIo, processIo } from './io.js';
import { checkRules, type Group, type Need, type RuleValues } from './rules.js';

/** A positional argument: one word (`BOTID`), or every word left (`TEXT…`, variadic, last). */
export type Positional =
  | { readonly name: string; readonly required?: boolean; readonly variadic?: false }
  | { readonly name: string; readonly required?: boolean; readonly variadic: true };

type ArgValue<K extends Positional> = K extends { variadic: true } ? string[] : K extends { required: true } ? string : string | undefined;

/** The positionals by name: a variadic one's words, a required one's word, an optional one's when given. */
export type Args<P extends readonly Positional[]> = { readonly [K in P[number] as K['name']]: ArgValue<K> };

/** The names of the positionals, which rules name in capitals. */
type Names<P extends readonly Positional[]> = P[number]['name'];

/** What run is handed: its flags and positionals as declared, and its io (stdout, stderr, env). */
export interface Context<F extends FlagSpecs, P extends readonly Positional[], X = [], O = [], N = []> extends CommandIo {
  /** The command as typed after `botlink`, with its subcommand: `status`, `broker code`. */
  readonly name: string;
  readonly flags: FlagValues<F> & RuleValues<F, X, O, N>;
  readonly args: Args<P>;
}

/**
 * A command as it declares itself to the frame: its usage, flags, positionals, the rules between them
 * (rules.ts) and run. The frame owns the rest: --help, usage errors (64), the io run writes to, and
 * every failure's exit code and lines (failures.ts). run throws to fail; it returns a code only when
 * the code is its whole answer (doctor's verdict).
 */
export interface Command<
  F extends FlagSpecs = FlagSpecs,
  P extends readonly Positional[] = readonly Positional[],
  X extends readonly Group<F, Names<P>>[] = readonly Group<F, Names<P>>[],
  O extends readonly Group<F, Names<P>>[] = readonly Group<F, Names<P>>[],
  N extends readonly Need<F, Names<P>>[] = readonly Need<F, Names<P>>[],
> {
  /** The synopsis (and for most commands the options): printed by --help and after a usage error. */
  readonly usage: string;
  /** What --help prints after the usage, not repeated after a usage error. */
  readonly help?: string;
  readonly flags: F;
  readonly positionals?: P;
  /** Groups of which at most one may be given: `[['--adopt', '--replace']]`. */
  readonly exclusive?: X;
  /** Groups of which exactly one must be given: `[['TEXT', '--audio']]`. */
  readonly oneOf?: O;
  /** Pairs whose first, when given, needs the second: `[['--save-reply', '--audio']]`. */
  readonly needs?: N;
  /** What its failure lines begin with: `botlink <name>` unless it says otherwise. */
  readonly label?: string;
  /** Exit as soon as run ends: what it started may still hold the event loop (a daemon's timers, a check that overran). */
  readonly exitAtOnce?: boolean;
  /** `botlink <name> <sub> …`: each subcommand a command of its own, loaded only when it runs. */
  readonly subcommands?: Readonly<Record<string, () => Promise<Command>>>;
  /** Resolves when the command is done (exit 0), or with its exit code when that code is its answer. */
  run(ctx: Context<F, P, X, O, N>): Promise<number | undefined>;
}

/** A command, its flags' and positionals' types read from the declaration itself, rules included. */
export function defineCommand<
  const F extends FlagSpecs,
  const P extends readonly Positional[] = readonly [],
  const X extends readonly Group<NoInfer<F>, Names<NoInfer<P>>>[] = readonly [],
  const O extends readonly Group<NoInfer<F>, Names<NoInfer<P>>>[] = readonly [],
  const N extends readonly Need<NoInfer<F>, Names<NoInfer<P>>>[] = readonly [],
>(command: Command<F, P, X, O, N>): Command<F, P, X, O, N> {
  return command;
}

/**
 * Runs `botlink <name> …argv` with `io` (the process's unless given): the subcommand argv begins
 * with, else `command` on its flags and positionals. Returns the exit code; a command that exits at
 * once never returns.
 */
export async function runCommand(name: string, command: Command, argv: readonly string[], io: CommandIo = processIo()): Promise<number> {
  const [first, ...rest] = argv;
  const subcommands = command.subcommands ?? {};
  const sub = first !== undefined && Object.hasOwn(subcommands, first) ? subcommands[first] : undefined;
  if (sub) return runCommand(`${name} ${first}`, await sub(), rest, io);
  let code: number;
  try {
    const parsed = parse(name, command, argv);
    if (parsed === undefined) {
      io.stdout.write(`${command.help === undefined ? command.usage : `${command.usage}\n\n${command.help}`}\n`);
      return Exit.OK;
    }
    code = (await command.run({ ...parsed, stdout: io.stdout, stderr: io.stderr, env: io.env })) ?? Exit.OK;
  } catch (err) {
    io.stderr.write(
      err instanceof UsageError
        ? `botlink ${name}: ${printable(err.message)}\n${command.usage}\n`
        : failureText(err, command.label ?? `botlink ${name}`),
    );
    code = exitOf(err);
  }
  // The process itself: what the command started may still hold its event loop.
  if (command.exitAtOnce) process.exit(code);
  return code;
}

type Parsed = Omit<Context<FlagSpecs, readonly Positional[]>, keyof CommandIo>;

/** What `argv` gives the command, or undefined for --help; a mistake, or a broken rule, is a UsageError. */
function parse(name: string, command: Command, argv: readonly string[]): Parsed | undefined {
  const positionals = command.positionals ?? [];
  const [first] = argv;
  if (command.subcommands && positionals.length === 0 && first !== undefined && !first.startsWith('-'))
    throw new UsageError(`unknown command '${first}'`);
  let parsed: { values: Record<string, unknown>; positionals: string[] };
  try {
    parsed = parseArgs({
      args: [...argv],
      options: { ...parseOptions(command.flags), help: { type: 'boolean', short: 'h' } },
      strict: true,
      allowPositionals: positionals.length > 0,
    });
  } catch (err) {
    throw new UsageError(messageOf(err));
  }
  if (parsed.values['help'] === true) return undefined;
  const flags = readFlags(command.flags, parsed.values);
  const args = readArgs(positionals, parsed.positionals);
  checkRules(command, flags, args);
  return { name, flags, args };
}

function readArgs<P extends readonly Positional[]>(specs: P, given: readonly string[]): Args<P> {
  const args: Record<string, string | string[]> = {};
  let next = 0;
  for (const spec of specs) {
    const words = spec.variadic ? given.slice(next) : given.slice(next, next + 1);
    next += words.length;
    if (spec.required && words.length === 0) throw new UsageError(`${spec.name.toUpperCase()} is missing`);
    if (spec.variadic) args[spec.name] = words;
    else if (words[0] !== undefined) args[spec.name] = words[0];
  }
  if (next < given.length) throw new UsageError(`unexpected argument '${given[next]}'`);
  return args as Args<P>;
}
