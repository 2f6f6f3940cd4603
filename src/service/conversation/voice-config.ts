/** The audio part of a voice config (DESIGN §1.7 CLIENT_VOICE_CHAT_UPDATE), read into what the service acts on. */

export const INPUT_SAMPLE_RATES = [16000, 24000, 32000] as const;
const INPUT_CODECS = ['pcm', 'opus'] as const;
const OUTPUT_CODECS = ['pcm', 'opus', 'mp3'] as const;
/** The guide's TTS PCM frames are 360–720 ms unless frameSizeMs (60–120) is set. */
export const TTS_FRAME_MS = 480;
const FRAME_SIZE_MS = { min: 60, max: 120 };

export interface AudioSetup {
  binary: boolean;
  inputCodec: (typeof INPUT_CODECS)[number];
  inputRate: number;
  /** What the device asked for; the service only produces PCM (README, reference service). */
  outputCodec: (typeof OUTPUT_CODECS)[number];
  outputRate: number;
  ttsFrameMs: number;
}

/** Before any voice config: the greeting's `tts` (pcm, 16 kHz, 16 bit, mono), audio as base64 in JSON. */
export const DEFAULT_AUDIO: AudioSetup = {
  binary: false,
  inputCodec: 'pcm',
  inputRate: 16000,
  outputCodec: 'pcm',
  outputRate: 16000,
  ttsFrameMs: TTS_FRAME_MS,
};

type Obj = Record<string, unknown>;
export type AudioRead = { ok: true; audio: AudioSetup } | { ok: false; msg: string };

function isObject(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** A number or a numeric string (the guide sends "16000"); undefined when absent, NaN when neither. */
function numeric(v: unknown): number | undefined {
  if (v === undefined) return undefined;
  if (typeof v === 'number') return v;
  return typeof v === 'string' && /^[0-9]{1,6}$/.test(v) ? Number(v) : Number.NaN;
}

function oneOf<T extends string>(v: unknown, known: readonly T[], fallback: T): T | undefined {
  if (v === undefined) return fallback;
  return known.find((k) => k === v);
}

/** Reads eventData.audio; unknown fields are ignored, a known one with a value the guide does not allow is refused. */
export function readAudioConfig(eventData: unknown): AudioRead {
  if (!isObject(eventData) || !isObject(eventData['audio']))
    return { ok: false, msg: 'CLIENT_VOICE_CHAT_UPDATE needs eventData.audio, an object' };
  const audio = eventData['audio'];
  const input = isObject(audio['input']) ? audio['input'] : {};
  const output = isObject(audio['output']) ? audio['output'] : {};
  const inputCodec = oneOf(input['codec'], INPUT_CODECS, 'pcm');
  if (!inputCodec) return { ok: false, msg: `audio.input.codec must be one of ${INPUT_CODECS.join(', ')}` };
  const inputRate = numeric(input['sampleRate']) ?? DEFAULT_AUDIO.inputRate;
  if (!INPUT_SAMPLE_RATES.some((r) => r === inputRate))
    return { ok: false, msg: `audio.input.sampleRate must be one of ${INPUT_SAMPLE_RATES.join(', ')}` };
  const outputCodec = oneOf(output['codec'], OUTPUT_CODECS, 'pcm');
  if (!outputCodec) return { ok: false, msg: `audio.output.codec must be one of ${OUTPUT_CODECS.join(', ')}` };
  const outputRate = numeric(output['sampleRate']) ?? DEFAULT_AUDIO.outputRate;
  if (!(Number.isInteger(outputRate) && outputRate >= 8000 && outputRate <= 48000)) {
    return { ok: false, msg: 'audio.output.sampleRate must be an integer from 8000 to 48000' };
  }
  const frameSizeMs = numeric(output['frameSizeMs']);
  // A frameSizeMs outside the guide's 60–120 (an opus size, say) leaves PCM frames at their default.
  const ttsFrameMs =
    frameSizeMs !== undefined && Number.isInteger(frameSizeMs) && frameSizeMs >= FRAME_SIZE_MS.min && frameSizeMs <= FRAME_SIZE_MS.max
      ? frameSizeMs
      : TTS_FRAME_MS;
  return { ok: true, audio: { binary: audio['binary'] === true, inputCodec, inputRate, outputCodec, outputRate, ttsFrameMs } };
}
