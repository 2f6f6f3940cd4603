import { describe, expect, it } from 'vitest';
import {
  DEFAULT_SILENCE_MS,
  NO_SPEECH_MS,
  rmsOf,
  SPEECH_RMS,
  splitWindows,
  VAD_START,
  vadFinish,
  vadStep,
  windowBytes,
  type VadEvent,
  type VadSettings,
  type VadState,
} from '../../../src/service/conversation/vad.js';

/** 16 kHz: a 20 ms window is 320 samples; 600 ms of silence 9600; 3 s without speech 48000. */
const RATE = 16000;
const W = 320;
const FREE: VadSettings = { sampleRate: RATE, silenceMs: DEFAULT_SILENCE_MS, autoEnd: true };
const MANUAL: VadSettings = { ...FREE, autoEnd: false };
const quiet = (n: number): VadState => ({ phase: 'quiet', quiet: n, speech: 0, silence: 0 });
const speech = (s: number, silence = 0): VadState => ({ phase: 'speech', quiet: 0, speech: s, silence });
const IDLE: VadState = { phase: 'idle', quiet: 0, speech: 0, silence: 0 };
const LOUD = { samples: W, loud: true };
const SOFT = { samples: W, loud: false };

describe('vadStep', () => {
  const rows: [string, VadState, VadSettings, { samples: number; loud: boolean }, VadState, VadEvent | undefined][] = [
    ['listening, a loud window: speech starts', VAD_START, FREE, LOUD, speech(W), { kind: 'speech-start' }],
    ['idle, a loud window: speech starts', IDLE, FREE, LOUD, speech(W), { kind: 'speech-start' }],
    ['listening, a soft window: counted', quiet(W), FREE, SOFT, quiet(2 * W), undefined],
    ['listening, the soft window that reaches 3 s: silence only', quiet(48000 - W), FREE, SOFT, IDLE, { kind: 'empty' }],
    ['listening, one window short of 3 s', quiet(48000 - 2 * W), FREE, SOFT, quiet(48000 - W), undefined],
    ['manual mode never reports silence alone', quiet(48000 - W), MANUAL, SOFT, quiet(48000), undefined],
    ['idle, a soft window: nothing (silence is reported once)', IDLE, FREE, SOFT, IDLE, undefined],
    ['speech, a loud window: speech grows', speech(W), FREE, LOUD, speech(2 * W), undefined],
    ['speech, a soft window: silence counted, speech not', speech(W), FREE, SOFT, speech(W, W), undefined],
    ['speech after a pause: the pause is part of the speech', speech(W, 5 * W), FREE, LOUD, speech(7 * W), undefined],
    [
      'the silence that reaches 600 ms ends the utterance',
      speech(60 * W, 9600 - W),
      FREE,
      SOFT,
      IDLE,
      { kind: 'utterance', speechMs: 1200 },
    ],
    ['one window short of 600 ms', speech(60 * W, 9600 - 2 * W), FREE, SOFT, speech(60 * W, 9600 - W), undefined],
    ['manual mode: silence never ends an utterance', speech(W, 9600 - W), MANUAL, SOFT, speech(W, 9600), undefined],
    [
      'a shorter silence setting ends sooner',
      speech(W, 4 * W),
      { ...FREE, silenceMs: 100 },
      SOFT,
      IDLE,
      { kind: 'utterance', speechMs: 20 },
    ],
    [
      '24 kHz: the same 600 ms is 14400 samples',
      speech(24000, 14400 - 480),
      { ...FREE, sampleRate: 24000 },
      { samples: 480, loud: false },
      IDLE,
      { kind: 'utterance', speechMs: 1000 },
    ],
    ['a partial window counts its own samples', speech(W), FREE, { samples: 100, loud: true }, speech(W + 100), undefined],
  ];
  it.each(rows)('%s', (_name, state, settings, window, next, event) => {
    const got = vadStep(state, settings, window);
    expect(got.state).toEqual(next);
    expect(got.event).toEqual(event);
  });

  it('a tone of 1.2 s then silence, window by window: speech-start, then the utterance 600 ms into the silence', () => {
    let state = VAD_START;
    const events: [number, VadEvent][] = [];
    const windows = [...Array(60).fill(true), ...Array(40).fill(false)] as boolean[];
    windows.forEach((loud, i) => {
      const step = vadStep(state, FREE, { samples: W, loud });
      state = step.state;
      if (step.event) events.push([i, step.event]);
    });
    expect(events).toEqual([
      [0, { kind: 'speech-start' }],
      [89, { kind: 'utterance', speechMs: 1200 }],
    ]);
    expect(NO_SPEECH_MS).toBe(3000);
  });
});

describe('vadFinish', () => {
  const rows: [string, VadState, VadEvent][] = [
    ['in speech: the utterance, its speech so far', speech(16000, 3200), { kind: 'utterance', speechMs: 1000 }],
    ['listening, no speech: silence only', quiet(5 * W), { kind: 'empty' }],
    ['nothing heard at all: silence only', VAD_START, { kind: 'empty' }],
    ['idle: silence only', IDLE, { kind: 'empty' }],
  ];
  it.each(rows)('%s', (_name, state, event) => {
    expect(vadFinish(state, RATE)).toEqual({ state: IDLE, event });
  });
});

function pcm(samples: number[]): Buffer {
  const b = Buffer.alloc(samples.length * 2);
  samples.forEach((s, i) => {
    b.writeInt16LE(s, i * 2);
  });
  return b;
}

describe('rmsOf and windows', () => {
  const rows: [string, Buffer, number][] = [
    ['silence', pcm([0, 0, 0, 0]), 0],
    ['a square wave of ±1000', pcm([1000, -1000, 1000, -1000]), 1000],
    ['3 and 4 → 3.54', pcm([3, 4]), Math.sqrt(12.5)],
    ['no samples', Buffer.alloc(0), 0],
    ['a trailing odd byte is no sample', Buffer.concat([pcm([600]), Buffer.from([0x7f])]), 600],
  ];
  it.each(rows)('rmsOf: %s', (_name, buf, want) => {
    expect(rmsOf(buf)).toBeCloseTo(want, 6);
  });

  it('the threshold sits between a quiet room and a voice', () => {
    expect(rmsOf(pcm([SPEECH_RMS, -SPEECH_RMS]))).toBe(SPEECH_RMS);
    expect(SPEECH_RMS).toBe(500);
  });

  it('windowBytes: 20 ms of 16-bit mono at each input rate', () => {
    expect([16000, 24000, 32000].map(windowBytes)).toEqual([640, 960, 1280]);
  });

  it('splitWindows carries what does not fill a window into the next chunk', () => {
    const first = splitWindows(Buffer.alloc(0), Buffer.alloc(1000, 1), 640);
    expect(first.windows.map((w) => w.length)).toEqual([640]);
    expect(first.rest.length).toBe(360);
    const second = splitWindows(first.rest, Buffer.alloc(920, 2), 640);
    expect(second.windows.map((w) => w.length)).toEqual([640, 640]);
    expect(second.rest.length).toBe(0);
    expect([...second.windows[0]!.subarray(358, 362)]).toEqual([1, 1, 2, 2]);
  });
});
