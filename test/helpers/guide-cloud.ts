import type { RawData } from 'ws';
import { DOWN, downText } from './guide-frames.js';
import { rawWsServer } from './ws-peers.js';

/** The roundId of the scripted cloud's rounds: the fixtures' own ids differ from frame to frame. */
export const ROUND = 'a4595acb-de6c-4ac9-92b2-8fa59a7f91f7_2';
/** The reply of a completed round: the fixtures' two AGENT pieces. */
export const REPLY = `${(DOWN['AGENT']!['content'] as { content: string }).content}${(DOWN['AGENT_LAST']!['content'] as { content: string }).content}`;
/** What the scripted cloud "hears" in speech: the fixture ASR's text. */
export const HEARD = (DOWN['ASR']!['content'] as { text: string }).text;

/** How the scripted cloud answers a turn. */
export type Answer = 'complete' | 'empty' | 'interrupted' | 'interrupt' | 'audit-fail' | 'error' | 'nothing';

/** `ms` of a 16-bit mono sine at `hz`, amplitude `amp` (0..1): real sound, for input and for TTS. */
export function tone(sampleRate: number, ms: number, hz = 440, amp = 0.3): Buffer {
  const n = Math.round((sampleRate * ms) / 1000);
  const pcm = Buffer.alloc(n * 2);
  for (let i = 0; i < n; i++) pcm.writeInt16LE(Math.round(amp * 32767 * Math.sin((2 * Math.PI * hz * i) / sampleRate)), i * 2);
  return pcm;
}

const round = (name: string, patch: Record<string, unknown> = {}): string => downText(name, { content: { roundId: ROUND, ...patch } });

/**
 * The frames of one answer, exactly the fixtures' shapes: a completed round carries on it every frame an
 * app must pass over (roundId "", PONG without content, other rounds, unknown events and fields).
 * `binaryTts`: the TTS audio as binary frames instead, with one binary frame before the round.
 */
export function answerFrames(answer: Answer, tts: Buffer[], binaryTts = false): (string | Buffer)[] {
  const start = round('CALL_AGENT_START_EVENT');
  switch (answer) {
    case 'nothing':
      return [];
    case 'empty':
      return [downText('EMPTY_CONTENT')];
    case 'audit-fail':
      return [JSON.stringify({ ...DOWN['USER_AUDIT_FAIL'], content: { eventType: 'USER_AUDIT_FAIL' } })];
    case 'error':
      return [downText('AUDIO_BINARY_NOT_SUPPORTED')];
    case 'interrupted':
      return [start, round('AGENT'), round('CALL_AGENT_INTERRUPTED')];
    case 'interrupt':
      return [start, round('AGENT'), round('INTERRUPT')];
    case 'complete':
      return [
        downText('COMPLETE', { content: { roundId: '' } }), // roundId "" ends nothing
        ...(binaryTts ? [Buffer.from('audio of no round of ours')] : []),
        start,
        round('TTS_SENTENCE_START'),
        downText('PONG'),
        round('AGENT', { newField: { nested: true } }),
        downText('AGENT', { content: { roundId: 'another_9', content: 'NOT OURS ' } }),
        round('CUSTOM_EVENT'),
        round('CALL_SKILL_EVENT'),
        ...tts.map((pcm, i) => (binaryTts ? pcm : round('TTS', { audioBase64: pcm.toString('base64'), finish: i === tts.length - 1 }))),
        downText('ACTIVITY'),
        downText('CLIENT_CHAT_CONTEXT_RECEIVED'),
        round('COMPLETE', { eventType: 'SOMETHING_NEW_FROM_THE_CLOUD' }),
        JSON.stringify({ code: 200, msg: 'Event success', contentType: 'HOLOGRAM', content: { roundId: ROUND } }),
        downText('EMPTY_CONTENT', { content: { roundId: 'another_10' } }), // another utterance's: not ours
        round('AGENT_LAST'),
        round('TTS_COMPLETE'),
        round('COMPLETE'),
      ];
  }
}

/** An up frame as the scripted cloud got it, with its arrival on the monotonic clock. */
export interface Received {
  frame: Record<string, unknown>;
  at: number;
}

/**
 * A cloud on 127.0.0.1 that speaks exactly the fixture frames of DESIGN §1.7: the guide's greeting
 * (roundId ""), PONG, SERVER_VOICE_CHAT_UPDATED, and `answer` to a TEXT, or to free-mode audio once a
 * crude VAD hears speech then 600 ms of silence (with the fixture's ASR first).
 */
export async function guideCloud() {
  const peer = await rawWsServer();
  const received: Received[] = [];
  const state = { answer: 'complete' as Answer, tts: [tone(16000, 400, 660), tone(16000, 300, 880)], binaryTts: false };
  peer.wss.on('connection', (ws) => {
    let speech = false;
    let quiet = 0;
    const send = (frames: (string | Buffer)[]): void => {
      for (const f of frames) ws.send(f);
    };
    ws.on('message', (data: RawData, isBinary: boolean) => {
      if (isBinary) return;
      const frame = JSON.parse(data.toString()) as Record<string, unknown>;
      received.push({ frame, at: performance.now() });
      const content = (frame['content'] ?? {}) as Record<string, unknown>;
      if (frame['contentType'] === 'PING') send([downText('PONG')]);
      else if (frame['contentType'] === 'TEXT') send(answerFrames(state.answer, state.tts, state.binaryTts));
      else if (content['eventType'] === 'CLIENT_VOICE_CHAT_UPDATE')
        send([downText('SERVER_VOICE_CHAT_UPDATED', { mid: frame['mid'], content: { eventData: content['eventData'] } })]);
      else if (frame['contentType'] === 'AUDIO') {
        const loud = rms(Buffer.from(String(content['audioBase64']), 'base64')) > 1000;
        if (loud) [speech, quiet] = [true, 0];
        else if (speech && ++quiet === 6) {
          speech = false;
          send([downText('ASR'), ...answerFrames(state.answer, state.tts, state.binaryTts)]);
        }
      }
    });
    ws.send(downText('CFG_BOT_EVENT'));
  });
  return Object.assign(state, { url: peer.url, received, close: peer.close });
}

function rms(pcm: Buffer): number {
  let sum = 0;
  for (let i = 0; i + 1 < pcm.length; i += 2) sum += pcm.readInt16LE(i) ** 2;
  return Math.sqrt(sum / Math.max(1, pcm.length / 2));
}
