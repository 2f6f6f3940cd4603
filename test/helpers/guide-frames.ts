import { readFileSync } from 'node:fs';

/**
 * The frames of DESIGN §1.7 as the guide shows them (test/fixtures/conversation/), written from DESIGN
 * and not from our code: the reference service is checked against their shapes, our clients parse them.
 */
type Json = Record<string, unknown>;

function load(name: string): Record<string, Json> {
  const all = JSON.parse(readFileSync(new URL(`../fixtures/conversation/${name}`, import.meta.url), 'utf8')) as Record<string, unknown>;
  return Object.fromEntries(Object.entries(all).filter(([key]) => key !== '_about')) as Record<string, Json>;
}

/** Up frames (device → cloud), by name. */
export const UP = load('up.json');
/** Down frames (cloud → device), by name. */
export const DOWN = load('down.json');

/** A fixture frame as the text the wire carries, with fields replaced (e.g. another roundId). */
export function downText(name: string, patch: { content?: Json } & Json = {}): string {
  const frame = structuredClone(DOWN[name]!);
  const { content, ...top } = patch;
  Object.assign(frame, top);
  if (content) frame['content'] = { ...(frame['content'] as Json), ...content };
  return JSON.stringify(frame);
}

/** Fields the guide shows on some frames of a kind and not on others: their absence is no difference. */
const OPTIONAL = new Set(['uid', 't']);

/** The JSON type of a value, as a shape compares it: null stays null, so `mid: null` is a shape of its own. */
function kind(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  return typeof v;
}

/**
 * Where `actual` differs in shape from `expected`: the same keys (the optional ones aside) with
 * values of the same JSON type, nested objects compared the same way; values themselves are free.
 * `open` names paths whose contents the guide leaves free (e.g. an echoed eventData). [] when alike.
 */
export function shapeDifferences(actual: unknown, expected: unknown, open: readonly string[] = [], path = ''): string[] {
  if (open.includes(path))
    return kind(actual) === kind(expected) ? [] : [`${path || '(frame)'}: ${kind(actual)}, guide has ${kind(expected)}`];
  if (kind(actual) !== kind(expected)) return [`${path || '(frame)'}: ${kind(actual)}, guide has ${kind(expected)}`];
  if (kind(expected) !== 'object') return [];
  const a = actual as Json;
  const e = expected as Json;
  const out: string[] = [];
  for (const key of new Set([...Object.keys(a), ...Object.keys(e)])) {
    const at = path ? `${path}.${key}` : key;
    if (!(key in e)) {
      if (!OPTIONAL.has(key)) out.push(`${at}: not in the guide's frame`);
    } else if (!(key in a)) {
      if (!OPTIONAL.has(key)) out.push(`${at}: missing`);
    } else out.push(...shapeDifferences(a[key], e[key], open, at));
  }
  return out;
}
