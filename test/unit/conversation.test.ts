import { describe, expect, it } from 'vitest';
import { downFrame, isConversationEvent, parseUpFrame, upFrame, voiceConfigAudio } from '../../src/protocol/conversation.js';
import { replyTo, roundSteps } from '../../src/service/conversation/round.js';
import { Conversation } from '../../src/service/conversation/session.js';
import { ManualClock } from '../helpers/manual-clock.js';

describe('protocol/conversation', () => {
  it('downFrame keeps the envelope’s key order; upFrame leaves out an absent mid', () => {
    const down = JSON.parse(downFrame({ requestId: 'r', mid: 'm', contentType: 'PONG', content: {}, t: 5 })) as object;
    expect(Object.entries(down)).toEqual([
      ['code', 200],
      ['msg', 'success'],
      ['requestId', 'r'],
      ['mid', 'm'],
      ['contentType', 'PONG'],
      ['content', {}],
      ['t', 5],
    ]);
    expect(upFrame('PING', {})).toBe('{"contentType":"PING","content":{}}');
    expect(upFrame('TEXT', { input: 'x' }, 'm1')).toBe('{"mid":"m1","contentType":"TEXT","content":{"input":"x"}}');
  });

  it('parseUpFrame reads a frame without content as empty content', () => {
    expect(parseUpFrame('{"contentType":"PING"}')).toEqual({ ok: true, frame: { mid: undefined, contentType: 'PING', content: {} } });
  });

  it('isConversationEvent tells the voice config and the greeting from chat that merely names them', () => {
    const cfg = Buffer.from(upFrame('EVENT', { eventType: 'CLIENT_VOICE_CHAT_UPDATE', eventData: { audio: {} } }));
    const chat = Buffer.from(upFrame('TEXT', { input: 'what is CLIENT_VOICE_CHAT_UPDATE?' }));
    expect(isConversationEvent(cfg, 'CLIENT_VOICE_CHAT_UPDATE')).toBe(true);
    expect(isConversationEvent(cfg, 'CFG_BOT_EVENT')).toBe(false);
    expect(isConversationEvent(chat, 'CLIENT_VOICE_CHAT_UPDATE')).toBe(false);
    expect(isConversationEvent(Buffer.from('{"CFG_BOT_EVENT"'), 'CFG_BOT_EVENT')).toBe(false);
  });

  it('voiceConfigAudio: binary only when audio.binary is true', () => {
    expect(voiceConfigAudio({ audio: { binary: true } })).toEqual({ binary: true });
    expect(voiceConfigAudio({ audio: { binary: 'yes' } })).toEqual({ binary: false });
    expect(voiceConfigAudio({ audio: null })).toBeUndefined();
    expect(voiceConfigAudio(undefined)).toBeUndefined();
  });
});

describe('a round’s frames', () => {
  it('the reply is "you said: <input>", in two AGENT pieces whose bytes are the TTS audio', () => {
    expect(replyTo('x')).toBe('you said: x');
    const steps = roundSteps({ roundId: 'R', input: 'x', fromAudio: true, binaryAudio: true });
    expect(steps).toEqual([
      { contentType: 'ASR', content: { roundId: 'R', text: 'x' } },
      { contentType: 'EVENT', content: { eventType: 'CALL_AGENT_START_EVENT', eventData: {}, roundId: 'R' } },
      { contentType: 'AGENT', content: { roundId: 'R', text: 'you said: ' } },
      { contentType: 'AGENT', content: { roundId: 'R', text: 'x' } },
      { binaryAudio: Buffer.from('you said: ') },
      { binaryAudio: Buffer.from('x') },
      { contentType: 'EVENT', content: { eventType: 'TTS_COMPLETE', eventData: {}, roundId: 'R' } },
      { contentType: 'EVENT', content: { eventType: 'COMPLETE', eventData: {}, roundId: 'R' } },
    ]);
  });
});

/** A Conversation on a ManualClock whose sent frames are recorded as kinds. */
function conversation(roundDelayMs: number) {
  const clock = new ManualClock();
  const sent: string[] = [];
  const c = new Conversation({
    requestId: 'r',
    now: () => clock.wallNow(),
    roundDelayMs,
    setTimer: (ms, fn) => clock.setTimer(ms, fn),
    send: (data, binary) => {
      if (binary) return sent.push('binary');
      const f = JSON.parse(String(data)) as { contentType?: string; content?: { eventType?: string } };
      sent.push(f.contentType === 'EVENT' ? String(f.content?.eventType) : String(f.contentType ?? 'error'));
    },
    onVoiceConfig: () => undefined,
  });
  const say = (frame: string): void => c.receive(Buffer.from(frame), false);
  return { clock, sent, c, say };
}

const ROUND = ['CALL_AGENT_START_EVENT', 'AGENT', 'AGENT', 'TTS', 'TTS', 'TTS_COMPLETE', 'COMPLETE'];

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
    await clock.advance(50);
    expect(sent).toEqual(ROUND);
    expect(clock.pending()).toEqual([]);
  });

  it('roundDelayMs 0 sends the whole round at once, with no timer', () => {
    const { clock, sent, say } = conversation(0);
    say(upFrame('TEXT', { input: 'hi' }));
    expect(sent).toEqual(ROUND);
    expect(clock.pending()).toEqual([]);
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
