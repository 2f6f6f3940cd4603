import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { DEFAULT_SEED, loadSeedFile, parseSeed, SeedError } from '../../../src/service/seed.js';

const valid = {
  accounts: [
    {
      accessKeyId: 'AK',
      secretKey: 'SK',
      vendors: [
        { vendorId: 'V1', bots: ['bot-1', 'bot-2'] },
        { vendorId: 'V2', bots: [] },
      ],
    },
    { accessKeyId: 'AK2', secretKey: 'SK2', vendors: [] },
  ],
};

function messageOf(value: unknown): string {
  try {
    parseSeed(value);
  } catch (err) {
    expect(err).toBeInstanceOf(SeedError);
    expect((err as SeedError).code).toBe('ERR_SEED');
    return (err as Error).message;
  }
  throw new Error('expected a SeedError');
}

describe('parseSeed', () => {
  it('accepts the shape of DESIGN §3.3', () => {
    expect(parseSeed(valid)).toEqual(valid);
  });

  it('accepts the default seed', () => {
    expect(parseSeed(DEFAULT_SEED)).toEqual({
      accounts: [{ accessKeyId: 'AK', secretKey: 'SK', vendors: [{ vendorId: 'V1', bots: ['bot-1'] }] }],
    });
  });

  it.each([
    ['not an object', [], /^seed: expected a JSON object/],
    ['no accounts', {}, /^accounts: expected an array/],
    ['no account at all', { accounts: [] }, /^accounts: needs at least one account/],
    ['an unknown top-level key', { ...valid, extra: 1 }, /^extra: unknown key/],
    ['an account that is not an object', { accounts: ['AK'] }, /^accounts\[0\]: expected a JSON object/],
    [
      'an empty secretKey',
      { accounts: [{ accessKeyId: 'AK', secretKey: '', vendors: [] }] },
      /^accounts\[0\]\.secretKey: expected a non-empty string/,
    ],
    ['a numeric accessKeyId', { accounts: [{ accessKeyId: 1, secretKey: 'S', vendors: [] }] }, /^accounts\[0\]\.accessKeyId/],
    [
      'an unknown account key',
      { accounts: [{ accessKeyId: 'A', secretKey: 'S', vendors: [], secret: 'x' }] },
      /^accounts\[0\]\.secret: unknown key/,
    ],
    [
      'vendors not an array',
      { accounts: [{ accessKeyId: 'A', secretKey: 'S', vendors: {} }] },
      /^accounts\[0\]\.vendors: expected an array/,
    ],
    [
      'a bot that is not a string',
      { accounts: [{ accessKeyId: 'A', secretKey: 'S', vendors: [{ vendorId: 'V', bots: ['b', 2] }] }] },
      /^accounts\[0\]\.vendors\[0\]\.bots\[1\]: expected a non-empty string/,
    ],
    [
      'an id over 128 characters',
      { accounts: [{ accessKeyId: 'A'.repeat(129), secretKey: 'S', vendors: [] }] },
      /^accounts\[0\]\.accessKeyId: longer than 128/,
    ],
    [
      'a duplicate accessKeyId',
      {
        accounts: [
          { accessKeyId: 'A', secretKey: 'S', vendors: [] },
          { accessKeyId: 'A', secretKey: 'T', vendors: [] },
        ],
      },
      /^accounts\[1\]\.accessKeyId: duplicate accessKeyId 'A'/,
    ],
    [
      'a vendorId in two accounts',
      {
        accounts: [
          { accessKeyId: 'A', secretKey: 'S', vendors: [{ vendorId: 'V', bots: [] }] },
          { accessKeyId: 'B', secretKey: 'S', vendors: [{ vendorId: 'V', bots: [] }] },
        ],
      },
      /^accounts\[1\]\.vendors\[0\]\.vendorId: duplicate vendorId 'V'/,
    ],
    [
      'a botId under two vendors',
      {
        accounts: [
          {
            accessKeyId: 'A',
            secretKey: 'S',
            vendors: [
              { vendorId: 'V', bots: ['b'] },
              { vendorId: 'W', bots: ['b'] },
            ],
          },
        ],
      },
      /^accounts\[0\]\.vendors\[1\]\.bots\[0\]: duplicate botId 'b'/,
    ],
  ])('refuses %s, naming the spot', (_name, value, message) => {
    expect(messageOf(value)).toMatch(message);
  });
});

describe('loadSeedFile', () => {
  const dir = mkdtempSync(join(tmpdir(), 'botlink-seed-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('reads a valid file', () => {
    const file = join(dir, 'ok.json');
    writeFileSync(file, JSON.stringify(valid));
    expect(loadSeedFile(file)).toEqual(valid);
  });

  it('names the file when it cannot be read', () => {
    expect(() => loadSeedFile(join(dir, 'absent.json'))).toThrow(/cannot read seed file .*absent\.json/);
  });

  it('names the file when it is not JSON', () => {
    const file = join(dir, 'broken.json');
    writeFileSync(file, '{"accounts":');
    expect(() => loadSeedFile(file)).toThrow(/seed file .*broken\.json is not valid JSON/);
  });

  it.each([
    [
      'a missing comma after the secret',
      '{"accounts":[{"accessKeyId":"AK",\n "secretKey":"SUPERSECRET123" "vendors":[]}]}',
      'line 2, column 31 (offset 64)',
    ],
    [
      'an unquoted secret',
      '{"accounts":[{"accessKeyId":"AK",\n "secretKey":SUPERSECRET123,"vendors":[]}]}',
      'line 2, column 14 (offset 47)',
    ],
    ['an unterminated secret', '{"accounts":[{"accessKeyId":"AK","secretKey":"SUPERSECRET123', 'line 1, column 61 (offset 60)'],
    [
      'a control character in the secret',
      '{"accounts":[{"accessKeyId":"AK","secretKey":"SUPERSECRET\u0007123"}]}',
      'line 1, column 58 (offset 57)',
    ],
  ])('names the position of %s, never the text', (_name, text, position) => {
    const file = join(dir, 'secret.json');
    writeFileSync(file, text);
    let error: unknown;
    try {
      loadSeedFile(file);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(SeedError);
    const { message, cause } = error as SeedError;
    expect(message).toContain(`is not valid JSON: ${position}`);
    // The path goes first: its random temp-dir suffix may hold any of these by chance.
    expect(message.replaceAll(file, '<seed>')).not.toMatch(/SUPER|SECRET|123/);
    expect(cause).toBeUndefined();
  });

  it('names the file and the spot when the shape is wrong', () => {
    const file = join(dir, 'shape.json');
    writeFileSync(file, '{"accounts":[{"accessKeyId":"A","secretKey":"S"}]}');
    expect(() => loadSeedFile(file)).toThrow(/shape\.json: accounts\[0\]\.vendors: expected an array/);
  });
});
