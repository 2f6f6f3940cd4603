import { describe, expect, it } from 'vitest';
import { printable, printableJson, printableJsonText } from '../../../src/cli/printable.js';
import { terminalHazards } from '../../helpers/terminal.js';

const hazards = (text: string): string[] => terminalHazards(text.replace(/[\n\t]/g, ' '));

describe('printable: untrusted text as a terminal may show it', () => {
  const table: [name: string, raw: string, shown: string][] = [
    ['plain text, accents, CJK and emoji are left alone', 'héllo 你好 🙂 ok', 'héllo 你好 🙂 ok'],
    ['an OSC title and a screen clear', 'x\x1b]0;PWNED\x07\x1b[2J', 'x\\x1b]0;PWNED\\x07\\x1b[2J'],
    ['OSC 52: a write to the clipboard', '\x1b]52;c;ZWNobyBwd25lZA==\x07', '\\x1b]52;c;ZWNobyBwd25lZA==\\x07'],
    ['a C1 CSI (the one-byte ESC [)', '\u009b2J', '\\x9b2J'],
    ['every C1, first and last', '\u0080\u009f', '\\x80\\x9f'],
    ['NUL, DEL and a carriage return', 'a\x00b\x7fc\rd', 'a\\x00b\\x7fc\\x0dd'],
    ['newline and tab escaped on one line', 'a\nb\tc', 'a\\x0ab\\x09c'],
    ['a right-to-left override', 'invoice\u202egpj.exe', 'invoice\\u202egpj.exe'],
    [
      'every bidi control',
      '\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069',
      '\\u061c\\u200e\\u200f\\u202a\\u202b\\u202c\\u202d\\u202e\\u2066\\u2067\\u2068\\u2069',
    ],
    [
      'zero-width and other format characters',
      '\u200b\u200c\u200d\u2060\u2064\ufeff\ufff9\ufffb\u00ad',
      '\\u200b\\u200c\\u200d\\u2060\\u2064\\ufeff\\ufff9\\ufffb\\xad',
    ],
    ['a format character beyond the BMP (a tag)', 'flag\u{e0001}', 'flag\\u{e0001}'],
    ['lone surrogates', 'a\ud800b\udc00', 'a\\ud800b\\udc00'],
    ['line and paragraph separators', 'a\u2028b\u2029', 'a\\u2028b\\u2029'],
    ['a backslash stays what it is', 'C:\\x1b', 'C:\\x1b'],
  ];
  it.each(table)('%s', (_name, raw, shown) => {
    expect(printable(raw)).toBe(shown);
    expect(hazards(printable(raw))).toEqual([]);
    expect(printable(raw)).not.toMatch(/[\n\t]/);
  });

  const lines: [name: string, raw: string, shown: string][] = [
    ['newline and tab kept', 'one\n\ttwo\n', 'one\n\ttwo\n'],
    ['a carriage return is not a line', 'ok\rFAKE', 'ok\\x0dFAKE'],
    ['escapes amid lines', 'a\x1b[2J\nb\u202ec', 'a\\x1b[2J\nb\\u202ec'],
  ];
  it.each(lines)('lines: %s', (_name, raw, shown) => {
    expect(printable(raw, { lines: true })).toBe(shown);
    expect(terminalHazards(printable(raw, { lines: true }))).toEqual([]);
  });
});

describe('printableJson: --json lines a terminal may show, parsing to the same value', () => {
  const values: [name: string, value: unknown, text: string][] = [
    ['plain', { a: 'b', n: 1 }, '{"a":"b","n":1}'],
    ['C0 as JSON.stringify writes it', { t: 'x\x1b]0;PWNED\x07' }, '{"t":"x\\u001b]0;PWNED\\u0007"}'],
    ['C1 and DEL', { t: '\u009b2J\x7f' }, '{"t":"\\u009b2J\\u007f"}'],
    ['bidi and format characters, keys too', { 'k\u202e': '\u2066\u200b\ufeff' }, '{"k\\u202e":"\\u2066\\u200b\\ufeff"}'],
    ['beyond the BMP: its surrogate pair escaped', ['\u{e0001}'], '["\\udb40\\udc01"]'],
    ['a lone surrogate', ['\ud800'], '["\\ud800"]'],
    ['separators', '\u2028\u2029', '"\\u2028\\u2029"'],
  ];
  it.each(values)('%s', (_name, value, text) => {
    const out = printableJson(value);
    expect(out).toBe(text);
    expect(JSON.parse(out)).toEqual(value);
    expect(hazards(out)).toEqual([]);
    expect(out).not.toMatch(/[\n\t]/);
  });

  it('JSON text as written elsewhere (a log line): raw C1 and bidi escaped, whitespace between tokens a space', () => {
    const raw = '{"msg":"\u009b2J \u202e",\r\n\t"n":1}';
    const out = printableJsonText(raw);
    expect(out).toBe('{"msg":"\\u009b2J \\u202e",   "n":1}');
    expect(JSON.parse(out)).toEqual(JSON.parse(raw));
    expect(hazards(out)).toEqual([]);
  });
});
