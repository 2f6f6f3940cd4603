import { afterEach, expect } from 'vitest';
import { createTestService, type TestService, type TestServiceOptions } from '../../src/service/testing.js';
import { ConversationClient, contentOf, isContent, isEvent, type Frame } from './conversation-client.js';
import { DOWN, shapeDifferences } from './guide-frames.js';
import { getTokens } from './service-client.js';

const seed = { accounts: [{ accessKeyId: 'AK', secretKey: 'SK', vendors: [{ vendorId: 'V1', bots: ['bot-1', 'bot-2'] }] }] };

export interface ConversationRig {
  svc: TestService;
  connect(botId?: string, params?: Record<string, string>): Promise<ConversationClient>;
}

/** Registers the file's afterEach; `rig()` starts a reference service (no internal errors allowed) and opens clients to it. */
export function useConversationRig(): (opts?: TestServiceOptions) => Promise<ConversationRig> {
  const cleanups: (() => unknown)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });
  return async (opts = {}) => {
    const svc = await createTestService({ seed, ...opts });
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
  };
}

/** A frame's kind: the eventType of an EVENT (activityType when it has none), else its contentType; runs of TTS or binary as one. */
export function kinds(frames: Frame[]): string[] {
  const all = frames.map((f) => {
    if (f.binary) return 'binary';
    const type = String(f.json?.['contentType']);
    if (type !== 'EVENT') return type;
    const c = contentOf(f);
    return String(c['eventType'] ?? c['activityType']);
  });
  return all.filter((k, i) => !((k === 'TTS' || k === 'binary') && all[i - 1] === k));
}

/** The voice config of the guide's shape, as an up frame. */
export function voiceConfig(audio: {
  binary: boolean;
  input?: Record<string, unknown>;
  output?: Record<string, unknown>;
}): Record<string, unknown> {
  const { binary, input = { codec: 'pcm', sampleRate: '16000' }, output = { codec: 'pcm', sampleRate: '16000' } } = audio;
  return {
    mid: 'cfg',
    contentType: 'EVENT',
    content: { eventType: 'CLIENT_VOICE_CHAT_UPDATE', eventData: { audio: { binary, input, output } } },
  };
}

export const event = (eventType: string, eventData?: Record<string, unknown>) => ({
  contentType: 'EVENT',
  content: { eventType, ...(eventData && { eventData }) },
});
export const text = (input: string) => ({ mid: `m-${input}`, contentType: 'TEXT', content: { input } });
export const audioFrame = (pcm: Buffer, index: number) => ({
  contentType: 'AUDIO',
  content: { audioBase64: pcm.toString('base64'), index },
});
export const AUDIO_BINARY_REFUSAL = '{"code":400,"msg":"audio binary not support."}';

/** A reply's speech and the round's end, as kinds() gives them: each of its two sentences announced, then spoken. */
export const SPOKEN_REPLY = ['TTS_SENTENCE_START', 'TTS', 'TTS_SENTENCE_START', 'TTS', 'TTS_COMPLETE', 'COMPLETE'];

/** A reply round's kinds (kinds() merges each run of TTS frames). */
export const ROUND = ['CALL_AGENT_START_EVENT', 'AGENT', 'AGENT', ...SPOKEN_REPLY];

/** Waits for the answer to a voice config, so later frames are read in its mode. */
export async function configure(
  client: ConversationClient,
  binary: boolean,
  formats: { input?: Record<string, unknown>; output?: Record<string, unknown> } = {},
): Promise<Frame> {
  const from = client.frames.length;
  client.send(voiceConfig({ binary, ...formats }));
  return client.frames[await client.indexOf(isEvent('SERVER_VOICE_CHAT_UPDATED'), from)]!;
}

/** The fixture a round's frame is checked against. */
function fixtureOf(f: Frame): Record<string, unknown> {
  const c = contentOf(f);
  if (f.json?.['contentType'] === 'ACTIVITY') return DOWN['ACTIVITY']!;
  if (f.json?.['contentType'] === 'AGENT') return c['finishReason'] === '' ? DOWN['AGENT']! : DOWN['AGENT_LAST']!;
  if (f.json?.['contentType'] !== 'EVENT') return DOWN[String(f.json?.['contentType'])]!;
  return DOWN[String(c['eventType'])]!;
}

/** A finished round checked against the guide: each frame's shape, one roundId (also its mid); its reply text and audio. */
export function readRound(frames: Frame[]): { reply: string; audioMs: number; audioBytes: number; roundId: unknown } {
  const jsonFrames = frames.filter((f) => !f.binary && f.json?.['contentType'] !== 'ASR');
  const roundId = contentOf(jsonFrames[0]!)['roundId'];
  expect(roundId).toMatch(/^\S+_\d+$/);
  for (const f of frames.filter((x) => !x.binary)) {
    expect(shapeDifferences(f.json, fixtureOf(f)), JSON.stringify(f.json).slice(0, 200)).toEqual([]);
    expect(f.json!['mid']).toBe(roundId);
  }
  for (const f of jsonFrames) expect(contentOf(f)['roundId']).toBe(roundId);
  const agent = frames.filter((f) => isContent('AGENT')(f) || isContent('ACTIVITY')(f)).map((f) => contentOf(f));
  expect(agent.map((a) => a['finishReason'])).toEqual(agent.map((_, i) => (i === agent.length - 1 ? 'stop' : '')));
  const tts = frames.filter(isContent('TTS')).map((f) => contentOf(f));
  expect(tts.map((t) => t['finish'])).toEqual(tts.map((_, i) => i === tts.length - 1));
  const pcm = [...frames.filter((f) => f.binary).map((f) => f.data), ...tts.map((t) => Buffer.from(String(t['audioBase64']), 'base64'))];
  return {
    reply: agent.map((a) => a['content']).join(''),
    audioMs: tts.reduce((ms, t) => ms + (t['audioDuration'] as number), 0),
    audioBytes: pcm.reduce((n, b) => n + b.length, 0),
    roundId,
  };
}
