import { afterEach, describe, expect, it } from 'vitest';
import { createReferenceService, type ReferenceService, type ReferenceServiceOptions } from '../../src/service/server.js';
import { DEFAULT_VOICE_CONFIG } from '../../src/service/conversation/session.js';
import { ConversationClient, contentOf, isContent, isEvent, type Frame } from '../helpers/conversation-client.js';
import { getTokens } from '../helpers/service-client.js';

const seed = { accounts: [{ accessKeyId: 'AK', secretKey: 'SK', vendors: [{ vendorId: 'V1', bots: ['bot-1', 'bot-2'] }] }] };
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function rig(
  opts: ReferenceServiceOptions = {},
): Promise<{ svc: ReferenceService; connect: (botId?: string, params?: Record<string, string>) => Promise<ConversationClient> }> {
  const svc = await createReferenceService({ seed, ...opts });
  const errors: unknown[] = [];
  svc.events.on('internal-error', (e) => errors.push(e));
  cleanups.push(async () => {
    await svc.close();
    expect(errors).toEqual([]);
  });
  const connect = async (botId = 'bot-1', params: Record<string, string> = {}): Promise<ConversationClient> => {
    const { accessToken } = await getTokens(svc.url, { botId });
    const client = await ConversationClient.open(svc.wsUrl, botId, accessToken, params);
    cleanups.push(() => client.terminate());
    return client;
  };
  return { svc, connect };
}

const voiceConfig = (binary: boolean) => ({
  mid: 'cfg',
  contentType: 'EVENT',
  content: { eventType: 'CLIENT_VOICE_CHAT_UPDATE', eventData: { audio: { binary, input: { format: 'pcm' }, output: { format: 'pcm' } } } },
});
const event = (eventType: string) => ({ contentType: 'EVENT', content: { eventType, eventData: {} } });
const text = (input: string) => ({ mid: `m-${input}`, contentType: 'TEXT', content: { input } });
const AUDIO_BINARY_REFUSAL = '{"code":400,"msg":"audio binary not support."}';

function kinds(frames: Frame[]): string[] {
  return frames.map((f) => {
    if (f.binary) return 'binary';
    const type = String(f.json?.['contentType']);
    return type === 'EVENT' ? String(contentOf(f)['eventType']) : type;
  });
}

/** Waits for the answer to a voice config, so later frames are read in its mode. */
async function configure(client: ConversationClient, binary: boolean): Promise<Frame> {
  const from = client.frames.length;
  client.send(voiceConfig(binary));
  return client.frames[await client.indexOf(isEvent('SERVER_VOICE_CHAT_UPDATED'), from)]!;
}

describe('on open', () => {
  it('greets with CFG_BOT_EVENT, the default voice config, in the down envelope with the connection’s requestId', async () => {
    const { connect } = await rig();
    const t0 = Date.now();
    const client = await connect('bot-1', { requestId: 'req-9', sessionId: 's-1' });
    const greeting = client.frames[await client.indexOf(isEvent('CFG_BOT_EVENT'))]!;
    expect(client.frames.indexOf(greeting)).toBe(0);
    expect(Object.keys(greeting.json!)).toEqual(['code', 'msg', 'requestId', 'mid', 'contentType', 'content', 't']);
    expect(greeting.json).toMatchObject({ code: 200, msg: 'success', requestId: 'req-9', contentType: 'EVENT' });
    expect(contentOf(greeting)).toEqual({ eventType: 'CFG_BOT_EVENT', eventData: DEFAULT_VOICE_CONFIG });
    expect(Math.abs((greeting.json!['t'] as number) - t0)).toBeLessThan(60_000);
  });
});

describe('PING', () => {
  it('is answered by PONG with the same mid, or a fresh one when the PING had none', async () => {
    const { connect } = await rig();
    const client = await connect();
    client.send({ mid: 'ping-1', contentType: 'PING', content: {} });
    const withMid = client.frames[await client.indexOf(isContent('PONG'))]!;
    expect(withMid.json!['mid']).toBe('ping-1');
    client.send({ contentType: 'PING' });
    const without = client.frames[await client.indexOf(isContent('PONG'), client.frames.indexOf(withMid) + 1)]!;
    expect(without.json!['mid']).toMatch(/^\S{8,}$/);
    expect(without.json).toMatchObject({ code: 200, msg: 'success', contentType: 'PONG' });
  });
});

describe('the voice config', () => {
  it('is answered SERVER_VOICE_CHAT_UPDATED with its eventData and counted for its own connection only', async () => {
    const { svc, connect } = await rig();
    const a = await connect('bot-1', { sessionId: 'a' });
    const b = await connect('bot-2', { sessionId: 'b' });
    const updated = await configure(a, true);
    expect(contentOf(updated)).toEqual({ eventType: 'SERVER_VOICE_CHAT_UPDATED', eventData: voiceConfig(true).content.eventData });
    expect(svc.stats.ws.connections.map((c) => [c.botId, c.params, c.voiceConfigs])).toEqual([
      ['bot-1', { sessionId: 'a' }, 1],
      ['bot-2', { sessionId: 'b' }, 0],
    ]);
    // Binary mode is a's: b's binary frame is still refused.
    b.send(Buffer.from([1, 2, 3]));
    await b.indexOf((f) => f.data.toString() === AUDIO_BINARY_REFUSAL);
    // A new connection starts from nothing, even for the same bot.
    const again = await connect('bot-1', { sessionId: 'a' });
    again.send(Buffer.from([1]));
    await again.indexOf((f) => f.data.toString() === AUDIO_BINARY_REFUSAL);
    await configure(again, false);
    await configure(again, false);
    expect(svc.stats.ws.connections.map((c) => c.voiceConfigs)).toEqual([1, 0, 2]);
  });

  it('a binary frame before a binary voice config is refused: none, then a text-mode one', async () => {
    const { svc, connect } = await rig();
    const client = await connect();
    client.send(Buffer.from([9]));
    await client.indexOf((f) => f.data.toString() === AUDIO_BINARY_REFUSAL);
    await configure(client, false);
    const from = client.frames.length;
    client.send(Buffer.from([9]));
    await client.indexOf((f) => f.data.toString() === AUDIO_BINARY_REFUSAL, from);
    await configure(client, true);
    client.send(Buffer.alloc(1000));
    client.send(event('CLIENT_AUDIO_FINISH'));
    const asr = client.frames[await client.indexOf(isContent('ASR'))]!;
    expect(contentOf(asr)['text']).toBe('audio of 1000 bytes');
    expect(svc.stats.ws.connections[0]!.voiceConfigs).toBe(2);
  });
});

/** The reply text and TTS audio of a finished round, checked for one roundId and the order of §1.7. */
function readRound(frames: Frame[], binaryAudio: boolean): { reply: string; audio: string; roundId: unknown } {
  const jsonFrames = frames.filter((f) => !f.binary);
  const roundId = contentOf(jsonFrames[0]!)['roundId'];
  expect(roundId).toMatch(/^\S+$/);
  for (const f of jsonFrames) {
    expect(contentOf(f)['roundId']).toBe(roundId);
    expect(Object.keys(f.json!)).toEqual(['code', 'msg', 'requestId', 'mid', 'contentType', 'content', 't']);
  }
  const agent = frames.filter(isContent('AGENT')).map((f) => String(contentOf(f)['text']));
  expect(agent.length).toBeGreaterThanOrEqual(2);
  const audio = binaryAudio
    ? frames.filter((f) => f.binary).map((f) => f.data.toString('utf8'))
    : frames.filter(isContent('TTS')).map((f) => Buffer.from(String(contentOf(f)['audioBase64']), 'base64').toString('utf8'));
  return { reply: agent.join(''), audio: audio.join(''), roundId };
}

describe('a round', () => {
  it('TEXT in text mode: START, AGENT pieces, TTS, TTS_COMPLETE, COMPLETE with one roundId; the reply is "you said: <input>"', async () => {
    const { connect } = await rig();
    const client = await connect();
    const from = client.frames.length;
    client.send(text('hello there'));
    const frames = await client.round(from);
    expect(kinds(frames)).toEqual(['CALL_AGENT_START_EVENT', 'AGENT', 'AGENT', 'TTS', 'TTS', 'TTS_COMPLETE', 'COMPLETE']);
    const round = readRound(frames, false);
    expect(round.reply).toBe('you said: hello there');
    expect(round.audio).toBe('you said: hello there');
  });

  it('TEXT in binary mode: the audio comes as binary frames', async () => {
    const { connect } = await rig();
    const client = await connect();
    await configure(client, true);
    const from = client.frames.length;
    client.send(text('hi'));
    const frames = await client.round(from);
    expect(kinds(frames)).toEqual(['CALL_AGENT_START_EVENT', 'AGENT', 'AGENT', 'binary', 'binary', 'TTS_COMPLETE', 'COMPLETE']);
    expect(readRound(frames, true)).toMatchObject({ reply: 'you said: hi', audio: 'you said: hi' });
  });

  it('AUDIO frames then CLIENT_AUDIO_FINISH: ASR with the transcript, then the round on it, one roundId', async () => {
    const { connect } = await rig();
    const client = await connect();
    const from = client.frames.length;
    client.send({ contentType: 'AUDIO', content: { audioBase64: Buffer.alloc(300).toString('base64'), index: 0 } });
    client.send({ contentType: 'AUDIO', content: { audioBase64: Buffer.alloc(20).toString('base64'), index: 1 } });
    client.send(event('CLIENT_AUDIO_FINISH'));
    const frames = await client.round(from);
    expect(kinds(frames)).toEqual(['ASR', 'CALL_AGENT_START_EVENT', 'AGENT', 'AGENT', 'TTS', 'TTS', 'TTS_COMPLETE', 'COMPLETE']);
    expect(contentOf(frames[0]!)['text']).toBe('audio of 320 bytes');
    expect(readRound(frames, false).reply).toBe('you said: audio of 320 bytes');
  });

  it('two rounds in a row each complete, with their own roundIds', async () => {
    const { connect } = await rig();
    const client = await connect();
    client.send(text('one'));
    const first = await client.round(0);
    const from = client.frames.length;
    client.send(text('two'));
    const second = await client.round(from);
    const [a, b] = [readRound(first.slice(first.findIndex(isEvent('CALL_AGENT_START_EVENT'))), false), readRound(second, false)];
    expect([a.reply, b.reply]).toEqual(['you said: one', 'you said: two']);
    expect(a.roundId).not.toBe(b.roundId);
    expect(client.frames.some(isEvent('CALL_AGENT_INTERRUPTED'))).toBe(false);
  });
});

describe('interruptions (rounds paced a minute apart, so one is surely running)', () => {
  it('CLIENT_INTERRUPT during a round → CALL_AGENT_INTERRUPTED with its roundId; outside a round → nothing', async () => {
    const { connect } = await rig({ roundDelayMs: 60_000 });
    const client = await connect();
    client.send(event('CLIENT_INTERRUPT'));
    client.send({ mid: 'p', contentType: 'PING' });
    expect(kinds(client.frames.slice(0, (await client.indexOf(isContent('PONG'))) + 1))).toEqual(['CFG_BOT_EVENT', 'PONG']);
    const from = client.frames.length;
    client.send(text('long story'));
    const start = await client.indexOf(isEvent('CALL_AGENT_START_EVENT'), from);
    client.send(event('CLIENT_INTERRUPT'));
    const frames = await client.round(start);
    expect(kinds(frames)).toEqual(['CALL_AGENT_START_EVENT', 'CALL_AGENT_INTERRUPTED']);
    expect(contentOf(frames[1]!)['roundId']).toBe(contentOf(frames[0]!)['roundId']);
  });

  it('a new utterance during a round interrupts it, then starts its own', async () => {
    const { connect } = await rig({ roundDelayMs: 60_000 });
    const client = await connect();
    client.send(text('first'));
    const start = await client.indexOf(isEvent('CALL_AGENT_START_EVENT'));
    client.send(text('second'));
    const next = await client.indexOf(isEvent('CALL_AGENT_START_EVENT'), start + 1);
    expect(kinds(client.frames.slice(start, next + 1))).toEqual([
      'CALL_AGENT_START_EVENT',
      'CALL_AGENT_INTERRUPTED',
      'CALL_AGENT_START_EVENT',
    ]);
    const [first, interrupted, second] = client.frames.slice(start, next + 1).map((f) => contentOf(f)['roundId']);
    expect(interrupted).toBe(first);
    expect(second).not.toBe(first);
  });

  it('uplink audio during a round interrupts it (barge-in), and a voice config does too', async () => {
    const { connect } = await rig({ roundDelayMs: 60_000 });
    const client = await connect();
    client.send(text('a'));
    const a = await client.indexOf(isEvent('CALL_AGENT_START_EVENT'));
    client.send({ contentType: 'AUDIO', content: { audioBase64: 'AAAA', index: 0 } });
    expect(kinds(await client.round(a))).toEqual(['CALL_AGENT_START_EVENT', 'CALL_AGENT_INTERRUPTED']);
    client.send(text('b'));
    const b = await client.indexOf(isEvent('CALL_AGENT_START_EVENT'), a + 1);
    client.send(voiceConfig(false));
    await client.indexOf(isEvent('SERVER_VOICE_CHAT_UPDATED'), b);
    expect(kinds(client.frames.slice(b))).toEqual(['CALL_AGENT_START_EVENT', 'CALL_AGENT_INTERRUPTED', 'SERVER_VOICE_CHAT_UPDATED']);
  });

  it('closing the service while a round waits leaves nothing behind', async () => {
    const { svc, connect } = await rig({ roundDelayMs: 60_000 });
    const client = await connect();
    client.send(text('pending'));
    await client.indexOf(isEvent('CALL_AGENT_START_EVENT'));
    await svc.close();
    expect((await client.closed).code).toBe(1006);
  });
});

describe('frames the service cannot use', () => {
  const malformed: [string, string | Buffer, RegExp][] = [
    ['not JSON', 'hello', /not JSON/],
    ['empty', '', /not JSON/],
    ['truncated JSON', '{"contentType":"TEXT",', /not JSON/],
    ['deeply nested', '['.repeat(100_000), /not JSON|expected a JSON object/],
    ['an array', '[1,2]', /expected a JSON object/],
    ['a string', '"PING"', /expected a JSON object/],
    ['no contentType', '{"content":{}}', /contentType must be one of/],
    ['an unknown contentType', '{"contentType":"NOPE"}', /contentType must be one of/],
    ['a numeric mid', '{"mid":5,"contentType":"PING"}', /mid must be a string/],
    ['content not an object', '{"contentType":"TEXT","content":"hi"}', /content must be an object/],
    ['TEXT without input', '{"contentType":"TEXT","content":{}}', /TEXT needs content.input/],
    ['TEXT with empty input', '{"contentType":"TEXT","content":{"input":""}}', /TEXT needs content.input/],
    ['AUDIO without audioBase64', '{"contentType":"AUDIO","content":{"index":0}}', /AUDIO needs content.audioBase64/],
    ['EVENT without eventType', '{"contentType":"EVENT","content":{}}', /EVENT needs content.eventType/],
    ['an unknown eventType', '{"contentType":"EVENT","content":{"eventType":"DANCE"}}', /unsupported eventType DANCE/],
    [
      'a voice config without audio',
      '{"contentType":"EVENT","content":{"eventType":"CLIENT_VOICE_CHAT_UPDATE","eventData":{}}}',
      /needs eventData.audio/,
    ],
    ['a down contentType', '{"contentType":"AGENT","content":{"text":"x"}}', /not sent by a device/],
  ];

  it('each gets a {code: 400, msg} frame naming the problem; the session carries on and counts no voice config', async () => {
    const { svc, connect } = await rig();
    const client = await connect();
    for (const [name, frame, msg] of malformed) {
      const from = client.frames.length;
      client.send(frame);
      const answer = client.frames[await client.indexOf((f) => f.json?.['code'] === 400, from, `the answer to ${name}`)]!;
      expect(Object.keys(answer.json!), name).toEqual(['code', 'msg']);
      expect(String(answer.json!['msg']), name).toMatch(msg);
    }
    const from = client.frames.length;
    client.send(text('still here'));
    expect(readRound(await client.round(from), false).reply).toBe('you said: still here');
    expect(svc.stats.ws.connections[0]!.voiceConfigs).toBe(0);
  });
});

describe('test knobs', () => {
  it('push sends a frame to the bot’s session as the cloud would; ws-message reports every up frame byte for byte', async () => {
    const { svc, connect } = await rig();
    const client = await connect();
    const up: { botId: string; data: Buffer; isBinary: boolean }[] = [];
    svc.events.on('ws-message', (m: { botId: string; data: Buffer; isBinary: boolean }) => up.push(m));
    const bytes = Buffer.from([0, 255, 7]);
    expect(svc.push('bot-1', bytes)).toBe(true);
    expect(svc.push('bot-1', 'plain text')).toBe(true);
    expect(svc.push('bot-2', 'nobody')).toBe(false);
    await client.indexOf((f) => !f.binary && f.data.toString() === 'plain text');
    expect(client.frames.find((f) => f.binary)!.data).toEqual(bytes);
    client.send(Buffer.from([1, 2]));
    client.send('{"contentType":"PING","mid":"z"}');
    await client.indexOf(isContent('PONG'));
    expect(up.map((m) => [m.botId, [...m.data], m.isBinary])).toEqual([
      ['bot-1', [1, 2], true],
      ['bot-1', [...Buffer.from('{"contentType":"PING","mid":"z"}')], false],
    ]);
  });

  it('echoAudio sends each binary audio frame straight back, byte for byte; off by default, and switchable while open', async () => {
    const { svc, connect } = await rig({ echoAudio: true });
    const client = await connect();
    client.send(Buffer.from([9]));
    // The binary-audio rule still holds: no echo before a binary voice config.
    await client.indexOf((f) => !f.binary && f.data.toString() === AUDIO_BINARY_REFUSAL);
    await configure(client, true);
    const audio = Buffer.from([0, 1, 2, 253, 254, 255]);
    client.send(audio);
    const echoed = await client.indexOf((f) => f.binary);
    expect(client.frames[echoed]!.data).toEqual(audio);
    svc.setEchoAudio(false);
    client.send(Buffer.from([7, 7]));
    client.send(event('CLIENT_AUDIO_FINISH'));
    // Both audio frames count as uplink audio; the second one was not echoed.
    const asr = client.frames[await client.indexOf(isContent('ASR'), echoed)]!;
    expect(contentOf(asr)['text']).toBe('audio of 8 bytes');
    expect(client.frames.filter((f) => f.binary)).toHaveLength(1);

    const { connect: plain } = await rig();
    const quiet = await plain('bot-2');
    await configure(quiet, true);
    quiet.send(audio);
    quiet.send(event('CLIENT_AUDIO_FINISH'));
    await quiet.indexOf(isContent('ASR'));
    expect(quiet.frames.filter((f) => f.binary)).toEqual([]);
  });

  it('a 1 MiB frame is accepted (the relay’s limit); one byte more closes with 1009', async () => {
    const { connect } = await rig();
    const client = await connect();
    await configure(client, true);
    client.send(Buffer.alloc(1024 * 1024));
    client.send(event('CLIENT_AUDIO_FINISH'));
    const asr = client.frames[await client.indexOf(isContent('ASR'))]!;
    expect(contentOf(asr)['text']).toBe(`audio of ${1024 * 1024} bytes`);
    client.send(Buffer.alloc(1024 * 1024 + 1));
    expect((await client.closed).code).toBe(1009);
  });
});
