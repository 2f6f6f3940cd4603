/** RIFF/WAVE files as `botlink chat --audio` reads and `--save-reply` writes them: PCM only, no I/O. */

export interface Wav {
  /** 1 PCM, 3 float, 6/7 A-law/µ-law…; WAVE_FORMAT_EXTENSIBLE is read through to its sub-format. */
  format: number;
  channels: number;
  sampleRate: number;
  bitsPerSample: number;
  data: Buffer;
}

export type WavRead = { ok: true; wav: Wav } | { ok: false; why: string };

const PCM = 1;
const EXTENSIBLE = 0xfffe;

/** Reads a WAV's format and samples; chunks other than `fmt ` and `data` (LIST, fact…) are skipped. */
export function readWav(file: Buffer): WavRead {
  if (file.length < 12 || file.toString('latin1', 0, 4) !== 'RIFF' || file.toString('latin1', 8, 12) !== 'WAVE')
    return { ok: false, why: 'not a WAV file (no RIFF/WAVE header)' };
  let fmt: Omit<Wav, 'data'> | undefined;
  for (let at = 12; at + 8 <= file.length; ) {
    const id = file.toString('latin1', at, at + 4);
    const size = file.readUInt32LE(at + 4);
    const body = at + 8;
    if (body + size > file.length) {
      const what = id === 'data' ? 'its audio data' : `its "${id}" chunk`;
      return { ok: false, why: `truncated: ${what} announces ${size} bytes, ${file.length - body} are there` };
    }
    if (id === 'fmt ') {
      if (size < 16) return { ok: false, why: `a "fmt " chunk of ${size} bytes, 16 at least expected` };
      const tag = file.readUInt16LE(body);
      fmt = {
        format: tag === EXTENSIBLE && size >= 26 ? file.readUInt16LE(body + 24) : tag,
        channels: file.readUInt16LE(body + 2),
        sampleRate: file.readUInt32LE(body + 4),
        bitsPerSample: file.readUInt16LE(body + 14),
      };
    } else if (id === 'data') {
      if (!fmt) return { ok: false, why: 'its audio data comes before its format ("fmt " chunk)' };
      const frame = (fmt.channels * fmt.bitsPerSample) / 8;
      if (Number.isInteger(frame) && frame > 0 && size % frame !== 0)
        return { ok: false, why: `truncated: ${size} bytes of audio data end inside a sample of ${frame} bytes` };
      return { ok: true, wav: { ...fmt, data: file.subarray(body, body + size) } };
    }
    at = body + size + (size % 2); // chunks are padded to an even length
  }
  return { ok: false, why: fmt ? 'no audio data ("data" chunk)' : 'no format ("fmt " chunk)' };
}

/** What a WAV holds, in a technician's words: "8000 Hz stereo 16-bit PCM". */
export function describeWav(w: Omit<Wav, 'data'>): string {
  const channels = w.channels === 1 ? 'mono' : w.channels === 2 ? 'stereo' : `${w.channels}-channel`;
  const format = w.format === PCM ? 'PCM' : w.format === 3 ? 'float' : `format ${w.format}`;
  return `${w.sampleRate} Hz ${channels} ${w.bitsPerSample}-bit ${format}`;
}

/** The input rates the cloud takes (DESIGN §1.7). */
export const VOICE_RATES = [16000, 24000, 32000] as const;

/** Why the cloud cannot take this WAV as voice input, or undefined when it can (PCM 16-bit mono, 16/24/32 kHz). */
export function voiceInputProblem(w: Omit<Wav, 'data'>): string | undefined {
  const fits = w.format === PCM && w.bitsPerSample === 16 && w.channels === 1 && (VOICE_RATES as readonly number[]).includes(w.sampleRate);
  return fits ? undefined : `it holds ${describeWav(w)}; the cloud takes 16-bit PCM mono at 16000, 24000 or 32000 Hz`;
}

/** A WAV file of 16-bit mono PCM samples (little-endian, as the cloud's PCM is). */
export function wavFile(pcm: Buffer, sampleRate: number): Buffer {
  const head = Buffer.alloc(44);
  head.write('RIFF', 0, 'latin1');
  head.writeUInt32LE(36 + pcm.length, 4);
  head.write('WAVEfmt ', 8, 'latin1');
  head.writeUInt32LE(16, 16);
  head.writeUInt16LE(PCM, 20);
  head.writeUInt16LE(1, 22);
  head.writeUInt32LE(sampleRate, 24);
  head.writeUInt32LE(sampleRate * 2, 28);
  head.writeUInt16LE(2, 32);
  head.writeUInt16LE(16, 34);
  head.write('data', 36, 'latin1');
  head.writeUInt32LE(pcm.length, 40);
  return Buffer.concat([head, pcm]);
}
