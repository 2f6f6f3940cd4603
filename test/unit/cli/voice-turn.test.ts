import { describe, expect, it } from 'vitest';
import { audioFrame, FRAME_MS, streamAudio, voiceConfig } from '../../../src/cli/app/voice-turn.js';
import { shapeDifferences, UP } from '../../helpers/guide-frames.js';
import { ManualClock } from '../../helpers/manual-clock.js';

describe('audioFrame: the file, then silence', () => {
  const pcm = Buffer.from([1, 2, 3, 4, 5, 6, 7]);
  it.each([
    [0, [1, 2, 3]],
    [1, [4, 5, 6]],
    [2, [7, 0, 0]], // the last audio frame padded with silence: every frame is a full one
    [3, [0, 0, 0]],
    [99, [0, 0, 0]],
  ])('frame %i', (i, bytes) => {
    expect([...audioFrame(pcm, i, 3)]).toEqual(bytes);
  });
});

describe('voiceConfig', () => {
  it.each([16000, 24000, 32000])('PCM in and out at %i Hz, base64 AUDIO frames: the guide shape', (rate) => {
    const frame = voiceConfig(rate) as { content: { eventData: { audio: Record<string, unknown> } } };
    expect(shapeDifferences(frame, UP['CLIENT_VOICE_CHAT_UPDATE_PCM_TEXT'])).toEqual([]);
    expect(frame.content.eventData.audio).toEqual({
      binary: false,
      input: { codec: 'pcm', sampleRate: String(rate) },
      output: { codec: 'pcm', sampleRate: String(rate) },
    });
  });
});

describe('streamAudio: paced by the clock, until stopped', () => {
  it('one frame every FRAME_MS from the first, on deadlines, then silence until stop; guide-shaped AUDIO frames', async () => {
    const clock = new ManualClock();
    const sent: { at: number; frame: { content: { audioBase64: string; index: number } } }[] = [];
    const client = { closed: undefined, send: (f: object) => void sent.push({ at: clock.monoNow(), frame: f as never }) };
    const rate = 16000;
    const frameBytes = (rate * 2 * FRAME_MS) / 1000;
    const pcm = Buffer.alloc(frameBytes * 2.5, 1);
    const stop = new AbortController();
    const t0 = clock.monoNow();
    const streamed = streamAudio(client, pcm, rate, clock, stop.signal);
    await clock.advance(FRAME_MS * 5 + 30);
    stop.abort();
    expect(await streamed).toBe(6);
    expect(sent.map((s) => s.at - t0)).toEqual([0, 100, 200, 300, 400, 500]);
    expect(sent.map((s) => s.frame.content.index)).toEqual([0, 1, 2, 3, 4, 5]);
    for (const s of sent) expect(shapeDifferences(s.frame, UP['AUDIO'])).toEqual([]);
    const bytes = sent.map((s) => Buffer.from(s.frame.content.audioBase64, 'base64'));
    expect(bytes.every((b) => b.length === frameBytes)).toBe(true);
    expect(Buffer.concat(bytes).subarray(0, pcm.length).equals(pcm)).toBe(true);
    expect(
      Buffer.concat(bytes)
        .subarray(pcm.length)
        .every((b) => b === 0),
    ).toBe(true);
  });

  it('stops once the relay is closed', async () => {
    const clock = new ManualClock();
    const client: { closed: { code: number; reason: string } | undefined; send: () => void } = { closed: undefined, send: () => undefined };
    const streamed = streamAudio(client, Buffer.alloc(0), 16000, clock, new AbortController().signal);
    await clock.advance(250);
    client.closed = { code: 1001, reason: '' };
    await clock.advance(100);
    expect(await streamed).toBe(3); // frames at 0, 100 and 200 ms; none at 300
  });
});
