import { describe, expect, it } from 'vitest';
import { GREETING_DATA } from '../../../src/service/conversation/session.js';
import { contentOf, isContent, isEvent } from '../../helpers/conversation-client.js';
import {
  AUDIO_BINARY_REFUSAL,
  configure,
  event,
  kinds,
  readRound,
  ROUND,
  text,
  useConversationRig,
} from '../../helpers/conversation-rig.js';
import { DOWN, UP, shapeDifferences } from '../../helpers/guide-frames.js';
import { speechPcm } from '../../helpers/pcm.js';

/**
 * The reference service's conversation (DESIGN §1.7) on a real server: every frame it sends has the shape
 * of the guide's (test/fixtures/conversation/down.json). Audio, free and manual mode: service-audio.test.ts.
 */

const rig = useConversationRig();
describe('on open', () => {
  it('greets with CFG_BOT_EVENT in the guide’s shape: mid null, roundId "", timbre/tts/deviceModel/deviceId', async () => {
    const { connect } = await rig();
    const t0 = Date.now();
    const client = await connect('bot-1', { requestId: 'req-9', sessionId: 's-1' });
    const greeting = client.frames[await client.indexOf(isEvent('CFG_BOT_EVENT'))]!;
    expect(client.frames.indexOf(greeting)).toBe(0);
    expect(shapeDifferences(greeting.json, DOWN['CFG_BOT_EVENT'])).toEqual([]);
    expect(Object.keys(greeting.json!)).toEqual(['code', 'msg', 'requestId', 'mid', 'contentType', 'content', 't']);
    expect(greeting.json).toMatchObject({ code: 200, msg: 'Event success', requestId: 'req-9', mid: null, contentType: 'EVENT' });
    expect(contentOf(greeting)).toEqual({ roundId: '', eventType: 'CFG_BOT_EVENT', eventData: GREETING_DATA });
    expect(GREETING_DATA.tts).toEqual({ aue: 'pcm', bit: 16, channels: 1, sr: '16000' });
    expect(Math.abs((greeting.json!['t'] as number) - t0)).toBeLessThan(60_000);
  });
});

describe('PING', () => {
  it('the guide’s PING (uid and all) is answered by a PONG without content, whose mid is the service’s own <requestId>_N', async () => {
    const { connect } = await rig();
    const client = await connect('bot-1', { requestId: 'req-1' });
    client.send(UP['PING']!);
    const first = client.frames[await client.indexOf(isContent('PONG'))]!;
    expect(shapeDifferences(first.json, DOWN['PONG'])).toEqual([]);
    expect('content' in first.json!).toBe(false);
    expect(first.json).toMatchObject({ code: 200, msg: 'Event success', requestId: 'req-1', mid: 'req-1_1' });
    client.send({ contentType: 'PING' });
    const second = client.frames[await client.indexOf(isContent('PONG'), client.frames.indexOf(first) + 1)]!;
    expect(second.json!['mid']).toBe('req-1_2');
  });
});

describe('the voice config', () => {
  it('the guide’s config is answered SERVER_VOICE_CHAT_UPDATED with its eventData, and counted for its own connection only', async () => {
    const { svc, connect } = await rig();
    const a = await connect('bot-1', { sessionId: 'a' });
    const b = await connect('bot-2', { sessionId: 'b' });
    a.send(UP['CLIENT_VOICE_CHAT_UPDATE']!);
    const updated = a.frames[await a.indexOf(isEvent('SERVER_VOICE_CHAT_UPDATED'))]!;
    expect(shapeDifferences(updated.json, DOWN['SERVER_VOICE_CHAT_UPDATED'], ['content.eventData'])).toEqual([]);
    expect(contentOf(updated)).toEqual({
      eventType: 'SERVER_VOICE_CHAT_UPDATED',
      eventData: (UP['CLIENT_VOICE_CHAT_UPDATE']!['content'] as Record<string, unknown>)['eventData'],
    });
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

  it('a binary frame before a binary voice config is refused with the guide’s frame: none, then a text-mode one', async () => {
    const { svc, connect } = await rig();
    const client = await connect();
    client.send(Buffer.from([9]));
    expect(JSON.parse(client.frames[await client.indexOf((f) => f.data.toString() === AUDIO_BINARY_REFUSAL)]!.data.toString())).toEqual(
      DOWN['AUDIO_BINARY_NOT_SUPPORTED'],
    );
    await configure(client, false);
    const from = client.frames.length;
    client.send(Buffer.from([9]));
    await client.indexOf((f) => f.data.toString() === AUDIO_BINARY_REFUSAL, from);
    await configure(client, true);
    client.send(speechPcm(1000));
    client.send(event('CLIENT_AUDIO_FINISH'));
    const asr = client.frames[await client.indexOf(isContent('ASR'))]!;
    expect(contentOf(asr)).toEqual({ text: 'audio of 1.0 s', textType: 'IS_FINAL', lang: 'en' });
    expect(svc.stats.ws.connections[0]!.voiceConfigs).toBe(2);
  });
});

describe('a round', () => {
  it('the guide’s TEXT: START, AGENT pieces in content.content, a sentence and a tone per piece, TTS_COMPLETE, COMPLETE', async () => {
    const { connect } = await rig();
    const client = await connect('bot-1', { requestId: 'req-3' });
    const from = client.frames.length;
    client.send(UP['TEXT']!);
    const frames = await client.round(from);
    expect(kinds(frames)).toEqual(ROUND);
    const round = readRound(frames);
    expect(round.reply).toBe('you said: tell me a story');
    expect(contentOf(frames[0]!)['eventData']).toEqual({ input: 'tell me a story', startTime: expect.any(Number) });
    // The audio is PCM at 16 kHz: its bytes are its duration; "you said: " 400 ms, the 15-character input 600 ms.
    expect(round.audioMs).toBe(1000);
    expect(round.audioBytes).toBe(32 * 1000);
    expect(frames.filter(isContent('TTS')).every((f) => contentOf(f)['audioAue'] === 'pcm')).toBe(true);
  });

  it('TEXT in binary mode: the tones come as binary frames', async () => {
    const { connect } = await rig();
    const client = await connect('bot-1', { requestId: 'req-4' });
    await configure(client, true);
    const from = client.frames.length;
    client.send(text('hi'));
    const frames = await client.round(from);
    expect(kinds(frames)).toEqual(ROUND.map((k) => (k === 'TTS' ? 'binary' : k)));
    expect(readRound(frames)).toMatchObject({ reply: 'you said: hi', audioBytes: 32 * 600 });
  });

  it('two rounds in a row each complete, with their own roundIds', async () => {
    const { connect } = await rig();
    const client = await connect('bot-1', { requestId: 'req-5' });
    client.send(text('one'));
    const first = await client.round(1);
    const from = client.frames.length;
    client.send(text('two'));
    const [a, b] = [readRound(first), readRound(await client.round(from))];
    expect([a.reply, b.reply]).toEqual(['you said: one', 'you said: two']);
    expect([a.roundId, b.roundId]).toEqual(['req-5_1', 'req-5_2']);
    expect(client.frames.some(isEvent('CALL_AGENT_INTERRUPTED'))).toBe(false);
  });
});

describe('interruptions (rounds paced a minute apart, so one is surely running)', () => {
  it('the guide’s CLIENT_INTERRUPT during a round → CALL_AGENT_INTERRUPTED {startTime} with its roundId; outside a round → nothing', async () => {
    const { connect } = await rig({ roundDelayMs: 60_000 });
    const client = await connect('bot-1', { requestId: 'req-6' });
    client.send(UP['CLIENT_INTERRUPT']!);
    client.send({ mid: 'p', contentType: 'PING' });
    expect(kinds(client.frames.slice(0, (await client.indexOf(isContent('PONG'))) + 1))).toEqual(['CFG_BOT_EVENT', 'PONG']);
    const from = client.frames.length;
    client.send(text('long story'));
    const start = await client.indexOf(isEvent('CALL_AGENT_START_EVENT'), from);
    client.send(UP['CLIENT_INTERRUPT']!);
    const frames = await client.round(start);
    expect(kinds(frames)).toEqual(['CALL_AGENT_START_EVENT', 'CALL_AGENT_INTERRUPTED']);
    expect(shapeDifferences(frames[1]!.json, DOWN['CALL_AGENT_INTERRUPTED'])).toEqual([]);
    expect(contentOf(frames[1]!)).toEqual({
      roundId: 'req-6_2',
      eventType: 'CALL_AGENT_INTERRUPTED',
      eventData: { startTime: expect.any(Number) },
    });
    expect(frames[1]!.json!['mid']).toBe('req-6_3');
  });

  it('a new TEXT during a round interrupts it, then starts its own', async () => {
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

  it('a voice config during a round interrupts it', async () => {
    const { connect } = await rig({ roundDelayMs: 60_000 });
    const client = await connect();
    client.send(text('b'));
    const b = await client.indexOf(isEvent('CALL_AGENT_START_EVENT'));
    client.send(UP['CLIENT_VOICE_CHAT_UPDATE_PCM_TEXT']!);
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
    ['AUDIO with a fractional index', '{"contentType":"AUDIO","content":{"audioBase64":"","index":0.5}}', /index must be an integer/],
    ['EVENT without eventType', '{"contentType":"EVENT","content":{}}', /EVENT needs content.eventType/],
    ['an unknown eventType', '{"contentType":"EVENT","content":{"eventType":"DANCE"}}', /unsupported eventType DANCE/],
    [
      'TTS without text',
      '{"contentType":"EVENT","content":{"eventType":"CLIENT_INPUT_TEXT_TO_SPEECH","eventData":{}}}',
      /needs eventData.text/,
    ],
    [
      'a voice config without audio',
      '{"contentType":"EVENT","content":{"eventType":"CLIENT_VOICE_CHAT_UPDATE","eventData":{}}}',
      /needs eventData.audio/,
    ],
    [
      'a voice config at 44.1 kHz in',
      '{"contentType":"EVENT","content":{"eventType":"CLIENT_VOICE_CHAT_UPDATE","eventData":{"audio":{"input":{"sampleRate":"44100"}}}}}',
      /input.sampleRate must be one of 16000, 24000, 32000/,
    ],
    ['ACTIVITY without activityType', '{"contentType":"ACTIVITY","content":{}}', /ACTIVITY needs content.activityType/],
    ['an unknown activityType', '{"contentType":"ACTIVITY","content":{"activityType":"SING"}}', /unsupported activityType SING/],
    [
      'context for 0 minutes',
      '{"contentType":"ACTIVITY","content":{"activityType":"CLIENT_UPDATE_CHAT_CONTEXT","effectiveTimeMinutes":0}}',
      /from 1 to 1440/,
    ],
    [
      'context for 1441 minutes',
      '{"contentType":"ACTIVITY","content":{"activityType":"CLIENT_UPDATE_CHAT_CONTEXT","effectiveTimeMinutes":1441}}',
      /from 1 to 1440/,
    ],
    ['a down contentType', '{"contentType":"AGENT","content":{"content":"x"}}', /not sent by a device/],
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
    expect(readRound(await client.round(from)).reply).toBe('you said: still here');
    expect(svc.stats.ws.connections[0]!.voiceConfigs).toBe(0);
  });
});
