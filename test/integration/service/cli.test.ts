import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { privateDaemonBundle, type Bundle } from '../../helpers/bundle.js';
import { ConversationClient, contentOf, isContent } from '../../helpers/conversation-client.js';
import { silencePcm, speechPcm } from '../../helpers/pcm.js';
import { listening, startServe, type ServeRun } from '../../helpers/serve-proc.js';
import { signalAtLine } from '../../helpers/signal-probe.js';
import { connectWs, getTokens, post, signedGetTokenBody } from '../../helpers/service-client.js';

let bundle: Bundle;
let dir: string;

beforeAll(async () => {
  bundle = await privateDaemonBundle('test-cli-');
  dir = mkdtempSync(join(tmpdir(), 'botlink-serve-'));
});
afterAll(() => {
  bundle.dispose();
  rmSync(dir, { recursive: true, force: true });
});

function start(args: string[]): ServeRun {
  return startServe(bundle.file, args);
}

describe('botlink serve', () => {
  it('serves a seed file on --port 0, prints exactly the listening line, and exits 0 on SIGTERM', async () => {
    const seed = join(dir, 'seed.json');
    const seedJson = { accounts: [{ accessKeyId: 'AK9', secretKey: 'S9', vendors: [{ vendorId: 'V9', bots: ['b9'] }] }] };
    writeFileSync(seed, JSON.stringify(seedJson));
    const run = start(['--port', '0', '--seed', seed, '--db', join(dir, 'serve.db'), '--access-ttl', '60']);
    const url = await listening(run);
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const tokens = await getTokens(url, { accessKeyId: 'AK9', secretKey: 'S9', botId: 'b9' });
    expect(tokens.expireIn).toBe(60);
    expect(tokens.refreshExpireIn).toBe(604800);
    const defaultAccount = await post(url, '/auth/getToken', signedGetTokenBody());
    expect(defaultAccount.json?.['code']).toBe(1005);
    run.child.kill('SIGTERM');
    expect(await run.exit).toEqual({ code: 0, signal: null });
    expect(run.stdout()).toBe(`listening on ${url}\n`);
  });

  it('has its SIGTERM handler in place before the listening line: a SIGTERM the instant the line is out exits 0', async () => {
    // The installed-command test once saw code null: serve printed the line, then installed its handler.
    const run = startServe(bundle.file, ['--port', '0'], signalAtLine('listening on'));
    expect(await run.exit).toEqual({ code: 0, signal: null });
    expect(run.stdout()).toMatch(/^listening on http:\/\/127\.0\.0\.1:\d+\n$/);
    expect(run.stderr()).toContain('SIGTERM: closing');
  });

  it('without --seed serves the default account and says so on stderr; SIGINT also exits 0', async () => {
    const run = start(['--port', '0', '--refresh-ttl', '120']);
    const url = await listening(run);
    expect(run.stderr()).toMatch(/AK/);
    expect(run.stderr()).toMatch(/V1/);
    expect(run.stderr()).toMatch(/bot-1/);
    const tokens = await getTokens(url);
    expect(tokens.refreshExpireIn).toBe(120);
    run.child.kill('SIGINT');
    expect((await run.exit).code).toBe(0);
    expect(run.stdout().split('\n').filter(Boolean)).toHaveLength(1);
  });

  it.each([
    [['--bogus']],
    [['--port', 'abc']],
    [['--port', '70000']],
    [['--access-ttl', '0']],
    [['--refresh-ttl', '-5']],
    [['extra-positional']],
    [['--displacement-marker', 'frame']],
    [['--round-delay-ms', '-1']],
    [['--round-delay-ms', '60001']],
    [['--vad-silence-ms', '10']],
    [['--vad-silence-ms', 'soon']],
  ])('refuses %j with exit 64 and nothing on stdout', async (args) => {
    const run = start(args);
    expect((await run.exit).code).toBe(64);
    expect(run.stdout()).toBe('');
    expect(run.stderr()).toMatch(/botlink serve:/);
  });

  it.each([
    ['missing.json', null, /cannot read seed file/],
    ['not-json.json', '{"accounts": [', /not valid JSON/],
    ['bad-shape.json', '{"accounts":[{"accessKeyId":"A","secretKey":"","vendors":[]}]}', /accounts\[0\]\.secretKey/],
    ['unknown-key.json', '{"accounts":[],"extra":1}', /extra: unknown key/],
    [
      'dup-bot.json',
      '{"accounts":[{"accessKeyId":"A","secretKey":"S","vendors":[{"vendorId":"V","bots":["b","b"]}]}]}',
      /duplicate botId 'b'/,
    ],
  ])('a bad seed file %s exits 65 naming the problem', async (name, content, message) => {
    const file = join(dir, name);
    if (content !== null) writeFileSync(file, content);
    const run = start(['--seed', file]);
    expect((await run.exit).code).toBe(65);
    expect(run.stderr()).toMatch(message);
    expect(run.stdout()).toBe('');
  });

  it('a seed file that is not JSON is named by position, never by the text around the error', async () => {
    const file = join(dir, 'leaky.json');
    writeFileSync(file, '{"accounts":[{"accessKeyId":"AK",\n  "secretKey":SUPERSECRET-42,"vendors":[]}]}');
    const run = start(['--seed', file]);
    expect((await run.exit).code).toBe(65);
    expect(run.stderr()).toMatch(/leaky\.json is not valid JSON: line 2, column 15 \(offset 48\): unexpected character/);
    // The path and any node:PID prefix go first: their random digits may hold these by chance (a path once held "42").
    const stderr = run
      .stderr()
      .replaceAll(file, '<seed>')
      .replace(/\(node:\d+\)/g, '(node)');
    expect(stderr).not.toMatch(/SUPER|SECRET|42/);
  });

  it('--db creates the database and its side files 0600', async () => {
    const db = join(dir, 'private.db');
    const run = start(['--db', db]);
    const url = await listening(run);
    await getTokens(url);
    for (const f of [db, `${db}-wal`, `${db}-shm`]) expect((statSync(f).mode & 0o777).toString(8), f).toBe('600');
    run.child.kill('SIGTERM');
    expect((await run.exit).code).toBe(0);
  });

  it.each([
    [
      '(default)',
      [],
      { code: 4000, reason: '' },
      { code: 200, contentType: 'EVENT', content: { eventType: 'REPEAT_CLIENT_SESSION', eventData: {} } },
    ],
    [
      'event',
      ['--displacement-marker', 'event'],
      { code: 4000, reason: '' },
      { mid: null, content: { eventType: 'REPEAT_CLIENT_SESSION', eventData: {} } },
    ],
    [
      'code400',
      ['--displacement-marker', 'code400'],
      { code: 4000, reason: 'REPEAT_CLIENT_SESSION' },
      { code: 400, msg: 'REPEAT_CLIENT_SESSION' },
    ],
  ])('--displacement-marker %s: how a displaced socket is told', async (_name, args, close, marker) => {
    const run = start(args);
    const url = await listening(run);
    const { accessToken } = await getTokens(url);
    const wsUrl = `${url.replace(/^http/, 'ws')}/soulmate/voiceChat/v1`;
    const first = await connectWs(wsUrl, 'bot-1', accessToken);
    if (!first.ok) throw new Error(`refused: ${first.body}`);
    const second = await connectWs(wsUrl, 'bot-1', accessToken);
    if (!second.ok) throw new Error(`refused: ${second.body}`);
    expect(await first.closed).toEqual(close);
    expect(first.messages.map((m) => JSON.parse(m) as unknown)).toEqual([
      expect.objectContaining({ code: 200, contentType: 'EVENT', content: expect.objectContaining({ eventType: 'CFG_BOT_EVENT' }) }),
      expect.objectContaining(marker),
    ]);
    second.ws.terminate();
    run.child.kill('SIGTERM');
    expect((await run.exit).code).toBe(0);
  });

  it.each([
    ['0', 'the whole round is sent before the next frame is read: the interrupt finds no round', ['COMPLETE']],
    ['60000', 'the round waits a minute after its first frame: the interrupt stops it', ['CALL_AGENT_INTERRUPTED']],
  ])('--round-delay-ms %s: %s', async (delay, _why, ending) => {
    const run = start(['--round-delay-ms', delay]);
    const url = await listening(run);
    const { accessToken } = await getTokens(url);
    const wsUrl = `${url.replace(/^http/, 'ws')}/soulmate/voiceChat/v1`;
    const client = await ConversationClient.open(wsUrl, 'bot-1', accessToken);
    client.send({ contentType: 'TEXT', content: { input: 'hi' } });
    client.send({ contentType: 'EVENT', content: { eventType: 'CLIENT_INTERRUPT' } });
    const frames = await client.round(0);
    expect(frames.slice(-1).map((f) => contentOf(f)['eventType'])).toEqual(ending);
    client.terminate();
    run.child.kill('SIGTERM');
    expect((await run.exit).code).toBe(0);
  });

  it('--vad-silence-ms 200: in free mode 200 ms of silence after speech ends the utterance', async () => {
    const run = start(['--vad-silence-ms', '200']);
    const url = await listening(run);
    const { accessToken } = await getTokens(url);
    const client = await ConversationClient.open(`${url.replace(/^http/, 'ws')}/soulmate/voiceChat/v1`, 'bot-1', accessToken);
    const audioBase64 = Buffer.concat([speechPcm(500), silencePcm(200)]).toString('base64');
    client.send({ contentType: 'AUDIO', content: { audioBase64, index: 0 } });
    const asr = client.frames[await client.indexOf(isContent('ASR'))]!;
    expect(contentOf(asr)).toEqual({ text: 'audio of 0.5 s', textType: 'IS_FINAL', lang: 'en' });
    client.terminate();
    run.child.kill('SIGTERM');
    expect((await run.exit).code).toBe(0);
  });

  it('an unopenable --db exits 65 naming the file', async () => {
    const run = start(['--db', join(dir, 'no-such-dir', 'x.db')]);
    expect((await run.exit).code).toBe(65);
    expect(run.stderr()).toMatch(/cannot open database .*no-such-dir/);
  });

  it('a port already in use exits 69', async () => {
    const first = start(['--port', '0']);
    const url = await listening(first);
    const second = start(['--port', new URL(url).port]);
    expect((await second.exit).code).toBe(69);
    expect(second.stderr()).toMatch(/cannot listen/);
    first.child.kill('SIGTERM');
    expect((await first.exit).code).toBe(0);
  });

  it('a --host other than loopback without --seed is a usage error naming --seed: the built-in account stays off the LAN', async () => {
    for (const host of ['0.0.0.0', '::', '192.0.2.1', 'device.example']) {
      const run = start(['--host', host, '--port', '0']);
      const outcome = await Promise.race([
        run.exit,
        listening(run).then(
          () => 'listening' as const,
          () => run.exit,
        ),
      ]);
      if (outcome === 'listening') run.child.kill('SIGKILL');
      expect(outcome, host).toEqual({ code: 64, signal: null });
      expect(run.stderr()).toContain(`--host ${host} is not a loopback address`);
      expect(run.stderr()).toContain('give --seed FILE');
      expect(run.stdout()).toBe('');
    }
    // Loopback needs no seed; any address does with one.
    const seed = join(dir, 'lan-seed.json');
    writeFileSync(
      seed,
      JSON.stringify({ accounts: [{ accessKeyId: 'AKL', secretKey: 'SL', vendors: [{ vendorId: 'VL', bots: ['bl'] }] }] }),
    );
    for (const args of [
      ['--host', '127.0.0.2'],
      ['--host', 'localhost'],
      ['--host', '0.0.0.0', '--seed', seed],
    ]) {
      const run = start([...args, '--port', '0']);
      await listening(run);
      run.child.kill('SIGTERM');
      expect((await run.exit).code, args.join(' ')).toBe(0);
    }
  });

  it('--help prints the options and exits 0', async () => {
    const run = start(['--help']);
    expect((await run.exit).code).toBe(0);
    expect(run.stdout()).toMatch(/--access-ttl/);
    expect(run.stdout()).toMatch(/--vad-silence-ms/);
  });
});
