/**
 * The reference service's TTS: a tone per reply piece (16-bit little-endian mono PCM), so a saved reply
 * plays and its length follows the text. Pure and deterministic: the same piece gives the same bytes.
 */

/** Tone length per character of the piece, and its bounds. */
export const TONE_MS_PER_CHAR = 40;
export const TONE_MIN_MS = 200;
export const TONE_MAX_MS = 4000;
/** Pieces cycle through these pitches, so each can be told apart by ear. */
export const TONE_HZ = [440, 550, 660, 770] as const;
/** Peak amplitude: about -12 dBFS, loud enough to hear and to pass the VAD, far from clipping. */
export const TONE_AMPLITUDE = 8000;
/** Fade in and out, so a piece starts and ends without a click. */
const FADE_MS = 10;

/** How long a piece's tone lasts, in whole ms. */
export function toneMs(piece: string): number {
  return Math.min(TONE_MAX_MS, Math.max(TONE_MIN_MS, [...piece].length * TONE_MS_PER_CHAR));
}

/** The tone of the `index`th piece at `sampleRate`. */
export function toneFor(piece: string, index: number, sampleRate: number): Buffer {
  const n = Math.round((toneMs(piece) * sampleRate) / 1000);
  const hz = TONE_HZ[index % TONE_HZ.length]!;
  const fade = Math.round((FADE_MS * sampleRate) / 1000);
  const out = Buffer.alloc(n * 2);
  for (let i = 0; i < n; i++) {
    const gain = Math.min(1, i / fade, (n - 1 - i) / fade);
    out.writeInt16LE(Math.round(TONE_AMPLITUDE * gain * Math.sin((2 * Math.PI * hz * i) / sampleRate)), i * 2);
  }
  return out;
}

/** Cuts PCM into frames of `frameMs` (the last one shorter), each with its duration in ms. */
export function pcmFrames(pcm: Buffer, sampleRate: number, frameMs: number): { audio: Buffer; durationMs: number }[] {
  const frameBytes = Math.round((frameMs * sampleRate) / 1000) * 2;
  const frames: { audio: Buffer; durationMs: number }[] = [];
  for (let at = 0; at < pcm.length; at += frameBytes) {
    const audio = pcm.subarray(at, at + frameBytes);
    frames.push({ audio, durationMs: Math.round((audio.length / 2 / sampleRate) * 1000) });
  }
  return frames;
}
