import { randomUUID } from 'node:crypto';
import {
  AUDIO_BINARY_NOT_SUPPORTED,
  ContentType,
  ConversationEvent,
  conversationErrorBody,
  downFrame,
  eventContent,
  eventTypeOf,
  parseUpFrame,
  voiceConfigAudio,
  type UpFrame,
} from '../../protocol/conversation.js';
import { roundSteps, transcriptOf, type RoundStep } from './round.js';

/** The greeting's eventData: the service's default voice config (text-mode audio until the device says otherwise). */
export const DEFAULT_VOICE_CONFIG = {
  audio: {
    binary: false,
    input: { format: 'pcm', sampleRate: 16000, channel: 1, bitDepth: 16 },
    output: { format: 'pcm', sampleRate: 16000, channel: 1, bitDepth: 16 },
  },
};

export interface ConversationDeps {
  /** The connection's requestId, echoed in every down frame. */
  requestId: string;
  now(): number;
  /** Pause between two frames of a round; 0 sends a whole round at once. */
  roundDelayMs: number;
  /** Runs fn once after ms; the returned function cancels it. Injected so a unit test can step a round. */
  setTimer(ms: number, fn: () => void): () => void;
  /** Sends one frame through the service's bounded send. */
  send(data: string | Buffer, binary: boolean): void;
  /** A CLIENT_VOICE_CHAT_UPDATE was accepted (answered SERVER_VOICE_CHAT_UPDATED). */
  onVoiceConfig(): void;
  /** Benchmark knob: binary audio is sent straight back, so a relay's round trip can be timed. */
  echoAudio?: () => boolean;
}

interface Round {
  id: string;
  steps: RoundStep[];
  next: number;
  cancel: (() => void) | undefined;
}

/** The conversation of one WebSocket connection (DESIGN §1.7 subset): its audio mode, uplink audio and round. */
export class Conversation {
  readonly #deps: ConversationDeps;
  /** Set by a voice config with audio.binary = true; binary frames are refused until then. */
  #binaryAudio = false;
  /** Uplink audio since the last CLIENT_AUDIO_FINISH: only its size is kept. */
  #audioBytes = 0;
  #round: Round | undefined;
  #closed = false;

  constructor(deps: ConversationDeps) {
    this.#deps = deps;
  }

  /** The CFG_BOT_EVENT the service sends right after the connection opens. */
  greet(): void {
    this.#event(ConversationEvent.CFG_BOT_EVENT, DEFAULT_VOICE_CONFIG);
  }

  receive(data: Buffer, isBinary: boolean): void {
    if (this.#closed) return;
    if (isBinary) {
      if (!this.#binaryAudio) return this.#error(AUDIO_BINARY_NOT_SUPPORTED);
      if (this.#deps.echoAudio?.()) this.#deps.send(data, true);
      return this.#audio(data.length);
    }
    const parsed = parseUpFrame(data.toString('utf8'));
    if (!parsed.ok) return this.#error(parsed.msg);
    this.#frame(parsed.frame);
  }

  /** Stops the round's timer; nothing is sent afterwards. */
  close(): void {
    this.#closed = true;
    this.#round?.cancel?.();
    this.#round = undefined;
  }

  #frame(frame: UpFrame): void {
    const { content } = frame;
    switch (frame.contentType) {
      case ContentType.PING:
        // A PING without a mid still gets a PONG: every down frame carries a mid, a fresh one here.
        return this.#send(ContentType.PONG, {}, frame.mid ?? randomUUID());
      case ContentType.TEXT: {
        const input = content['input'];
        if (typeof input !== 'string' || input === '') return this.#error('TEXT needs content.input, a non-empty string');
        return this.#startRound(input, false);
      }
      case ContentType.AUDIO: {
        const audio = content['audioBase64'];
        if (typeof audio !== 'string') return this.#error('AUDIO needs content.audioBase64, a base64 string');
        return this.#audio(Buffer.byteLength(audio, 'base64'));
      }
      case ContentType.EVENT:
        return this.#deviceEvent(eventTypeOf(frame), content['eventData']);
      default:
        return this.#error(`contentType ${frame.contentType} is not sent by a device`);
    }
  }

  #deviceEvent(type: string | undefined, eventData: unknown): void {
    switch (type) {
      case ConversationEvent.CLIENT_VOICE_CHAT_UPDATE: {
        const audio = voiceConfigAudio(eventData);
        if (!audio) return this.#error('CLIENT_VOICE_CHAT_UPDATE needs eventData.audio, an object');
        // The guide: a voice config mid-conversation interrupts the conversation.
        this.#interrupt();
        this.#binaryAudio = audio.binary;
        this.#deps.onVoiceConfig();
        return this.#event(ConversationEvent.SERVER_VOICE_CHAT_UPDATED, eventData as Record<string, unknown>);
      }
      case ConversationEvent.CLIENT_AUDIO_FINISH: {
        const transcript = transcriptOf(this.#audioBytes);
        this.#audioBytes = 0;
        return this.#startRound(transcript, true);
      }
      case ConversationEvent.CLIENT_INTERRUPT:
        return this.#interrupt();
      default:
        return this.#error(type === undefined ? 'EVENT needs content.eventType, a string' : `unsupported eventType ${type.slice(0, 64)}`);
    }
  }

  /** Uplink audio: a device speaking during a round interrupts it (barge-in). */
  #audio(bytes: number): void {
    this.#interrupt();
    this.#audioBytes += bytes;
  }

  #startRound(input: string, fromAudio: boolean): void {
    this.#interrupt();
    const id = randomUUID();
    const round: Round = {
      id,
      steps: roundSteps({ roundId: id, input, fromAudio, binaryAudio: this.#binaryAudio }),
      next: 0,
      cancel: undefined,
    };
    this.#round = round;
    this.#play(round);
  }

  #play(round: Round): void {
    round.cancel = undefined;
    do {
      const step = round.steps[round.next++]!;
      if ('binaryAudio' in step) this.#deps.send(step.binaryAudio, true);
      else this.#send(step.contentType, step.content);
    } while (this.#deps.roundDelayMs <= 0 && round.next < round.steps.length);
    if (round.next >= round.steps.length) {
      this.#round = undefined;
      return;
    }
    round.cancel = this.#deps.setTimer(this.#deps.roundDelayMs, () => this.#play(round));
  }

  /** Stops the running round, if any, and says so. */
  #interrupt(): void {
    const round = this.#round;
    if (!round) return;
    round.cancel?.();
    this.#round = undefined;
    this.#event(ConversationEvent.CALL_AGENT_INTERRUPTED, {}, { roundId: round.id });
  }

  #event(type: ConversationEvent, eventData: Record<string, unknown>, extra: Record<string, unknown> = {}): void {
    this.#send(ContentType.EVENT, eventContent(type, eventData, extra));
  }

  #send(contentType: ContentType, content: Record<string, unknown>, mid: string = randomUUID()): void {
    const { requestId, now } = this.#deps;
    this.#deps.send(downFrame({ requestId, mid, contentType, content, t: now() }), false);
  }

  #error(msg: string): void {
    this.#deps.send(conversationErrorBody(msg), false);
  }
}
