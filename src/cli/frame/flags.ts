import type { ParseArgsConfig } from 'node:util';
import { UsageError } from './exit.js';

/**
 * A flag as a command declares it: node:util parseArgs' string or boolean, or a number the frame
 * reads and checks before the command runs — `seconds` (a positive number of seconds) or an
 * `integer` within bounds.
 */
export type FlagSpec =
  | { readonly type: 'string'; readonly short?: string }
  | { readonly type: 'boolean'; readonly short?: string }
  | { readonly type: 'seconds' }
  | { readonly type: 'integer'; readonly min: number; readonly max: number };

export type FlagSpecs = Readonly<Record<string, FlagSpec>>;

type FlagValue<S extends FlagSpec> = S extends { type: 'boolean' } ? boolean : S extends { type: 'string' } ? string : number;

/** The value of each flag given, as its spec reads it; a flag not given is absent. */
export type FlagValues<F extends FlagSpecs> = { readonly [K in keyof F]?: FlagValue<F[K]> };

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

/** The flags parseArgs read, numbers checked against their bounds: a value out of them is a usage error. */
export function readFlags<F extends FlagSpecs>(flags: F, values: Readonly<Record<string, unknown>>): FlagValues<F> {
  const read: Record<string, string | boolean | number> = {};
  for (const [name, spec] of Object.entries(flags)) {
    const value = values[name];
    if (typeof value === 'boolean') read[name] = value;
    else if (typeof value === 'string')
      read[name] = spec.type === 'string' || spec.type === 'boolean' ? value : numberFlag(name, spec, value);
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
