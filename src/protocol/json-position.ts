/** Where a text stops being JSON and what the grammar wanted there; never any of the text itself. */
export interface JsonSyntaxProblem {
  offset: number;
  /** 1-based. */
  line: number;
  /** 1-based, in UTF-16 code units like offset. */
  column: number;
  problem: string;
}

class Stop {
  constructor(readonly problem: string) {}
}

const WHITESPACE = ' \t\n\r';
const ESCAPES = '"\\/bfnrt';
const LITERALS = ['true', 'false', 'null'];

/**
 * The first JSON syntax error in text (RFC 8259), or undefined when text is JSON. JSON.parse's own message
 * quotes the text around the error, which in a seed or config file is where a secret may be.
 */
export function locateJsonError(text: string): JsonSyntaxProblem | undefined {
  let i = 0;
  const fail = (problem: string): never => {
    throw new Stop(problem);
  };
  const skipWhitespace = (): void => {
    while (i < text.length && WHITESPACE.includes(text[i]!)) i++;
  };
  const digits = (): number => {
    const start = i;
    while (i < text.length && text[i]! >= '0' && text[i]! <= '9') i++;
    return i - start;
  };
  const string = (): void => {
    i++;
    for (;;) {
      if (i >= text.length) fail('unterminated string');
      const c = text.charCodeAt(i);
      if (c < 0x20) fail('control character in a string');
      if (c === 0x22) return void i++;
      if (c !== 0x5c) {
        i++;
        continue;
      }
      // Positions follow V8's: the character after the backslash, or the first one that is not hex.
      i++;
      if (text[i] === 'u') {
        for (let n = 0; n < 4; n++) if (!/[0-9a-fA-F]/.test(text[++i] ?? '')) fail('bad escape in a string');
        i++;
      } else if (text[i] !== undefined && ESCAPES.includes(text[i]!)) i++;
      else fail(i >= text.length ? 'unterminated string' : 'bad escape in a string');
    }
  };
  const number = (): void => {
    if (text[i] === '-') i++;
    if (text[i] === '0') i++;
    else if (digits() === 0) fail('bad number');
    if (text[i] === '.') {
      i++;
      if (digits() === 0) fail('bad number');
    }
    if (text[i] === 'e' || text[i] === 'E') {
      i++;
      if (text[i] === '+' || text[i] === '-') i++;
      if (digits() === 0) fail('bad number');
    }
  };
  const sequence = (close: string, member: () => void): void => {
    i++;
    skipWhitespace();
    if (text[i] === close) return void i++;
    for (;;) {
      member();
      skipWhitespace();
      if (text[i] === ',') i++;
      else if (text[i] === close) return void i++;
      else fail(i >= text.length ? 'unexpected end' : `expected ',' or '${close}'`);
    }
  };
  const value = (): void => {
    skipWhitespace();
    const c = text[i];
    if (c === undefined) return fail('unexpected end');
    if (c === '{') return sequence('}', property);
    if (c === '[') return sequence(']', value);
    if (c === '"') return string();
    if (c === '-' || (c >= '0' && c <= '9')) return number();
    const literal = LITERALS.find((l) => l[0] === c);
    if (!literal) return fail('unexpected character');
    for (const expected of literal) {
      if (text[i] !== expected) fail(i >= text.length ? 'unexpected end' : 'unexpected character');
      i++;
    }
  };
  const property = (): void => {
    skipWhitespace();
    if (text[i] !== '"') fail(i >= text.length ? 'unexpected end' : 'expected a property name in double quotes');
    string();
    skipWhitespace();
    if (text[i] !== ':') fail(i >= text.length ? 'unexpected end' : "expected ':'");
    i++;
    value();
  };

  try {
    value();
    skipWhitespace();
    if (i < text.length) fail('unexpected data after the JSON value');
    return undefined;
  } catch (err) {
    // The scanner recurses once per nesting level; a stack overflow is reported where it happened.
    if (!(err instanceof Stop) && !(err instanceof RangeError)) throw err;
    const before = text.slice(0, i);
    const line = before.split('\n').length;
    const problem = err instanceof Stop ? err.problem : 'nested too deeply';
    return { offset: i, line, column: i - before.lastIndexOf('\n'), problem };
  }
}
