import { describe, expect, it } from 'vitest';
import { describeWav, readWav, voiceInputProblem, wavFile } from '../../../src/cli/app/wav.js';

/** A WAV header with a `fmt ` chunk of the given fields, then `chunks` as they are. */
function wav(f: { format?: number; channels?: number; rate?: number; bits?: number }, ...chunks: Buffer[]): Buffer {
  const fmt = Buffer.alloc(24);
  fmt.write('fmt ', 0, 'latin1');
  fmt.writeUInt32LE(16, 4);
  fmt.writeUInt16LE(f.format ?? 1, 8);
  fmt.writeUInt16LE(f.channels ?? 1, 10);
  fmt.writeUInt32LE(f.rate ?? 16000, 12);
  fmt.writeUInt16LE(f.bits ?? 16, 22);
  const body = Buffer.concat([Buffer.from('WAVE', 'latin1'), fmt, ...chunks]);
  const head = Buffer.alloc(8);
  head.write('RIFF', 0, 'latin1');
  head.writeUInt32LE(body.length, 4);
  return Buffer.concat([head, body]);
}

function chunk(id: string, body: Buffer, announced = body.length): Buffer {
  const head = Buffer.alloc(8);
  head.write(id, 0, 'latin1');
  head.writeUInt32LE(announced, 4);
  return Buffer.concat([head, body, Buffer.alloc(body.length % 2)]);
}

const samples = Buffer.from([1, 0, 2, 0, 3, 0]);

describe('readWav', () => {
  it('reads back what wavFile writes', () => {
    expect(readWav(wavFile(samples, 24000))).toEqual({
      ok: true,
      wav: { format: 1, channels: 1, sampleRate: 24000, bitsPerSample: 16, data: samples },
    });
  });

  it('skips chunks it does not know (LIST, an odd-sized one padded to even) before the data', () => {
    const read = readWav(wav({}, chunk('LIST', Buffer.from('INFOabc')), chunk('fact', Buffer.alloc(4)), chunk('data', samples)));
    expect(read).toMatchObject({ ok: true, wav: { sampleRate: 16000, data: samples } });
  });

  it('reads WAVE_FORMAT_EXTENSIBLE through to its sub-format', () => {
    const file = wavFile(samples, 16000);
    const ext = Buffer.alloc(24 + 24);
    file.copy(ext, 0, 12, 36); // fmt chunk head and its 16 bytes
    ext.writeUInt32LE(40, 4);
    ext.writeUInt16LE(0xfffe, 8);
    ext.writeUInt16LE(22, 24); // cbSize
    ext.writeUInt16LE(1, 32); // sub-format GUID's first two bytes: PCM
    const read = readWav(Buffer.concat([file.subarray(0, 12), ext, chunk('data', samples)]));
    expect(read).toMatchObject({ ok: true, wav: { format: 1, channels: 1, bitsPerSample: 16 } });
  });

  it.each([
    ['empty', Buffer.alloc(0), 'not a WAV file (no RIFF/WAVE header)'],
    ['not RIFF', Buffer.from('ID3\x03 some mp3 bytes', 'latin1'), 'not a WAV file (no RIFF/WAVE header)'],
    ['no chunks', wav({}).subarray(0, 12), 'no format ("fmt " chunk)'],
    ['a format and no data', wav({}), 'no audio data ("data" chunk)'],
    [
      'data before its format',
      Buffer.concat([wavFile(samples, 16000).subarray(0, 12), chunk('data', samples)]),
      'its audio data comes before its format ("fmt " chunk)',
    ],
    ['data cut short', wav({}, chunk('data', samples, 600)), 'truncated: its audio data announces 600 bytes, 6 are there'],
    ['a chunk cut short', wav({}, chunk('LIST', Buffer.alloc(4), 99)), 'truncated: its "LIST" chunk announces 99 bytes, 4 are there'],
    [
      'data ending inside a sample',
      wav({}, chunk('data', Buffer.alloc(5))),
      'truncated: 5 bytes of audio data end inside a sample of 2 bytes',
    ],
    [
      'a fmt chunk too short',
      Buffer.concat([wavFile(samples, 16000).subarray(0, 12), chunk('fmt ', Buffer.alloc(10))]),
      'a "fmt " chunk of 10 bytes, 16 at least expected',
    ],
  ])('%s: %s', (_name, file, why) => {
    expect(readWav(file)).toEqual({ ok: false, why });
  });
});

describe('voiceInputProblem and describeWav', () => {
  it.each([
    [{ format: 1, channels: 1, sampleRate: 16000, bitsPerSample: 16 }, undefined],
    [{ format: 1, channels: 1, sampleRate: 24000, bitsPerSample: 16 }, undefined],
    [{ format: 1, channels: 1, sampleRate: 32000, bitsPerSample: 16 }, undefined],
    [{ format: 1, channels: 2, sampleRate: 8000, bitsPerSample: 16 }, '8000 Hz stereo 16-bit PCM'],
    [{ format: 1, channels: 1, sampleRate: 44100, bitsPerSample: 16 }, '44100 Hz mono 16-bit PCM'],
    [{ format: 1, channels: 1, sampleRate: 16000, bitsPerSample: 8 }, '16000 Hz mono 8-bit PCM'],
    [{ format: 1, channels: 1, sampleRate: 16000, bitsPerSample: 24 }, '16000 Hz mono 24-bit PCM'],
    [{ format: 3, channels: 1, sampleRate: 16000, bitsPerSample: 32 }, '16000 Hz mono 32-bit float'],
    [{ format: 7, channels: 1, sampleRate: 16000, bitsPerSample: 8 }, '16000 Hz mono 8-bit format 7'],
    [{ format: 1, channels: 6, sampleRate: 48000, bitsPerSample: 16 }, '48000 Hz 6-channel 16-bit PCM'],
  ])('%o: %s', (w, holds) => {
    const problem = voiceInputProblem(w);
    if (holds === undefined) expect(problem).toBeUndefined();
    else {
      expect(describeWav(w)).toBe(holds);
      expect(problem).toBe(`it holds ${holds}; the cloud takes 16-bit PCM mono at 16000, 24000 or 32000 Hz`);
    }
  });
});
