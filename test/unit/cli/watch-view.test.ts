import { describe, expect, it } from 'vitest';
import { wantsAudio } from '../../../src/agent/local/observers.js';
import { type OpenRounds, type WatchEvent, watchFrame, watchLine, watchLinkState } from '../../../src/cli/app/watch-view.js';
import { DOWN, downText } from '../../helpers/guide-frames.js';

const ev = (eventType: string, roundId: string, eventData: unknown = {}) => ({
  code: 200,
  contentType: 'EVENT',
  content: { roundId, eventType, eventData },
});
const agent = (roundId: string, content: string) => ({ code: 200, contentType: 'AGENT', content: { roundId, role: 'assistant', content } });

/** Frames fed in order, and every event they tell. */
function feed(frames: unknown[], open: OpenRounds = new Map()): { open: OpenRounds; events: WatchEvent[] } {
  const events: WatchEvent[] = [];
  for (const frame of frames) {
    const step = watchFrame(open, frame);
    open = step.open;
    events.push(...step.events);
  }
  return { open, events };
}

describe('watchFrame: what a technician is told of the cloud frames', () => {
  const table: [name: string, frames: unknown[], events: WatchEvent[]][] = [
    [
      'a round: its input, then the reply whole at COMPLETE; TTS and TTS_COMPLETE quiet',
      [
        ev('CALL_AGENT_START_EVENT', 'r1', { input: 'hi' }),
        agent('r1', 'you said: '),
        { contentType: 'TTS', content: { roundId: 'r1', audioBase64: 'AAA=' } },
        agent('r1', 'hi'),
        ev('TTS_SENTENCE_START', 'r1', { text: 'you said: hi' }),
        ev('TTS_COMPLETE', 'r1'),
        ev('COMPLETE', 'r1'),
      ],
      [
        { type: 'input', roundId: 'r1', text: 'hi' },
        { type: 'reply', roundId: 'r1', text: 'you said: hi' },
      ],
    ],
    [
      'a cut reply says what was said before the cut',
      [ev('CALL_AGENT_START_EVENT', 'r2', { input: 'story' }), agent('r2', 'Once'), ev('CALL_AGENT_INTERRUPTED', 'r2')],
      [
        { type: 'input', roundId: 'r2', text: 'story' },
        { type: 'cut', roundId: 'r2', text: 'Once' },
      ],
    ],
    [
      'final ASR only; empty and refused rounds',
      [
        { contentType: 'ASR', content: { text: 'hel', textType: 'PARTIAL' } },
        { contentType: 'ASR', content: { text: 'hello', textType: 'IS_FINAL' } },
        ev('EMPTY_CONTENT', 'r3'),
        { contentType: 'EVENT', content: { eventType: 'USER_AUDIT_FAIL', roundId: 'r4' } },
      ],
      [
        { type: 'heard', text: 'hello' },
        { type: 'empty', roundId: 'r3' },
        { type: 'refused', roundId: 'r4' },
      ],
    ],
    [
      'skills, custom events and the greeting are events with their data; activityType names one too',
      [
        ev('CALL_SKILL_EVENT', 'r5', { msg: 'volume', data: { args: { level: 3 } } }),
        ev('CFG_BOT_EVENT', ''),
        { contentType: 'EVENT', content: { roundId: 'r6', activityType: 'CLIENT_CHAT_CONTEXT_RECEIVED', activityData: {} } },
      ],
      [
        { type: 'event', eventType: 'CALL_SKILL_EVENT', roundId: 'r5', eventData: { msg: 'volume', data: { args: { level: 3 } } } },
        { type: 'event', eventType: 'CFG_BOT_EVENT', roundId: '', eventData: {} },
        { type: 'event', eventType: 'CLIENT_CHAT_CONTEXT_RECEIVED', roundId: 'r6', eventData: {} },
      ],
    ],
    [
      'errors, the voice config, proactive text; PONG and garbage say nothing',
      [
        { code: 400, msg: 'audio binary not support.' },
        { code: 200, contentType: 'EVENT', content: { eventType: 'SERVER_VOICE_CHAT_UPDATED', eventData: {} } },
        { code: 200, contentType: 'ACTIVITY', content: { roundId: 'r7', content: 'Still there?' } },
        { code: 200, contentType: 'PONG' },
        'not an object',
      ],
      [
        { type: 'error', code: 400, msg: 'audio binary not support.' },
        { type: 'voice-config' },
        { type: 'proactive', text: 'Still there?' },
      ],
    ],
  ];
  it.each(table)('%s', (_name, frames, events) => {
    expect(feed(frames).events).toEqual(events);
  });

  it('a round open when the link leaves connected is told lost, before the state', () => {
    const { open } = feed([ev('CALL_AGENT_START_EVENT', 'r8', { input: 'x' }), agent('r8', 'half')]);
    expect(watchLinkState(open, { state: 'connected', sessionId: null }).events).toEqual([{ type: 'link', state: 'connected' }]);
    const down = watchLinkState(open, { state: 'backoff', sessionId: null, retryInMs: 1500 });
    expect(down.events).toEqual([
      { type: 'lost', roundId: 'r8', text: 'half' },
      { type: 'link', state: 'backoff', retryInMs: 1500 },
    ]);
    expect(down.open.size).toBe(0);
  });

  it('holds at most 16 rounds the cloud never ends', () => {
    const starts = Array.from({ length: 40 }, (_, i) => ev('CALL_AGENT_START_EVENT', `r${i}`, { input: '' }));
    expect(feed(starts).open.size).toBe(16);
  });
});

describe('watchFrame: every down frame of DESIGN §1.7 in the guide shapes (test/fixtures/conversation/down.json)', () => {
  const R = 'a4595acb-de6c-4ac9-92b2-8fa59a7f91f7_2';
  const dataOf = (name: string): unknown => (DOWN[name]!['content'] as Record<string, unknown>)['eventData'];
  const table: [name: string, events: WatchEvent[]][] = [
    ['CFG_BOT_EVENT', [{ type: 'event', eventType: 'CFG_BOT_EVENT', roundId: '', eventData: dataOf('CFG_BOT_EVENT') }]],
    ['SERVER_VOICE_CHAT_UPDATED', [{ type: 'voice-config' }]],
    ['PONG', []],
    ['ASR', [{ type: 'heard', text: 'tell me a story' }]],
    ['CALL_AGENT_START_EVENT', [{ type: 'input', roundId: '08ddd338-fd5b-4572-b03a-43974dc145db_222726_1', text: 'tell me a story' }]],
    ['EMPTY_CONTENT', [{ type: 'empty', roundId: 'a4595acb-de6c-4ac9-92b2-8fa59a7f91f7_1' }]],
    ['AGENT', []],
    ['AGENT_LAST', []],
    ['TTS', []],
    ['TTS_COMPLETE', []],
    ['COMPLETE', [{ type: 'reply', roundId: R, text: '' }]],
    ['CALL_AGENT_INTERRUPTED', [{ type: 'cut', roundId: R, text: '' }]],
    ['ACTIVITY', [{ type: 'proactive', text: 'Good morning! ' }]],
    [
      'CLIENT_CHAT_CONTEXT_RECEIVED',
      [{ type: 'event', eventType: 'CLIENT_CHAT_CONTEXT_RECEIVED', roundId: 'a4595acb-de6c-4ac9-92b2-8fa59a7f91f7_5', eventData: {} }],
    ],
    ['CALL_SKILL_EVENT', [{ type: 'event', eventType: 'CALL_SKILL_EVENT', roundId: '0_1', eventData: dataOf('CALL_SKILL_EVENT') }]],
    [
      'CUSTOM_EVENT',
      [
        {
          type: 'event',
          eventType: 'MY_CUSTOM_COMMAND',
          roundId: 'd45ed439-3fab-4b0d-a6ab-a4662e505d96_141008_7',
          eventData: dataOf('CUSTOM_EVENT'),
        },
      ],
    ],
    ['TTS_SENTENCE_START', []],
    ['INTERRUPT', [{ type: 'cut', roundId: R, text: '' }]],
    ['USER_AUDIT_FAIL', [{ type: 'refused', roundId: 'a4595acb-de6c-4ac9-92b2-8fa59a7f91f7_6' }]],
    ['REPEAT_CLIENT_SESSION', [{ type: 'event', eventType: 'REPEAT_CLIENT_SESSION', roundId: '', eventData: {} }]],
    ['AUDIO_BINARY_NOT_SUPPORTED', [{ type: 'error', code: 400, msg: 'audio binary not support.' }]],
  ];

  it('the table covers every fixture', () => {
    expect(table.map(([name]) => name).sort()).toEqual(Object.keys(DOWN).sort());
  });

  it.each(table)('%s', (name, events) => {
    expect(watchFrame(new Map(), JSON.parse(downText(name))).events).toEqual(events);
  });

  it('a round in the guide frames: the reply is content.content of its AGENT pieces, said whole at COMPLETE', () => {
    const frames = ['CALL_AGENT_START_EVENT', 'AGENT', 'TTS', 'AGENT_LAST', 'TTS_COMPLETE', 'COMPLETE'].map((name) =>
      JSON.parse(downText(name, { content: { roundId: R } })),
    );
    expect(feed(frames).events).toEqual([
      { type: 'input', roundId: R, text: 'tell me a story' },
      { type: 'reply', roundId: R, text: 'Hey! Hello there, how can I help?' },
    ]);
  });
});

describe('watchLine', () => {
  const at = new Date(2026, 0, 2, 3, 4, 5, 67).getTime();
  const table: [WatchEvent, string][] = [
    [{ type: 'link', state: 'backoff', retryInMs: 2500, sessionId: 's1' }, '03:04:05.067 link backoff, retry in 2.5 s (session s1)'],
    [{ type: 'reply', roundId: 'r1', text: 'you said: hi' }, '03:04:05.067 reply [r1]: you said: hi'],
    [{ type: 'event', eventType: 'CALL_SKILL_EVENT', roundId: '', eventData: { a: 1 } }, '03:04:05.067 event CALL_SKILL_EVENT {"a":1}'],
    // What the cloud or an app sent, escaped: a title and a clear, a C1 CSI, a right-to-left override, a forged line.
    [
      { type: 'link', state: 'connected', sessionId: 'x\x1b]0;PWNED\x07\x1b[2J' },
      '03:04:05.067 link connected (session x\\x1b]0;PWNED\\x07\\x1b[2J)',
    ],
    [
      { type: 'input', roundId: 'r\u009b2J', text: 'abc\u202etxt\n03:04:05.068 link stopped' },
      '03:04:05.067 input [r\\x9b2J]: abc\\u202etxt\\x0a03:04:05.068 link stopped',
    ],
    [{ type: 'error', code: 500, msg: '\x1b]52;c;ZWNobw==\x07' }, '03:04:05.067 error 500: \\x1b]52;c;ZWNobw==\\x07'],
  ];
  it.each(table)('%j in words', (event, line) => expect(watchLine(event, at, false)).toBe(line));

  it('--json: the event with its time, one line that parses', () => {
    const line = watchLine({ type: 'heard', text: 'hello' }, at, true);
    expect(JSON.parse(line)).toEqual({ at: new Date(at).toISOString(), type: 'heard', text: 'hello' });
  });

  it('--json: C1 and bidi controls as \\u escapes, the text the same once parsed', () => {
    const line = watchLine({ type: 'reply', roundId: 'r1', text: '\u009b2J\u202e' }, at, true);
    expect(line).toContain('"text":"\\u009b2J\\u202e"');
    expect(JSON.parse(line)).toMatchObject({ text: '\u009b2J\u202e' });
  });
});

describe('wantsAudio', () => {
  it.each([
    ['/v1/observe?audio=1', true],
    ['/v1/observe?audio=0', false],
    ['/v1/observe?audio=true', false],
    ['/v1/observe', false],
    [undefined, false],
  ] as const)('%s → %s', (url, wanted) => expect(wantsAudio(url)).toBe(wanted));
});
