import { createHash } from 'node:crypto';

/** Seeded generation shared by the fuzz suites: the same seed gives the same inputs on every machine. */

export type Rng = () => number;

/** mulberry32: small, fast, and the same sequence on every machine. */
export function prng(seed: number): Rng {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The seed of a fuzz run: FUZZ_SEED=n reproduces a failing run. */
export function fuzzSeed(fallback: number): number {
  const given = process.env['FUZZ_SEED'];
  return given === undefined || given === '' ? fallback : Number(given);
}

export const int = (rng: Rng, n: number): number => Math.floor(rng() * n);
export const pick = <T>(rng: Rng, items: readonly T[]): T => items[int(rng, items.length)]!;
export const chance = (rng: Rng, p: number): boolean => rng() < p;

/** A JSON object (not null, not an array): what a parsed body must be before its fields are read. */
export const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Content-Type values a peer may send, JSON or not. */
export const CONTENT_TYPES: readonly string[] = [
  'application/json',
  'application/json; charset=utf-8',
  'text/html',
  'text/plain',
  'application/octet-stream',
  'application/json; charset=latin1',
  '*/*',
  '',
];

/** Characters that break naive parsers, escapers and header writers. */
export const AWKWARD_CHARS = ['\u0000', '\n', '\r', '"', '\\', '\u007f', '\u00ff', '\u2028', '\u202e', '\ufeff', '\ud800', '😀', 'é'];

/** Byte sequences that are not UTF-8. */
export const INVALID_UTF8: readonly (readonly number[])[] = [
  [0xff],
  [0xc3, 0x28],
  [0x80],
  [0xed, 0xa0, 0x80],
  [0xf8, 0x88, 0x80, 0x80, 0x80],
  [0xe2, 0x82],
];

/** Numbers a JSON reader must not take for a sane integer. */
export const ODD_NUMBERS: readonly string[] = [
  '0',
  '-1',
  '1.5',
  '1e308',
  '1e999',
  '-1e999',
  '9007199254740993',
  '2e-400',
  '-0',
  '7200.000001',
  '1E3',
];

/** Strings that look like numbers to a lax reader. */
export const NUMBERISH_STRINGS: readonly string[] = [
  'NaN',
  'Infinity',
  '-Infinity',
  '7200',
  '0x1C20',
  '',
  ' ',
  'null',
  'undefined',
  '1e3',
  '٧٢٠٠',
];

export function randomString(rng: Rng, maxLen: number): string {
  const len = int(rng, maxLen + 1);
  let out = '';
  for (let i = 0; i < len; i++) out += chance(rng, 0.15) ? pick(rng, AWKWARD_CHARS) : String.fromCharCode(0x20 + int(rng, 95));
  return out;
}

export function randomBytes(rng: Rng, maxLen: number): Buffer {
  const bytes = Buffer.alloc(int(rng, maxLen + 1));
  for (let i = 0; i < bytes.length; i++) bytes[i] = int(rng, 256);
  return bytes;
}

/** A random JSON value of bounded depth and breadth. */
export function randomJson(rng: Rng, depth = 3): unknown {
  const kind = int(rng, depth > 0 ? 8 : 6);
  switch (kind) {
    case 0:
      return null;
    case 1:
      return chance(rng, 0.5);
    case 2:
      return pick(rng, [0, -1, 1, 7200, 2 ** 53, -(2 ** 53), 1e300, 0.5, -0.0001]);
    case 3:
      return randomString(rng, 24);
    case 4:
      return pick(rng, NUMBERISH_STRINGS);
    case 5:
      return '';
    case 6:
      return Array.from({ length: int(rng, 4) }, () => randomJson(rng, depth - 1));
    default: {
      const o: Record<string, unknown> = {};
      for (let i = int(rng, 5); i > 0; i--)
        o[pick(rng, ['code', 'msg', 'accessToken', 'expireIn', 'data', 'state', 'x', randomString(rng, 6)])] = randomJson(rng, depth - 1);
      return o;
    }
  }
}

/** Nesting deep enough to break a recursive reader, as JSON text. */
export function deepNesting(rng: Rng, maxDepth: number): string {
  const depth = 1 + int(rng, maxDepth);
  return chance(rng, 0.5) ? `${'['.repeat(depth)}${']'.repeat(depth)}` : `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
}

// ---- WebSocket wire (RFC 6455), for peers that must be able to send what no library would ----

/** Close codes a peer may send, and codes no peer may (RFC 6455 §7.4). */
export const VALID_CLOSE_CODES: readonly number[] = [
  1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014, 3000, 4000, 4001, 4999,
];
export const INVALID_CLOSE_CODES: readonly number[] = [0, 999, 1004, 1005, 1006, 1015, 1016, 2999, 5000, 65535];

/** Sec-WebSocket-Accept for a client's Sec-WebSocket-Key. */
export function wsAccept(key: string): string {
  return createHash('sha1').update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
}

/** One server frame (servers never mask); `mask`, `rsv` and `fin` produce the broken variants. */
export function wsFrame(opcode: number, payload: Buffer, o: { fin?: boolean; rsv?: number; mask?: boolean } = {}): Buffer {
  const first = ((o.fin ?? true) ? 0x80 : 0) | ((o.rsv ?? 0) << 4) | opcode;
  const maskBit = o.mask ? 0x80 : 0;
  let head: Buffer;
  if (payload.length < 126) head = Buffer.from([first, maskBit | payload.length]);
  else if (payload.length < 65536) {
    head = Buffer.from([first, maskBit | 126, 0, 0]);
    head.writeUInt16BE(payload.length, 2);
  } else {
    head = Buffer.alloc(10);
    head[0] = first;
    head[1] = maskBit | 127;
    head.writeBigUInt64BE(BigInt(payload.length), 2);
  }
  return o.mask ? Buffer.concat([head, Buffer.from([1, 2, 3, 4]), payload]) : Buffer.concat([head, payload]);
}

export function closePayload(code: number, reason: string | Buffer): Buffer {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(code);
  return Buffer.concat([b, typeof reason === 'string' ? Buffer.from(reason) : reason]);
}
