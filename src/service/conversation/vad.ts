/**
 * The reference service's energy VAD (DESIGN §1.7 free mode), pure: time is counted in audio samples, never
 * on a clock, so a test steps it window by window. PCM is 16-bit little-endian mono.
 */

/** Audio is judged in windows this long. */
export const VAD_WINDOW_MS = 20;
/** A window whose RMS reaches this is speech: about -36 dBFS, above a quiet room's microphone hiss. */
export const SPEECH_RMS = 500;
/** Silence after speech that ends an utterance (`botlink serve --vad-silence-ms`). */
export const DEFAULT_SILENCE_MS = 600;
/** Audio with no speech at all, from the start of listening, that makes a silence-only utterance (EMPTY_CONTENT). */
export const NO_SPEECH_MS = 3000;

/** quiet: listening, no speech yet; speech: in an utterance; idle: listening, silence already reported or an utterance just ended. */
export type VadPhase = 'quiet' | 'speech' | 'idle';

export interface VadState {
  phase: VadPhase;
  /** quiet: samples heard without speech. */
  quiet: number;
  /** speech: samples from the first loud window to the end of the last one. */
  speech: number;
  /** speech: samples of silence since the last loud window. */
  silence: number;
}

export interface VadSettings {
  sampleRate: number;
  silenceMs: number;
  /** Free mode: silence ends an utterance and silence alone is reported; manual mode waits for CLIENT_AUDIO_FINISH. */
  autoEnd: boolean;
}

export type VadEvent = { kind: 'speech-start' } | { kind: 'utterance'; speechMs: number } | { kind: 'empty' };

/** Where listening starts: a new connection, or a new voice config. */
export const VAD_START: VadState = { phase: 'quiet', quiet: 0, speech: 0, silence: 0 };
/** After an utterance or a silence report: the next silence is not reported again until someone speaks. */
const VAD_IDLE: VadState = { phase: 'idle', quiet: 0, speech: 0, silence: 0 };

function samplesOf(ms: number, sampleRate: number): number {
  return Math.round((ms * sampleRate) / 1000);
}

function msOf(samples: number, sampleRate: number): number {
  return Math.round((samples * 1000) / sampleRate);
}

/** One window of `samples` samples, loud or not: the next state and what happened. */
export function vadStep(
  state: VadState,
  settings: VadSettings,
  window: { samples: number; loud: boolean },
): { state: VadState; event?: VadEvent } {
  const { samples, loud } = window;
  if (state.phase !== 'speech') {
    if (loud) return { state: { phase: 'speech', quiet: 0, speech: samples, silence: 0 }, event: { kind: 'speech-start' } };
    if (state.phase === 'idle') return { state };
    const quiet = state.quiet + samples;
    if (settings.autoEnd && quiet >= samplesOf(NO_SPEECH_MS, settings.sampleRate)) return { state: VAD_IDLE, event: { kind: 'empty' } };
    return { state: { ...state, quiet } };
  }
  if (loud) return { state: { ...state, speech: state.speech + state.silence + samples, silence: 0 } };
  const silence = state.silence + samples;
  if (settings.autoEnd && silence >= samplesOf(settings.silenceMs, settings.sampleRate)) {
    return { state: VAD_IDLE, event: { kind: 'utterance', speechMs: msOf(state.speech, settings.sampleRate) } };
  }
  return { state: { ...state, silence } };
}

/** The device says the utterance is over (CLIENT_AUDIO_FINISH, or the `~index` last frame): speech or silence only. */
export function vadFinish(state: VadState, sampleRate: number): { state: VadState; event: VadEvent } {
  if (state.phase === 'speech') return { state: VAD_IDLE, event: { kind: 'utterance', speechMs: msOf(state.speech, sampleRate) } };
  return { state: VAD_IDLE, event: { kind: 'empty' } };
}

/** The RMS of 16-bit little-endian samples; a trailing odd byte is no sample. */
export function rmsOf(pcm: Buffer): number {
  const n = Math.floor(pcm.length / 2);
  if (n === 0) return 0;
  let sum = 0;
  for (let i = 0; i < n; i++) {
    const s = pcm.readInt16LE(i * 2);
    sum += s * s;
  }
  return Math.sqrt(sum / n);
}

/** Cuts `pending` + `chunk` into whole windows of `windowBytes`; what is left waits for the next chunk. */
export function splitWindows(pending: Buffer, chunk: Buffer, windowBytes: number): { windows: Buffer[]; rest: Buffer } {
  const all = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
  const windows: Buffer[] = [];
  let at = 0;
  for (; at + windowBytes <= all.length; at += windowBytes) windows.push(all.subarray(at, at + windowBytes));
  return { windows, rest: Buffer.from(all.subarray(at)) };
}

/** The bytes of one window of 16-bit mono at this rate. */
export function windowBytes(sampleRate: number): number {
  return samplesOf(VAD_WINDOW_MS, sampleRate) * 2;
}
