import { UsageError } from './exit.js';
import type { FlagSpecs, FlagValue } from './flags.js';

/**
 * The rules between a command's flags and positionals, declared beside them and checked by the frame
 * before the command runs. A rule names a flag as it is typed (`--audio`) and a positional as its
 * usage shows it (`TEXT`): a flag is given when it is on the command line, a positional when its
 * words hold more than blanks.
 */

/** What a rule names: `--<flag>`, or a positional's name in capitals. */
export type Ref<F extends FlagSpecs, Names extends string> = `--${keyof F & string}` | Uppercase<Names>;

export type Group<F extends FlagSpecs, Names extends string> = readonly Ref<F, Names>[];
export type Need<F extends FlagSpecs, Names extends string> = readonly [Ref<F, Names>, Ref<F, Names>];

/** The rules as a command declares them (command.ts): `exclusive` and `oneOf` groups, `needs` pairs. */
interface Rules {
  readonly exclusive?: readonly (readonly string[])[];
  readonly oneOf?: readonly (readonly string[])[];
  readonly needs?: readonly (readonly [string, string])[];
}

/** Given the command line's values, the first rule it breaks is a usage error. */
export function checkRules(
  rules: Rules,
  flags: Readonly<Record<string, unknown>>,
  args: Readonly<Record<string, string | readonly string[] | undefined>>,
): void {
  const given = (ref: string): boolean => {
    if (ref.startsWith('--')) return flags[ref.slice(2)] !== undefined;
    const name = Object.keys(args).find((n) => n.toUpperCase() === ref);
    const value = name === undefined ? undefined : args[name];
    return value !== undefined && [value].flat().join('').trim() !== '';
  };
  for (const group of rules.exclusive ?? []) {
    const present = group.filter(given);
    if (present.length > 1) throw new UsageError(`${listed(present, 'and')} exclude each other`);
  }
  for (const group of rules.oneOf ?? []) {
    const present = group.filter(given);
    if (present.length === 0) throw new UsageError(`${listed(group, 'or')} is required`);
    if (present.length > 1) throw new UsageError(`${listed(present, 'and')} exclude each other`);
  }
  for (const [ref, needed] of rules.needs ?? []) {
    if (given(ref) && !given(needed)) throw new UsageError(`${ref} needs ${needed}`);
  }
}

/** `a`, `a and b`, `a, b and c`. */
function listed(refs: readonly string[], word: 'and' | 'or'): string {
  return refs.length < 2 ? refs.join('') : `${refs.slice(0, -1).join(', ')} ${word} ${refs.at(-1)}`;
}

// What the rules tell of the flags' values, so that a command reads them without checking again.

type FlagName<R> = R extends `--${infer N}` ? N : never;
type Given<F extends FlagSpecs, N> = { readonly [K in N & keyof F]: FlagValue<F[K]> };
type Absent<N extends PropertyKey> = { readonly [K in N]?: undefined };
/** One case per member of the group: its flag given, the group's other flags absent (a positional's case: all absent). */
type OneGiven<F extends FlagSpecs, G extends readonly string[]> = {
  [I in keyof G]: Given<F, FlagName<G[I]>> & Absent<Exclude<FlagName<G[number]>, FlagName<G[I]>>>;
}[number];

type AtMostOne<F extends FlagSpecs, Gs> = Gs extends readonly [infer G extends readonly string[], ...infer Rest]
  ? (OneGiven<F, G> | Absent<FlagName<G[number]>>) & AtMostOne<F, Rest>
  : unknown;
type ExactlyOne<F extends FlagSpecs, Gs> = Gs extends readonly [infer G extends readonly string[], ...infer Rest]
  ? OneGiven<F, G> & ExactlyOne<F, Rest>
  : unknown;
type Needing<F extends FlagSpecs, Ns> = Ns extends readonly [readonly [infer A, infer B], ...infer Rest]
  ? (Given<F, FlagName<A> | FlagName<B>> | Absent<FlagName<A>>) & Needing<F, Rest>
  : unknown;

/** The flags' values as the rules shape them: `if (flags.broker !== undefined)` then tells that --code is there and --vendor-id is not. */
export type RuleValues<F extends FlagSpecs, X, O, N> = AtMostOne<F, X> & ExactlyOne<F, O> & Needing<F, N>;
