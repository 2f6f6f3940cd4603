/** Test audio: 16-bit little-endian mono PCM that the reference service's VAD hears as speech or as silence. */

/** `ms` of a 300 Hz tone at amplitude 6000 (RMS ≈ 4200, far above the VAD's 500). */
export function speechPcm(ms: number, sampleRate = 16000): Buffer {
  const n = Math.round((ms * sampleRate) / 1000);
  const b = Buffer.alloc(n * 2);
  for (let i = 0; i < n; i++) b.writeInt16LE(Math.round(6000 * Math.sin((2 * Math.PI * 300 * i) / sampleRate)), i * 2);
  return b;
}

/** `ms` of digital silence. */
export function silencePcm(ms: number, sampleRate = 16000): Buffer {
  return Buffer.alloc(Math.round((ms * sampleRate) / 1000) * 2);
}

/** Cuts audio into frames of at most `frameMs` (the guide: at most 300 ms a frame). */
export function pcmChunks(pcm: Buffer, frameMs: number, sampleRate = 16000): Buffer[] {
  const bytes = Math.round((frameMs * sampleRate) / 1000) * 2;
  const out: Buffer[] = [];
  for (let at = 0; at < pcm.length; at += bytes) out.push(pcm.subarray(at, at + bytes));
  return out;
}
