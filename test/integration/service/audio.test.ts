import { describe, expect, it } from 'vitest';
import { PROACTIVE_PIECES } from '../../../src/service/conversation/round.js';
import { contentOf, isContent, isEvent, type ConversationClient, type Frame } from '../../helpers/conversation-client.js';
import {
  AUDIO_BINARY_REFUSAL,
  audioFrame,
  configure,
  event,
  kinds,
  readRound,
  ROUND,
  SPOKEN_REPLY,
  text,
  useConversationRig,
} from '../../helpers/conversation-rig.js';
import { DOWN, UP, shapeDifferences } from '../../helpers/guide-frames.js';
import { pcmChunks, silencePcm, speechPcm } from '../../helpers/pcm.js';

/**
 * Audio, speech and activities on the reference service (DESIGN §1.7) on a real server. The VAD counts
 * the audio's own samples, so frames are sent as fast as the socket takes them: nothing here waits on time.
 */

const rig = useConversationRig();

/** Sends audio in AUDIO frames of 100 ms (index 0, 1, 2…), or as binary frames. */
function stream(client: ConversationClient, pcm: Buffer, o: { binary?: boolean; rate?: number; first?: number } = {}): number {
  let index = o.first ?? 0;
  for (const chunk of pcmChunks(pcm, 100, o.rate)) client.send(o.binary ? chunk : audioFrame(chunk, index++));
  return index;
}

/** Sends a PING and returns the kinds of every frame from `from` to its PONG: what the service said meanwhile. */
async function saidSince(client: ConversationClient, from: number): Promise<string[]> {
  client.send({ contentType: 'PING' });
  return kinds(client.frames.slice(from, (await client.indexOf(isContent('PONG'), from)) + 1));
}

describe('free mode (the default): the VAD ends an utterance', () => {
  it('base64 AUDIO: 1 s of speech, then 600 ms of silence → ASR IS_FINAL in the guide’s shape, then the round on it', async () => {
    const { connect } = await rig();
    const client = await connect('bot-1', { requestId: 'req-1' });
    const from = client.frames.length;
    const next = stream(client, speechPcm(1000));
    stream(client, silencePcm(500), { first: next });
    expect(await saidSince(client, from)).toEqual(['PONG']);
    stream(client, silencePcm(100), { first: next + 5 });
    const frames = await client.round(await client.indexOf(isContent('ASR'), from));
    expect(kinds(frames)).toEqual(['ASR', ...ROUND]);
    expect(shapeDifferences(frames[0]!.json, DOWN['ASR'])).toEqual([]);
    expect(frames[0]!.json).toMatchObject({
      msg: 'ASR success',
      mid: 'req-1_2',
      content: { text: 'audio of 1.0 s', textType: 'IS_FINAL', lang: 'en' },
    });
    expect(readRound(frames).reply).toBe('you said: audio of 1.0 s');
  });

  it('binary frames at 24 kHz (the config’s input rate): 1.2 s of speech, then silence', async () => {
    const { connect } = await rig();
    const client = await connect();
    await configure(client, true, { input: { codec: 'pcm', sampleRate: '24000' } });
    const from = client.frames.length;
    stream(client, Buffer.concat([speechPcm(1200, 24000), silencePcm(600, 24000)]), { binary: true, rate: 24000 });
    const frames = await client.round(await client.indexOf(isContent('ASR'), from));
    expect(contentOf(frames[0]!)['text']).toBe('audio of 1.2 s');
    expect(readRound(frames).reply).toBe('you said: audio of 1.2 s');
  });

  it('--vad-silence-ms: a shorter silence ends the utterance sooner', async () => {
    const { connect } = await rig({ vadSilenceMs: 200 });
    const client = await connect();
    stream(client, Buffer.concat([speechPcm(500), silencePcm(200)]));
    expect(contentOf(client.frames[await client.indexOf(isContent('ASR'))]!)['text']).toBe('audio of 0.5 s');
  });

  it('speech during a reply cuts it (CALL_AGENT_INTERRUPTED), and becomes the next utterance', async () => {
    const { connect } = await rig({ roundDelayMs: 60_000 });
    const client = await connect();
    client.send(text('long story'));
    const start = await client.indexOf(isEvent('CALL_AGENT_START_EVENT'));
    stream(client, speechPcm(300));
    const cut = await client.indexOf(isEvent('CALL_AGENT_INTERRUPTED'), start);
    expect(contentOf(client.frames[cut]!)['roundId']).toBe(contentOf(client.frames[start]!)['roundId']);
    stream(client, silencePcm(600));
    await client.indexOf(isContent('ASR'), cut);
    expect(kinds(client.frames.slice(start))).toEqual(['CALL_AGENT_START_EVENT', 'CALL_AGENT_INTERRUPTED', 'ASR']);
  });

  it('3 s of silence alone → EMPTY_CONTENT in the guide’s shape (mid null), once until someone speaks', async () => {
    const { connect } = await rig();
    const client = await connect('bot-1', { requestId: 'req-2' });
    stream(client, silencePcm(2900));
    expect(await saidSince(client, 1)).toEqual(['PONG']);
    stream(client, silencePcm(6000));
    const empty = client.frames[await client.indexOf(isEvent('EMPTY_CONTENT'))]!;
    expect(shapeDifferences(empty.json, DOWN['EMPTY_CONTENT'])).toEqual([]);
    expect(empty.json).toMatchObject({
      mid: null,
      msg: 'Event success',
      content: { roundId: 'req-2_2', eventData: { startTime: expect.any(Number) } },
    });
    const after = client.frames.length;
    stream(client, silencePcm(6000));
    expect(await saidSince(client, after)).toEqual(['PONG']);
  });

  it('the guide’s AUDIO frames, the last one with ~index: the stream ended, on silence only → EMPTY_CONTENT', async () => {
    const { connect } = await rig();
    const client = await connect();
    client.send(UP['AUDIO']!);
    client.send(UP['AUDIO_LAST']!);
    await client.indexOf(isEvent('EMPTY_CONTENT'));
    const from = client.frames.length;
    client.send(audioFrame(speechPcm(300), 0));
    client.send(audioFrame(speechPcm(50), ~1));
    expect(contentOf(client.frames[await client.indexOf(isContent('ASR'), from)]!)['text']).toBe('audio of 0.4 s');
  });
});

describe('manual mode (needManualCall=true): CLIENT_AUDIO_FINISH ends an utterance', () => {
  it('silence does not end it; the guide’s CLIENT_AUDIO_FINISH does; silence only → EMPTY_CONTENT', async () => {
    const { connect } = await rig();
    const client = await connect('bot-1', { needManualCall: 'true' });
    stream(client, Buffer.concat([speechPcm(500), silencePcm(4000), speechPcm(500)]));
    expect(await saidSince(client, 1)).toEqual(['PONG']);
    const from = client.frames.length;
    client.send(UP['CLIENT_AUDIO_FINISH']!);
    const frames = await client.round(from);
    expect(kinds(frames)).toEqual(['ASR', ...ROUND]);
    expect(contentOf(frames[0]!)['text']).toBe('audio of 5.0 s');
    const next = client.frames.length;
    stream(client, silencePcm(1000));
    client.send(UP['CLIENT_AUDIO_FINISH']!);
    await client.indexOf(isEvent('EMPTY_CONTENT'), next);
  });
});

describe('speech and activities', () => {
  it('the guide’s CLIENT_INPUT_TEXT_TO_SPEECH: TTS only (no agent), and it cuts the speech in progress', async () => {
    const { connect } = await rig({ roundDelayMs: 60_000 });
    const client = await connect();
    client.send(text('long story'));
    const start = await client.indexOf(isEvent('CALL_AGENT_START_EVENT'));
    client.send(UP['CLIENT_INPUT_TEXT_TO_SPEECH']!);
    await client.indexOf(isEvent('TTS_SENTENCE_START'), start);
    expect(kinds(client.frames.slice(start))).toEqual(['CALL_AGENT_START_EVENT', 'CALL_AGENT_INTERRUPTED', 'TTS_SENTENCE_START']);
    const { connect: quick } = await rig();
    const other = await quick('bot-2');
    other.send(UP['CLIENT_INPUT_TEXT_TO_SPEECH']!);
    const frames = await other.round(1);
    expect(kinds(frames)).toEqual(['TTS_SENTENCE_START', 'TTS', 'TTS_COMPLETE', 'COMPLETE']);
    expect(contentOf(frames[0]!)['eventData']).toEqual({ text: 'the text to speak' });
    expect(readRound(frames).audioMs).toBe(17 * 40);
  });

  it('the guide’s VOICE_CHAT_TRIGGER: a proactive turn, its text in ACTIVITY frames shaped like AGENT', async () => {
    const { connect } = await rig();
    const client = await connect();
    client.send(UP['VOICE_CHAT_TRIGGER']!);
    const frames = await client.round(1);
    expect(kinds(frames)).toEqual(['ACTIVITY', 'ACTIVITY', ...SPOKEN_REPLY]);
    expect(frames[0]!.json!['msg']).toBe('LLM success');
    expect(readRound(frames).reply).toBe(PROACTIVE_PIECES.join(''));
  });

  it('the guide’s CLIENT_UPDATE_CHAT_CONTEXT → CLIENT_CHAT_CONTEXT_RECEIVED, with activityType, "Activity success"', async () => {
    const { connect } = await rig();
    const client = await connect('bot-1', { requestId: 'req-8' });
    client.send(UP['CLIENT_UPDATE_CHAT_CONTEXT']!);
    const got = client.frames[await client.indexOf((f) => contentOf(f)['activityType'] === 'CLIENT_CHAT_CONTEXT_RECEIVED')]!;
    expect(shapeDifferences(got.json, DOWN['CLIENT_CHAT_CONTEXT_RECEIVED'])).toEqual([]);
    expect(got.json).toMatchObject({
      msg: 'Activity success',
      mid: 'req-8_1',
      contentType: 'EVENT',
      content: { roundId: 'req-8_1', activityData: {} },
    });
  });

  it('every up frame of the guide is accepted: none is refused, and the session carries on', async () => {
    const { connect } = await rig();
    const client = await connect();
    for (const frame of Object.values(UP)) client.send(frame);
    client.send(text('after them all'));
    const last = (f: Frame): boolean =>
      isEvent('CALL_AGENT_START_EVENT')(f) && (contentOf(f)['eventData'] as { input?: string }).input === 'after them all';
    const frames = await client.round(await client.indexOf(last));
    expect(readRound(frames).reply).toBe('you said: after them all');
    expect(client.frames.filter((f) => f.json?.['code'] === 400)).toEqual([]);
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
    const audio = speechPcm(200);
    client.send(audio);
    const echoed = await client.indexOf((f) => f.binary);
    expect(client.frames[echoed]!.data).toEqual(audio);
    svc.setEchoAudio(false);
    client.send(speechPcm(300));
    client.send(event('CLIENT_AUDIO_FINISH'));
    // Both audio frames count as uplink audio; the second one was not echoed.
    const asr = client.frames[await client.indexOf(isContent('ASR'), echoed)]!;
    expect(contentOf(asr)['text']).toBe('audio of 0.5 s');
    expect(client.frames.slice(0, client.frames.indexOf(asr)).filter((f) => f.binary)).toHaveLength(1);

    const { connect: plain } = await rig();
    const quiet = await plain('bot-2');
    await configure(quiet, true);
    quiet.send(audio);
    quiet.send(event('CLIENT_AUDIO_FINISH'));
    const at = await quiet.indexOf(isContent('ASR'));
    expect(quiet.frames.slice(0, at).filter((f) => f.binary)).toEqual([]);
  });

  it('a 1 MiB frame is accepted (the relay’s limit); one byte more closes with 1009', async () => {
    const { connect } = await rig();
    const client = await connect('bot-1', { needManualCall: 'true' });
    await configure(client, true);
    client.send(Buffer.alloc(1024 * 1024, 0x11));
    client.send(event('CLIENT_AUDIO_FINISH'));
    const asr = client.frames[await client.indexOf(isContent('ASR'))]!;
    expect(contentOf(asr)['text']).toBe('audio of 32.8 s');
    client.send(Buffer.alloc(1024 * 1024 + 1));
    expect((await client.closed).code).toBe(1009);
  });
});
