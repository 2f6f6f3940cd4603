import { spawnSync } from 'node:child_process';
import { chownSync, mkdtempSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildSync } from 'esbuild';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { Secret } from '../../../src/agent/config/secret.js';
import { BotlinkError } from '../../../src/protocol/errors.js';
import { type BotlinkLogger, createLogger, redact, REDACTED } from '../../../src/log.js';

const TOKEN = 'tok-9d2f1c';
let dir: string;
let file: string;
let open: BotlinkLogger[];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'botlink-log-'));
  file = join(dir, 'logs', 'botlink.log');
  open = [];
});
afterEach(() => {
  for (const log of open) log.close();
  rmSync(dir, { recursive: true, force: true });
});

function make(level = 'info'): BotlinkLogger {
  const log = createLogger({ file, level, name: 'agent' });
  open.push(log);
  return log;
}

async function lines(log: BotlinkLogger, path = file): Promise<Record<string, unknown>[]> {
  await log.flush();
  return readFileSync(path, 'utf8')
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

/** Runs `body` (TypeScript, with createLogger in scope) in a child process: stdout and stderr are the log's own. */
function runScript(body: string) {
  const script = `import { createLogger } from ${JSON.stringify(join(process.cwd(), 'src/log.ts'))};\n${body}`;
  const bundled = join(dir, 'script.cjs');
  buildSync({
    stdin: { contents: script, loader: 'ts', resolveDir: process.cwd() },
    bundle: true,
    platform: 'node',
    format: 'cjs',
    outfile: bundled,
    logLevel: 'error',
  });
  return spawnSync(process.execPath, [bundled], { encoding: 'utf8' });
}

/** `{ a: { a: … { [key]: TOKEN } } }` with `depth` levels above the key. */
function nest(depth: number, key: string): Record<string, unknown> {
  let value: Record<string, unknown> = { [key]: TOKEN, keep: 'visible' };
  for (let i = 1; i < depth; i++) value = { a: value };
  return value;
}

describe('redaction', () => {
  const keys = ['secret', 'secretKey', 'accessToken', 'refreshToken', 'accessSign', 'authorization', 'Authorization'];

  it.each(keys.flatMap((key) => [1, 2, 3, 4, 5].map((depth) => [key, depth] as const)))(
    '%s at depth %i is redacted in the file',
    async (key, depth) => {
      const log = make();
      log.logger.info(nest(depth, key), 'nested');
      const [line] = await lines(log);
      const text = JSON.stringify(line);
      expect(text).not.toContain(TOKEN);
      expect(text).toContain(`"${key}":"${REDACTED}"`);
      expect(text).toContain('"keep":"visible"');
    },
  );

  it('reaches into arrays, child bindings, interpolated objects and errors', async () => {
    const log = make();
    log.logger.info({ list: [{ accessToken: TOKEN }, [{ deeper: { refreshToken: TOKEN } }]] }, 'arrays');
    log.logger.child({ session: { authorization: TOKEN } }).info('child');
    log.logger.info('interpolated %o and %j', { accessSign: TOKEN }, { secret: TOKEN });
    const err = Object.assign(new Error('request failed'), { headers: { Authorization: `Bearer ${TOKEN}` } });
    log.logger.error({ err, context: { cause: err } }, 'with an error');
    log.logger.error(err);
    const out = await lines(log);
    expect(JSON.stringify(out)).not.toContain(TOKEN);
    expect(out).toHaveLength(5);
    expect(out[0]).toMatchObject({ list: [{ accessToken: REDACTED }, [{ deeper: { refreshToken: REDACTED } }]] });
    expect(out[1]).toMatchObject({ session: { authorization: REDACTED }, msg: 'child' });
    expect(out[3]).toMatchObject({ err: { type: 'Error', message: 'request failed', headers: { Authorization: REDACTED } } });
    expect((out[3]!.err as { stack: string }).stack).toContain('log.test.ts');
    expect(out[4]).toMatchObject({ err: { type: 'Error' }, msg: 'request failed' });
  });

  it('removes Bearer credentials from any string, the message included', async () => {
    const log = make();
    log.logger.info({ dump: `GET / HTTP/1.1\r\nAuthorizat1on: Bearer ${TOKEN}\r\nHost: x` }, `sent bearer ${TOKEN}`);
    log.logger.warn(new Error(`rejected Bearer ${TOKEN}, retrying`));
    const out = await lines(log);
    expect(JSON.stringify(out)).not.toContain(TOKEN);
    expect(out[0]).toMatchObject({
      dump: `GET / HTTP/1.1\r\nAuthorizat1on: Bearer ${REDACTED}\r\nHost: x`,
      msg: `sent Bearer ${REDACTED}`,
    });
    expect(out[1]!.msg).toBe(`rejected Bearer ${REDACTED}, retrying`);
  });

  it('is one pass a call: each value serialised once, the line never parsed back', async () => {
    const log = make();
    let serialised = 0;
    const value = {
      toJSON: () => {
        serialised++;
        return { accessToken: TOKEN, seen: 'once' };
      },
    };
    const child = log.logger.child({ part: 'link', session: { authorization: TOKEN } });
    const parse = vi.spyOn(JSON, 'parse');
    try {
      child.info({ value }, 'logged with Bearer %s', TOKEN);
      expect(parse).not.toHaveBeenCalled();
    } finally {
      parse.mockRestore();
    }
    expect(serialised).toBe(1);
    const [line] = await lines(log);
    expect(JSON.stringify(line)).not.toContain(TOKEN);
    expect(line).toMatchObject({
      part: 'link',
      session: { authorization: REDACTED },
      value: { accessToken: REDACTED, seen: 'once' },
      msg: `logged with Bearer ${REDACTED}`,
    });
  });

  it('serialises like JSON: toJSON is honoured (Secret stays redacted), cycles are cut', () => {
    const cyclic: Record<string, unknown> = { name: 'loop' };
    cyclic.self = cyclic;
    const out = redact({ at: new Date(0), key: new Secret(TOKEN), cyclic }) as Record<string, unknown>;
    expect(JSON.stringify(out)).not.toContain(TOKEN);
    expect(out).toMatchObject({ at: '1970-01-01T00:00:00.000Z', key: REDACTED });
    expect(JSON.stringify(out)).toContain('[too deep]');
  });
});

describe('createLogger', () => {
  it('writes JSON lines with level labels, and filters by level', async () => {
    const log = make('warn');
    log.logger.info('dropped');
    log.logger.debug('dropped');
    log.logger.warn({ reconnects: 2 }, 'kept');
    log.logger.error('kept too');
    const out = await lines(log);
    expect(out.map((l) => [l.level, l.msg])).toEqual([
      ['warn', 'kept'],
      ['error', 'kept too'],
    ]);
    expect(out[0]).toMatchObject({ name: 'agent', pid: process.pid, reconnects: 2 });
    expect(Date.parse(String(out[0]!.time))).not.toBeNaN();
  });

  it('reopen() after a rename writes to a new file at the original path', async () => {
    const log = make();
    log.logger.info('before');
    await log.flush();
    renameSync(file, `${file}.1`);
    log.reopen();
    log.logger.info('after');
    expect((await lines(log, `${file}.1`)).map((l) => l.msg)).toEqual(['before']);
    expect((await lines(log)).map((l) => l.msg)).toEqual(['after']);
  });

  it('close() after flush() leaves every line written and drops later calls, children included', async () => {
    const log = createLogger({ file, level: 'info' });
    const child = log.logger.child({ part: 'link' });
    for (let i = 0; i < 100; i++) (i % 2 ? child : log.logger).info({ i }, 'line');
    await log.flush();
    log.close();
    log.logger.info('after close');
    child.info('after close');
    log.close();
    const text = readFileSync(file, 'utf8');
    expect(
      text
        .trim()
        .split('\n')
        .map((l) => (JSON.parse(l) as { i: number }).i),
    ).toEqual([...Array(100).keys()]);
    expect(text).not.toContain('after close');
  });

  it('refuses an unwritable log location at once, naming the path and the fix', () => {
    const notADir = join(dir, 'plain-file');
    writeFileSync(notADir, '');
    const attempt = () => createLogger({ file: join(notADir, 'x.log'), level: 'info' });
    expect(attempt).toThrow(BotlinkError);
    expect(attempt).toThrow(/cannot write the log file .*plain-file\/x\.log \(EEXIST\)$/);
    expect(attempt).toThrow(expect.objectContaining({ fix: expect.stringMatching(/logFile to '-'/) }));
  });

  it('reopen() that cannot create the new file keeps writing to the old one, and says so', async () => {
    const log = make();
    log.logger.info('before');
    await log.flush();
    renameSync(join(dir, 'logs'), join(dir, 'logs.1'));
    writeFileSync(join(dir, 'logs'), 'a file where the folder was');
    log.reopen();
    log.logger.info('after');
    const out = await lines(log, join(dir, 'logs.1', 'botlink.log'));
    expect(out.map((l) => l.msg)).toEqual([
      'before',
      expect.stringMatching(/cannot write the log file .*botlink\.log \(EEXIST\).*Still writing to the file opened before/),
      'after',
    ]);
    expect(out[1]).toMatchObject({ code: 'ERR_LOG_FILE', fix: expect.stringMatching(/logFile to '-'/) });
  });

  it('run as root, creates the file and its folders as the owner of the folder each is made in', async () => {
    if (process.geteuid?.() !== 0) throw new Error('this test checks what a root-run command creates: run it as root');
    chownSync(dir, 4242, 4343);
    const nested = join(dir, 'a', 'b', 'botlink.log');
    const log = createLogger({ file: nested, level: 'info' });
    open.push(log);
    log.logger.info('owned');
    await log.flush();
    for (const path of [join(dir, 'a'), join(dir, 'a', 'b'), nested]) expect(statSync(path)).toMatchObject({ uid: 4242, gid: 4343 });
  });

  it('stderrIfUnwritable (the daemon): a log file that cannot be opened sends the log to stderr, saying so', () => {
    const notADir = join(dir, 'plain-file');
    writeFileSync(notADir, '');
    const run = runScript(`
      const log = createLogger({ file: ${JSON.stringify(join(notADir, 'x.log'))}, level: 'info', name: 'botlink', stderrIfUnwritable: true });
      log.logger.info('still logging');
      log.flush().then(() => console.log('flushed'));
    `);
    expect(run.status, run.stderr).toBe(0);
    expect(run.stdout).toBe('flushed\n');
    const out = run.stderr
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(out).toMatchObject([
      {
        level: 'error',
        code: 'ERR_LOG_FILE',
        msg: expect.stringMatching(/plain-file\/x\.log \(EEXIST\).*Logging to stderr \(journald\) instead/),
        fix: expect.stringMatching(/logFile to '-'/),
      },
      { level: 'info', msg: 'still logging' },
    ]);
  });

  it('pretty mode prints one short human line per entry on stdout, as the reader it is given renders it', () => {
    const run = runScript(`
      import { readableLine } from ${JSON.stringify(join(process.cwd(), 'src/cli/log-lines.ts'))};
      const log = createLogger({ file: '-', level: 'info', name: 'link', pretty: (entry) => readableLine(entry) });
      const logger = log.logger;
      logger.info({ reconnects: 0, url: 'ws://127.0.0.1:1/x y' }, 'connected');
      logger.error({ err: new Error('Unauthorized'), accessToken: ${JSON.stringify(TOKEN)} }, 'handshake failed');
      logger.info({ accessExpiresAt: 1795386369506, refreshExpiresAt: 1795990000000, retryInMs: 1500 }, 'token refreshed');
      log.flush().then(() => console.error('flushed'));
    `);
    expect(run.status, run.stderr).toBe(0);
    expect(run.stderr).toBe('flushed\n');
    const out = run.stdout.trim().split('\n');
    expect(out).toHaveLength(3);
    expect(out[0]).toMatch(/^\d\d:\d\d:\d\d\.\d{3} INFO {2}link: connected reconnects=0 url="ws:\/\/127\.0\.0\.1:1\/x y"$/);
    expect(out[1]).toMatch(/^\d\d:\d\d:\d\d\.\d{3} ERROR link: handshake failed err="Unauthorized" accessToken=\[redacted\]$/);
    // Expiries are times a person reads (ISO 8601 UTC); durations stay numbers.
    expect(out[2]).toMatch(
      /^\d\d:\d\d:\d\d\.\d{3} INFO {2}link: token refreshed accessExpiresAt=2026-11-22T22:26:09\.506Z refreshExpiresAt=2026-11-29T22:06:40\.000Z retryInMs=1500$/,
    );
  });

  it('the JSON log keeps expiries as epoch ms', async () => {
    const log = make();
    log.logger.info({ accessExpiresAt: 1795386369506 }, 'token refreshed');
    expect((await lines(log))[0]).toMatchObject({ accessExpiresAt: 1795386369506 });
  });
});

// Found by the agent fuzz: pino's fatal() writes with flushSync, which emits no 'write' event.
it('flush() settles after a fatal line logged while earlier lines are still being written', async () => {
  const logging = createLogger({ file: join(dir, 'x.log'), level: 'debug' });
  open.push(logging);
  logging.logger.info('starting');
  await logging.flush();
  for (let i = 0; i < 20; i++) logging.logger.info({ i }, 'busy');
  logging.logger.fatal('unexpected error: exiting so systemd restarts botlink');
  const settled = await Promise.race([logging.flush().then(() => 'settled'), new Promise((r) => setTimeout(() => r('pending'), 2000))]);
  expect(settled).toBe('settled');
});
