import { describe, expect, it } from 'vitest';
import { locateJsonError } from '../../../src/protocol/json-position.js';

function parses(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

describe('locateJsonError', () => {
  it.each([
    ['{"a":1 "b":2}', 7, "expected ',' or '}'"],
    ['{"a":"SECRET', 12, 'unterminated string'],
    ['{"a":SECRET}', 5, 'unexpected character'],
    ['{"a":"x\u0001"}', 7, 'control character in a string'],
    ['{"a":"\\q"}', 7, 'bad escape in a string'],
    ['{"a":"\\u12g4"}', 10, 'bad escape in a string'],
    ['[1,]', 3, 'unexpected character'],
    ['[01]', 2, "expected ',' or ']'"],
    ['[1.]', 3, 'bad number'],
    ['[-]', 2, 'bad number'],
    ['[1e+]', 4, 'bad number'],
    ['{a:1}', 1, 'expected a property name in double quotes'],
    ['{"a" 1}', 5, "expected ':'"],
    ['{"a":1', 6, 'unexpected end'],
    ['', 0, 'unexpected end'],
    ['{} x', 3, 'unexpected data after the JSON value'],
    ['\uFEFF{}', 0, 'unexpected character'],
    ['[tru]', 4, 'unexpected character'],
  ])('%j: offset %i, %s', (text, offset, problem) => {
    expect(parses(text)).toBe(false);
    expect(locateJsonError(text)).toMatchObject({ offset, problem });
  });

  it('counts lines and columns from 1', () => {
    expect(locateJsonError('{\n  "a": 1,\n  "b" 2\n}')).toEqual({ offset: 18, line: 3, column: 7, problem: "expected ':'" });
    expect(locateJsonError('[x]')).toMatchObject({ line: 1, column: 2 });
  });

  it.each(['{}', '[]', ' {"a":[1,-2.5e+3,true,false,null,"\\u00e9\\n",{}]} ', '"s"', '0', '-0.1E-2'])('%j is JSON: undefined', (text) => {
    expect(parses(text)).toBe(true);
    expect(locateJsonError(text)).toBeUndefined();
  });

  it('reports nesting deeper than its stack where it happened, without throwing', () => {
    const text = '['.repeat(200_000);
    expect(locateJsonError(text)?.problem).toMatch(/nested too deeply|unexpected end/);
  });
});

describe('locateJsonError agrees with JSON.parse', () => {
  it('on every one-character deletion and insertion in a seed file, where JSON.parse names a position', () => {
    const text = JSON.stringify(
      {
        accounts: [
          { accessKeyId: 'AK', secretKey: 'S\\"K\u00e9', vendors: [{ vendorId: 'V1', bots: ['bot-1'] }], n: [-1.5e3, 0, true, null] },
        ],
      },
      null,
      2,
    );
    let compared = 0;
    const variants: string[] = [];
    for (let i = 0; i <= text.length; i++) {
      variants.push(text.slice(0, i) + text.slice(i + 1));
      for (const c of ['"', ',', '}', 'x', '\\', '1', '\u0001']) variants.push(text.slice(0, i) + c + text.slice(i));
    }
    for (const variant of variants) {
      let message: string | undefined;
      try {
        JSON.parse(variant);
      } catch (err) {
        message = (err as Error).message;
      }
      const found = locateJsonError(variant);
      expect(found === undefined, variant).toBe(message === undefined);
      const position = /at position (\d+)/.exec(message ?? '');
      if (position) {
        expect(found?.offset, variant).toBe(Number(position[1]));
        compared += 1;
      }
    }
    expect(compared).toBeGreaterThan(500);
  });
});
