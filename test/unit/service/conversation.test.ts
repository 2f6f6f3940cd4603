import { describe, expect, it } from 'vitest';
import {
  downFrame,
  isConversationEvent,
  linkStateFrame,
  parseUpFrame,
  readLinkState,
  upFrame,
} from '../../../src/protocol/conversation.js';
import { replyPlan, replyTo, roundSteps, transcriptOf, type RoundStep } from '../../../src/service/conversation/round.js';
import { Conversation } from '../../../src/service/conversation/session.js';
import { pcmFrames, toneFor, toneMs } from '../../../src/service/conversation/tone.js';
import { DEFAULT_AUDIO, readAudioConfig, TTS_FRAME_MS } from '../../../src/service/conversation/voice-config.js';
import { rmsOf } from '../../../src/service/conversation/vad.js';
import { ManualClock } from '../../helpers/manual-clock.js';
import { ROUND } from '../../helpers/conversation-rig.js';

describe('protocol/conversation', () => {
  it('downFrame keeps the envelope’s key order, says the guide’s msg per contentType, and leaves out an absent content', () => {
    const pong = JSON.parse(downFrame({ requestId: 'r', mid: 'r_1', contentType: 'PONG', t: 5 })) as object;
    expect(Object.entries(pong)).toEqual([
      ['code', 200],
      ['msg', 'Event success'],
      ['requestId', 'r'],
      ['mid', 'r_1'],
      ['contentType', 'PONG'],
      ['t', 5],
    ]);
    const msgs = (['EVENT', 'ASR', 'AGENT', 'TTS', 'ACTIVITY'] as const).map(
      (contentType) => (JSON.parse(downFrame({ requestId: 'r', mid: null, contentType, content: {}, t: 0 })) as { msg: string }).msg,
    );
    expect(msgs).toEqual(['Event success', 'ASR success', 'LLM success', 'TTS success', 'LLM success']);
    expect(downFrame({ requestId: 'r', mid: null, contentType: 'EVENT', content: {}, t: 0, msg: 'Activity success' })).toBe(
      '{"code":200,"msg":"Activity success","requestId":"r","mid":null,"contentType":"EVENT","content":{},"t":0}',
    );
    expect(upFrame('PING', {})).toBe('{"contentType":"PING","content":{}}');
    expect(upFrame('TEXT', { input: 'x' }, 'm1')).toBe('{"mid":"m1","contentType":"TEXT","content":{"input":"x"}}');
  });

  it('parseUpFrame reads a frame without content as empty content, and ignores uid and unknown fields', () => {
    expect(parseUpFrame('{"contentType":"PING"}')).toEqual({ ok: true, frame: { mid: undefined, contentType: 'PING', content: {} } });
    expect(parseUpFrame('{"mid":"m","uid":"u","extra":1,"contentType":"PING"}')).toEqual({
      ok: true,
      frame: { mid: 'm', contentType: 'PING', content: {} },
    });
  });

  it('isConversationEvent tells the voice config and the greeting from chat that merely names them', () => {
    const cfg = Buffer.from(upFrame('EVENT', { eventType: 'CLIENT_VOICE_CHAT_UPDATE', eventData: { audio: {} } }));
    const chat = Buffer.from(upFrame('TEXT', { input: 'what is CLIENT_VOICE_CHAT_UPDATE?' }));
    expect(isConversationEvent(cfg, 'CLIENT_VOICE_CHAT_UPDATE')).toBe(true);
    expect(isConversationEvent(cfg, 'CFG_BOT_EVENT')).toBe(false);
    expect(isConversationEvent(chat, 'CLIENT_VOICE_CHAT_UPDATE')).toBe(false);
    expect(isConversationEvent(Buffer.from('{"CFG_BOT_EVENT"'), 'CFG_BOT_EVENT')).toBe(false);
  });

  it('readLinkState reads back what linkStateFrame wrote, and nothing from any other frame', () => {
    const back = (data: Parameters<typeof linkStateFrame>[0]) => readLinkState(JSON.parse(linkStateFrame(data)));
    expect(back({ state: 'connected', sessionId: 's1' })).toEqual({ state: 'connected', sessionId: 's1' });
    expect(back({ state: 'backoff', sessionId: null, retryInMs: 1500 })).toEqual({ state: 'backoff', sessionId: null, retryInMs: 1500 });
    const frame = (eventData: unknown) => ({ contentType: 'BOTLINK', content: { eventType: 'LINK_STATE', eventData } });
    expect(readLinkState(frame({ state: 'stopped' }))).toEqual({ state: 'stopped', sessionId: null });
    expect(readLinkState(frame({ state: 'connected', sessionId: 7, retryInMs: '9' }))).toEqual({ state: 'connected', sessionId: null });
    expect(readLinkState(frame({ sessionId: 's1' }))).toBeUndefined();
    expect(readLinkState(frame(null))).toBeUndefined();
    expect(
      readLinkState({ contentType: 'EVENT', content: { eventType: 'LINK_STATE', eventData: { state: 'connected' } } }),
    ).toBeUndefined();
    expect(readLinkState({ contentType: 'BOTLINK', content: { eventType: 'OTHER', eventData: { state: 'connected' } } })).toBeUndefined();
    expect(readLinkState('{"contentType":"BOTLINK"}')).toBeUndefined();
  });
});

describe('readAudioConfig', () => {
  const audio = (a: Record<string, unknown>) => ({ audio: a });
  const ok: [string, unknown, Partial<typeof DEFAULT_AUDIO>][] = [
    ['empty audio: the defaults', audio({}), {}],
    [
      'the guide’s strings',
      audio({ binary: true, input: { codec: 'pcm', sampleRate: '24000' }, output: { codec: 'pcm', sampleRate: '24000' } }),
      { binary: true, inputRate: 24000, outputRate: 24000 },
    ],
    ['numbers too', audio({ input: { sampleRate: 32000 }, output: { sampleRate: 8000 } }), { inputRate: 32000, outputRate: 8000 }],
    ['opus in, mp3 out', audio({ input: { codec: 'opus' }, output: { codec: 'mp3' } }), { inputCodec: 'opus', outputCodec: 'mp3' }],
    ['frameSizeMs 60..120 sets the TTS frames', audio({ output: { frameSizeMs: '100' } }), { ttsFrameMs: 100 }],
    [
      'frameSizeMs outside 60..120 (an opus size) is ignored',
      audio({ output: { codec: 'opus', frameSizeMs: '40' } }),
      { outputCodec: 'opus', ttsFrameMs: TTS_FRAME_MS },
    ],
    ['unknown fields are ignored', audio({ input: { format: 'pcm', channel: 1 }, extra: true }), {}],
  ];
  it.each(ok)('%s', (_name, eventData, want) => {
    expect(readAudioConfig(eventData)).toEqual({ ok: true, audio: { ...DEFAULT_AUDIO, ...want } });
  });

  const refused: [string, unknown, RegExp][] = [
    ['no audio', {}, /needs eventData.audio/],
    ['audio not an object', { audio: 'pcm' }, /needs eventData.audio/],
    [
      'an input rate the guide does not list',
      audio({ input: { sampleRate: '44100' } }),
      /input.sampleRate must be one of 16000, 24000, 32000/,
    ],
    ['an input codec it does not know', audio({ input: { codec: 'aac' } }), /input.codec/],
    ['an output codec it does not know', audio({ output: { codec: 'wav' } }), /output.codec/],
    ['an output rate out of range', audio({ output: { sampleRate: '96000' } }), /output.sampleRate/],
  ];
  it.each(refused)('refused: %s', (_name, eventData, msg) => {
    const got = readAudioConfig(eventData);
    expect(got.ok).toBe(false);
    expect(got.ok ? '' : got.msg).toMatch(msg);
  });
});

describe('the tone TTS', () => {
  it('a piece lasts 40 ms a character, from 200 ms to 4 s', () => {
    expect(['hi', 'you said: ', 'x'.repeat(500)].map(toneMs)).toEqual([200, 400, 4000]);
  });

  it('is a real tone at the output rate: the right number of samples, loud in the middle, no click at the ends', () => {
    const tone = toneFor('you said: ', 0, 24000);
    expect(tone.length).toBe(0.4 * 24000 * 2);
    expect(rmsOf(tone.subarray(4800, 9600))).toBeGreaterThan(5000);
    expect(tone.readInt16LE(0)).toBe(0);
    expect(toneFor('you said: ', 0, 24000)).toEqual(tone);
    expect(toneFor('you said: ', 1, 24000)).not.toEqual(tone);
  });

  it('pcmFrames: frames of frameMs, the last shorter, each with its duration', () => {
    const frames = pcmFrames(Buffer.alloc(16000 * 2), 16000, 480);
    expect(frames.map((f) => [f.audio.length, f.durationMs])).toEqual([
      [15360, 480],
      [15360, 480],
      [1280, 40],
    ]);
  });
});

/** A step as a test sees it: its content at t = 7, or its binary audio's length. */
function shown(step: RoundStep): unknown {
  return 'binaryAudio' in step ? { binary: step.binaryAudio.length } : { [step.contentType]: step.content(7) };
}

describe('a round’s frames', () => {
  it('an utterance: ASR IS_FINAL, START, AGENT pieces (the last "stop"), per piece a sentence and its tone, TTS_COMPLETE, COMPLETE', () => {
    expect(replyTo('x')).toBe('you said: x');
    expect(transcriptOf(1249)).toBe('audio of 1.2 s');
    const steps = roundSteps(replyPlan('R', 'x', DEFAULT_AUDIO, true)).map(shown);
    const tts = (piece: Buffer, finish: boolean) => ({
      TTS: { roundId: 'R', audioBase64: piece.toString('base64'), audioAue: 'pcm', audioDuration: piece.length / 32, finish },
    });
    expect(steps).toEqual([
      { ASR: { text: 'x', textType: 'IS_FINAL', lang: 'en' } },
      { EVENT: { roundId: 'R', eventType: 'CALL_AGENT_START_EVENT', eventData: { input: 'x', startTime: 7 } } },
      { AGENT: { roundId: 'R', role: 'assistant', content: 'you said: ', reasoningContent: '', finishReason: '' } },
      { AGENT: { roundId: 'R', role: 'assistant', content: 'x', reasoningContent: '', finishReason: 'stop' } },
      { EVENT: { roundId: 'R', eventType: 'TTS_SENTENCE_START', eventData: { text: 'you said: ' } } },
      tts(toneFor('you said: ', 0, 16000), false),
      { EVENT: { roundId: 'R', eventType: 'TTS_SENTENCE_START', eventData: { text: 'x' } } },
      tts(toneFor('x', 1, 16000), true),
      { EVENT: { roundId: 'R', eventType: 'TTS_COMPLETE', eventData: { time: 7 } } },
      { EVENT: { roundId: 'R', eventType: 'COMPLETE', eventData: { time: 7 } } },
    ]);
  });

  it('binary audio: the tones as binary frames of the TTS frame size, no TTS frames', () => {
    const steps = roundSteps(replyPlan('R', 'a longer input than one frame holds', { ...DEFAULT_AUDIO, binary: true }, false)).map(shown);
    expect(steps.filter((s) => 'TTS' in (s as object))).toEqual([]);
    // "you said: " 400 ms; the input, 35 characters, 1400 ms: 480 + 480 + 440 ms.
    expect(steps.filter((s) => 'binary' in (s as object))).toEqual([12800, 15360, 15360, 14080].map((binary) => ({ binary })));
  });
});

/** A Conversation on a ManualClock whose sent frames are recorded as kinds. */
function conversation(roundDelayMs: number, manual = false) {
  const clock = new ManualClock();
  const sent: string[] = [];
  const frames: Record<string, unknown>[] = [];
  const c = new Conversation({
    requestId: 'r',
    now: () => clock.wallNow(),
    roundDelayMs,
    manual,
    vadSilenceMs: 600,
    setTimer: (ms, fn) => clock.setTimer(ms, fn),
    send: (data, binary) => {
      if (binary) return sent.push('binary');
      const f = JSON.parse(String(data)) as { contentType?: string; content?: { eventType?: string } };
      frames.push(f);
      sent.push(f.contentType === 'EVENT' ? String(f.content?.eventType) : String(f.contentType ?? 'error'));
    },
    onVoiceConfig: () => undefined,
  });
  const say = (frame: string): void => c.receive(Buffer.from(frame), false);
  return { clock, sent, frames, c, say };
}

/** Kinds with a run of TTS frames as one: a transcript's tone may take more than one frame. */
const squash = (kinds: string[]): string[] => kinds.filter((k, i) => !(k === 'TTS' && kinds[i - 1] === 'TTS'));

describe('Conversation pacing', () => {
  it('sends a round’s frames roundDelayMs apart, on the injected timer', async () => {
    const { clock, sent, say } = conversation(10);
    say(upFrame('TEXT', { input: 'hi' }));
    expect(sent).toEqual(ROUND.slice(0, 1));
    expect(clock.pending()).toEqual([10]);
    await clock.advance(9);
    expect(sent).toHaveLength(1);
    await clock.advance(1);
    expect(sent).toEqual(ROUND.slice(0, 2));
    await clock.advance(100);
    expect(sent).toEqual(ROUND);
    expect(clock.pending()).toEqual([]);
  });

  it('roundDelayMs 0 sends the whole round at once, with no timer; mids and roundIds are <requestId>_N', () => {
    const { clock, sent, frames, say } = conversation(0);
    say(upFrame('PING', {}, 'ping-mid'));
    say(upFrame('TEXT', { input: 'hi' }));
    expect(sent).toEqual(['PONG', ...ROUND]);
    expect(clock.pending()).toEqual([]);
    expect(frames.map((f) => f['mid'])).toEqual(['r_1', ...ROUND.map(() => 'r_2')]);
  });

  it('an interrupted round stops: its timer is cancelled and nothing more of it is sent', async () => {
    const { clock, sent, say } = conversation(10);
    say(upFrame('TEXT', { input: 'hi' }));
    await clock.advance(10);
    say(upFrame('EVENT', { eventType: 'CLIENT_INTERRUPT' }));
    expect(sent).toEqual(['CALL_AGENT_START_EVENT', 'AGENT', 'CALL_AGENT_INTERRUPTED']);
    expect(clock.pending()).toEqual([]);
    await clock.advance(1000);
    expect(sent).toHaveLength(3);
  });

  it('close() cancels the round and silences the session', async () => {
    const { clock, sent, say, c } = conversation(10);
    say(upFrame('TEXT', { input: 'hi' }));
    c.close();
    expect(clock.pending()).toEqual([]);
    say(upFrame('PING', {}));
    await clock.advance(1000);
    expect(sent).toEqual(['CALL_AGENT_START_EVENT']);
  });
});

/** 16-bit mono PCM at 16 kHz: `ms` of a loud square wave, or of silence. */
const loud = (ms: number): Buffer => {
  const b = Buffer.alloc(ms * 32);
  for (let i = 0; i < b.length / 2; i++) b.writeInt16LE(i % 2 ? 4000 : -4000, i * 2);
  return b;
};
const quiet = (ms: number): Buffer => Buffer.alloc(ms * 32);
const audio = (pcm: Buffer, index: number) => upFrame('AUDIO', { audioBase64: pcm.toString('base64'), index });

describe('Conversation audio (time is the audio’s own, not a clock)', () => {
  it('free mode: speech, then 600 ms of silence, ends the utterance in the frame that completes the silence', () => {
    const { sent, frames, say } = conversation(0);
    say(audio(loud(1000), 0));
    say(audio(quiet(580), 1));
    expect(sent).toEqual([]);
    say(audio(quiet(40), 2));
    expect(squash(sent)).toEqual(['ASR', ...ROUND]);
    expect(frames[0]!['content']).toEqual({ text: 'audio of 1.0 s', textType: 'IS_FINAL', lang: 'en' });
  });

  it('free mode: speech during a reply cuts it; the new utterance gets its own round', async () => {
    const { clock, sent, say } = conversation(10);
    say(upFrame('TEXT', { input: 'hi' }));
    say(audio(loud(100), 0));
    expect(sent).toEqual(['CALL_AGENT_START_EVENT', 'CALL_AGENT_INTERRUPTED']);
    say(audio(quiet(600), 1));
    expect(sent.slice(2)).toEqual(['ASR']);
    await clock.advance(1000);
    expect(squash(sent.slice(3))).toEqual(ROUND);
  });

  it('free mode: 3 s of silence alone → EMPTY_CONTENT, once; the ~index last frame ends an utterance at once', () => {
    const { sent, frames, say } = conversation(0);
    say(audio(quiet(2980), 0));
    expect(sent).toEqual([]);
    say(audio(quiet(20), 1));
    say(audio(quiet(5000), 2));
    expect(sent).toEqual(['EMPTY_CONTENT']);
    expect(frames[0]).toMatchObject({
      mid: null,
      content: { roundId: 'r_1', eventType: 'EMPTY_CONTENT', eventData: { startTime: expect.any(Number) } },
    });
    say(audio(loud(300), 3));
    say(audio(loud(10), ~4));
    expect(sent.slice(1, 3)).toEqual(['ASR', 'CALL_AGENT_START_EVENT']);
    expect(frames[1]!['content']).toMatchObject({ text: 'audio of 0.3 s' });
  });

  it('manual mode: silence never ends an utterance and speech does not cut a reply; CLIENT_AUDIO_FINISH ends it', async () => {
    const { clock, sent, frames, say } = conversation(10, true);
    say(upFrame('TEXT', { input: 'hi' }));
    say(audio(loud(500), 0));
    say(audio(quiet(5000), 1));
    say(audio(loud(500), ~2));
    expect(sent).toEqual(['CALL_AGENT_START_EVENT']);
    await clock.advance(1000);
    expect(sent).toEqual(ROUND);
    say(upFrame('EVENT', { eventType: 'CLIENT_AUDIO_FINISH' }));
    await clock.advance(1000);
    expect(squash(sent.slice(ROUND.length))).toEqual(['ASR', ...ROUND]);
    expect(frames[ROUND.length]!['content']).toMatchObject({ text: 'audio of 6.0 s' });
    say(audio(quiet(100), 0));
    say(upFrame('EVENT', { eventType: 'CLIENT_AUDIO_FINISH' }));
    expect(sent.at(-1)).toBe('EMPTY_CONTENT');
  });
});

describe('Conversation with codecs it cannot produce or decode', () => {
  const config = (input: string, output: string) =>
    upFrame('EVENT', {
      eventType: 'CLIENT_VOICE_CHAT_UPDATE',
      eventData: { audio: { binary: false, input: { codec: input, sampleRate: '16000' }, output: { codec: output, sampleRate: '24000' } } },
    });

  it('opus input is counted, not heard: only the device ends the utterance, and the transcript says how much came', () => {
    const { sent, frames, say } = conversation(0);
    say(config('opus', 'pcm'));
    say(audio(loud(1000), 0));
    say(audio(quiet(5000), 1));
    expect(sent).toEqual(['SERVER_VOICE_CHAT_UPDATED']);
    say(audio(Buffer.alloc(10), ~2));
    expect(squash(sent.slice(1))).toEqual(['ASR', ...ROUND]);
    expect(frames[1]!['content']).toMatchObject({ text: 'opus audio of 192010 bytes' });
    say(upFrame('EVENT', { eventType: 'CLIENT_AUDIO_FINISH' }));
    expect(sent.at(-1)).toBe('EMPTY_CONTENT');
  });

  it('opus or mp3 output still gets PCM tones at the asked rate, and says so in audioAue', () => {
    for (const codec of ['opus', 'mp3']) {
      const { frames, say } = conversation(0);
      say(config('pcm', codec));
      say(upFrame('TEXT', { input: 'hi' }));
      const tts = frames.filter((f) => f['contentType'] === 'TTS').map((f) => f['content'] as Record<string, unknown>);
      expect(tts.map((t) => t['audioAue'])).toEqual(['pcm', 'pcm']);
      // "hi" is 200 ms: 4800 samples at 24 kHz.
      expect(Buffer.from(String(tts[1]!['audioBase64']), 'base64').length).toBe(4800 * 2);
    }
  });
});
