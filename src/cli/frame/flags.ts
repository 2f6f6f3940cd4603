import type { ParseArgsConfig } from 'node:util';
import { UsageError } from './exit.js';

/**
 * A flag as a command declares it: node:util parseArgs' string or boolean, or a number the frame
 * reads and checks before the command runs — `seconds` (a positive number of seconds) or an
 * `integer` within bounds. A flag with a value may be `required` (absent, or given as '', is a usage
 * error); a string flag may list its `choices`, and its value is then typed as one of them.
 */
export type FlagSpec =
  | { readonly type: 'string'; readonly short?: string; readonly required?: boolean; readonly choices?: readonly string[] }
  | { readonly type: 'boolean'; readonly short?: string; readonly required?: never }
  | { readonly type: 'seconds'; readonly required?: boolean }
  | { readonly type: 'integer'; readonly min: number; readonly max: number; readonly required?: boolean };

export type FlagSpecs = Readonly<Record<string, FlagSpec>>;

/** The value of a flag as its spec reads it: one of its choices, a string, a boolean or a number. */
export type FlagValue<S extends FlagSpec> = S extends { type: 'boolean' }
  ? boolean
  : S extends { type: 'string'; choices: readonly (infer C)[] }
    ? C
    : S extends { type: 'string' }
      ? string
      : number;

type RequiredName<F extends FlagSpecs> = { [K in keyof F]: F[K] extends { required: true } ? K : never }[keyof F];

/** The value of each flag given, as its spec reads it: a required flag is always there, any other absent when not given. */
export type FlagValues<F extends FlagSpecs> = { readonly [K in RequiredName<F>]: FlagValue<F[K]> } & {
  readonly [K in Exclude<keyof F, RequiredName<F>>]?: FlagValue<F[K]>;
};

type ParseOptions = NonNullable<ParseArgsConfig['options']>;

/** The options parseArgs reads the flags with: numbers come in as strings. */
export function parseOptions(flags: FlagSpecs): ParseOptions {
  const options: ParseOptions = {};
  for (const [name, spec] of Object.entries(flags)) {
    if (spec.type === 'boolean' || spec.type === 'string') {
      options[name] = spec.short === undefined ? { type: spec.type } : { type: spec.type, short: spec.short };
    } else options[name] = { type: 'string' };
  }
  return options;
}

/**
 * The flags parseArgs read, each checked against its spec: a number out of its bounds, a string not
 * among its choices, or a required flag absent or empty is a usage error.
 */
export function readFlags<F extends FlagSpecs>(flags: F, values: Readonly<Record<string, unknown>>): FlagValues<F> {
  const read: Record<string, string | boolean | number> = {};
  for (const [name, spec] of Object.entries(flags)) {
    const value = values[name];
    if (typeof value === 'boolean') read[name] = value;
    else if (typeof value === 'string')
      read[name] = spec.type === 'string' || spec.type === 'boolean' ? value : numberFlag(name, spec, value);
    if (spec.required === true && (value === undefined || value === '')) throw new UsageError(`--${name} is required`);
    if (spec.type === 'string' && spec.choices !== undefined && typeof value === 'string' && !spec.choices.includes(value))
      throw new UsageError(`--${name} must be one of ${spec.choices.join(', ')}, got '${value}'`);
  }
  return read as FlagValues<F>;
}

function numberFlag(name: string, spec: Extract<FlagSpec, { type: 'seconds' | 'integer' }>, raw: string): number {
  if (spec.type === 'seconds') {
    const seconds = Number(raw);
    if (!(Number.isFinite(seconds) && seconds > 0)) throw new UsageError(`--${name} must be a positive number of seconds, got '${raw}'`);
    return seconds;
  }
  // Digits only: Number() would also take '', ' 7', '0x10' and '1e3'.
  const n = /^[0-9]{1,16}$/.test(raw) ? Number(raw) : Number.NaN;
  if (!(n >= spec.min && n <= spec.max)) throw new UsageError(`--${name} must be an integer from ${spec.min} to ${spec.max}, got '${raw}'`);
  return n;
}
