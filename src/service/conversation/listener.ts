import { opusTranscriptOf, transcriptOf } from './round.js';
import { DEFAULT_AUDIO, type AudioSetup } from './voice-config.js';
import {
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
} from './vad.js';

/** What the uplink audio amounts to, as the conversation acts on it. */
export type Heard = { kind: 'speech-start' } | { kind: 'utterance'; transcript: string } | { kind: 'empty' };

/**
 * The uplink audio of one connection run through the VAD (vad.ts): PCM is cut into windows across frames.
 * Opus is not decoded: it only counts, and only the device ends its utterance (CLIENT_AUDIO_FINISH, `~index`).
 */
export class Listener {
  readonly #silenceMs: number;
  readonly #manual: boolean;
  #audio: AudioSetup = DEFAULT_AUDIO;
  #state: VadState = VAD_START;
  #pending: Buffer = Buffer.alloc(0);
  #opusBytes = 0;

  constructor(o: { silenceMs: number; manual: boolean }) {
    this.#silenceMs = o.silenceMs;
    this.#manual = o.manual;
  }

  /** A voice config: listening starts over in its format. */
  configure(audio: AudioSetup): void {
    this.#audio = audio;
    this.#state = VAD_START;
    this.#pending = Buffer.alloc(0);
    this.#opusBytes = 0;
  }

  hear(chunk: Buffer): Heard[] {
    if (this.#audio.inputCodec === 'opus') {
      this.#opusBytes += chunk.length;
      return [];
    }
    const { windows, rest } = splitWindows(this.#pending, chunk, windowBytes(this.#audio.inputRate));
    this.#pending = rest;
    const heard: Heard[] = [];
    for (const window of windows) {
      const event = this.#step(window);
      if (event) heard.push(this.#heard(event));
    }
    return heard;
  }

  /** The device ended the utterance: what it held, speech or silence only. */
  finish(): Heard[] {
    if (this.#audio.inputCodec === 'opus') {
      const bytes = this.#opusBytes;
      this.#opusBytes = 0;
      return [bytes > 0 ? { kind: 'utterance', transcript: opusTranscriptOf(bytes) } : { kind: 'empty' }];
    }
    // The last, partial window counts too: a short last frame (`~index`) is audio like any other.
    const last = this.#pending.length >= 2 ? this.#step(this.#pending) : undefined;
    this.#pending = Buffer.alloc(0);
    if (last && last.kind !== 'speech-start') return [this.#heard(last)];
    const end = vadFinish(this.#state, this.#audio.inputRate);
    this.#state = end.state;
    return [...(last ? [this.#heard(last)] : []), this.#heard(end.event)];
  }

  #step(window: Buffer): VadEvent | undefined {
    const settings: VadSettings = { sampleRate: this.#audio.inputRate, silenceMs: this.#silenceMs, autoEnd: !this.#manual };
    const next = vadStep(this.#state, settings, { samples: Math.floor(window.length / 2), loud: rmsOf(window) >= SPEECH_RMS });
    this.#state = next.state;
    return next.event;
  }

  #heard(event: VadEvent): Heard {
    return event.kind === 'utterance' ? { kind: 'utterance', transcript: transcriptOf(event.speechMs) } : event;
  }
}
