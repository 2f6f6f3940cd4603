import {
  ACTIVITY_MSG,
  ActivityType,
  AUDIO_BINARY_NOT_SUPPORTED,
  ContentType,
  ConversationEvent,
  conversationErrorBody,
  downFrame,
  eventContent,
  eventTypeOf,
  parseUpFrame,
  type UpFrame,
} from '../../protocol/conversation.js';
import { Listener, type Heard } from './listener.js';
import { PROACTIVE_PIECES, replyPlan, roundSteps, type RoundPlan, type RoundStep } from './round.js';
import { DEFAULT_AUDIO, readAudioConfig, type AudioSetup } from './voice-config.js';

type Obj = Record<string, unknown>;

/** The greeting's eventData, in the guide's shape; the device's model and id are not known to the service. */
export const GREETING_DATA = {
  timbre: { voiceName: 'default', voiceSpeed: 1.0 },
  tts: { aue: 'pcm', bit: 16, channels: 1, sr: String(DEFAULT_AUDIO.outputRate) },
  deviceModel: 'UNKNOWN',
  deviceId: 'UNKNOWN',
};
/** The guide's bounds of CLIENT_UPDATE_CHAT_CONTEXT's effectiveTimeMinutes. */
const CONTEXT_MINUTES = { min: 1, max: 1440 };

export interface ConversationDeps {
  /** The connection's requestId: echoed in every down frame, and the prefix of the service's mids and roundIds. */
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
  /** The connection asked for manual mode (`needManualCall=true`): only CLIENT_AUDIO_FINISH ends an utterance. */
  manual: boolean;
  /** Free mode: silence after speech that ends an utterance. */
  vadSilenceMs: number;
  /** Benchmark knob: binary audio is sent straight back, so a relay's round trip can be timed. */
  echoAudio?: () => boolean;
}

interface Round {
  id: string;
  steps: RoundStep[];
  next: number;
  cancel: (() => void) | undefined;
}

/** The conversation of one WebSocket connection (DESIGN §1.7): its audio setup, uplink audio, and the round in progress. */
export class Conversation {
  readonly #deps: ConversationDeps;
  readonly #listener: Listener;
  #audio: AudioSetup = DEFAULT_AUDIO;
  #round: Round | undefined;
  #closed = false;
  /** The N of the service's own ids, `<requestId>_N`, shared by mids and roundIds as in the guide's frames. */
  #ids = 0;

  constructor(deps: ConversationDeps) {
    this.#deps = deps;
    this.#listener = new Listener({ silenceMs: deps.vadSilenceMs, manual: deps.manual });
  }

  /** The CFG_BOT_EVENT the service sends right after the connection opens: `mid: null`, `roundId: ""`. */
  greet(): void {
    this.#send(ContentType.EVENT, null, eventContent(ConversationEvent.CFG_BOT_EVENT, GREETING_DATA, { roundId: '' }));
  }

  receive(data: Buffer, isBinary: boolean): void {
    if (this.#closed) return;
    if (isBinary) {
      if (!this.#audio.binary) return this.#error(AUDIO_BINARY_NOT_SUPPORTED);
      if (this.#deps.echoAudio?.()) this.#deps.send(data, true);
      return this.#act(this.#listener.hear(data));
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
        // The PONG's mid is the service's own, not the PING's, as in the guide.
        return this.#send(ContentType.PONG, this.#nextId(), undefined);
      case ContentType.TEXT: {
        const input = content['input'];
        if (typeof input !== 'string' || input === '') return this.#error('TEXT needs content.input, a non-empty string');
        return this.#startRound((id) => replyPlan(id, input, this.#audio, false));
      }
      case ContentType.AUDIO:
        return this.#uplink(content);
      case ContentType.EVENT:
        return this.#deviceEvent(eventTypeOf(frame), content['eventData']);
      case ContentType.ACTIVITY:
        return this.#activity(content);
      default:
        return this.#error(`contentType ${frame.contentType} is not sent by a device`);
    }
  }

  /** AUDIO `{audioBase64, index}`: a negative index (`~index`) marks the last frame, which ends the utterance in free mode. */
  #uplink(content: Obj): void {
    const audio = content['audioBase64'];
    if (typeof audio !== 'string') return this.#error('AUDIO needs content.audioBase64, a base64 string');
    const index = content['index'];
    if (index !== undefined && !Number.isInteger(index)) return this.#error('AUDIO content.index must be an integer');
    this.#act(this.#listener.hear(Buffer.from(audio, 'base64')));
    if (typeof index === 'number' && index < 0 && !this.#deps.manual) this.#act(this.#listener.finish());
  }

  #deviceEvent(type: string | undefined, eventData: unknown): void {
    switch (type) {
      case ConversationEvent.CLIENT_VOICE_CHAT_UPDATE: {
        const read = readAudioConfig(eventData);
        if (!read.ok) return this.#error(read.msg);
        // The guide: a voice config mid-conversation interrupts the conversation.
        this.#interrupt();
        this.#audio = read.audio;
        this.#listener.configure(read.audio);
        this.#deps.onVoiceConfig();
        return this.#send(ContentType.EVENT, this.#nextId(), { eventType: ConversationEvent.SERVER_VOICE_CHAT_UPDATED, eventData });
      }
      case ConversationEvent.CLIENT_AUDIO_FINISH:
        return this.#act(this.#listener.finish());
      case ConversationEvent.CLIENT_INTERRUPT:
        return this.#interrupt();
      case ConversationEvent.CLIENT_INPUT_TEXT_TO_SPEECH: {
        const text = (eventData as Obj | undefined)?.['text'];
        if (typeof text !== 'string' || text === '')
          return this.#error('CLIENT_INPUT_TEXT_TO_SPEECH needs eventData.text, a non-empty string');
        return this.#startRound((roundId) => ({ roundId, audio: this.#audio, pieces: [text] }));
      }
      default:
        return this.#error(type === undefined ? 'EVENT needs content.eventType, a string' : `unsupported eventType ${type.slice(0, 64)}`);
    }
  }

  #activity(content: Obj): void {
    const type = content['activityType'];
    if (type === ActivityType.VOICE_CHAT_TRIGGER) {
      return this.#startRound((roundId) => ({ roundId, audio: this.#audio, textAs: ContentType.ACTIVITY, pieces: PROACTIVE_PIECES }));
    }
    if (type === ActivityType.CLIENT_UPDATE_CHAT_CONTEXT) {
      const minutes = content['effectiveTimeMinutes'];
      if (!Number.isInteger(minutes) || (minutes as number) < CONTEXT_MINUTES.min || (minutes as number) > CONTEXT_MINUTES.max) {
        return this.#error(
          `CLIENT_UPDATE_CHAT_CONTEXT needs effectiveTimeMinutes, an integer from ${CONTEXT_MINUTES.min} to ${CONTEXT_MINUTES.max}`,
        );
      }
      const id = this.#nextId();
      const received = { roundId: id, activityType: ActivityType.CLIENT_CHAT_CONTEXT_RECEIVED, activityData: {} };
      return this.#send(ContentType.EVENT, id, received, ACTIVITY_MSG);
    }
    this.#error(
      typeof type === 'string' ? `unsupported activityType ${type.slice(0, 64)}` : 'ACTIVITY needs content.activityType, a string',
    );
  }

  /** What the listener heard: new speech cuts a reply (free mode), an utterance starts a round, silence only says so. */
  #act(heard: Heard[]): void {
    for (const h of heard) {
      if (h.kind === 'speech-start') {
        if (!this.#deps.manual) this.#interrupt();
      } else if (h.kind === 'utterance') {
        this.#startRound((id) => replyPlan(id, h.transcript, this.#audio, true));
      } else {
        const content = eventContent(ConversationEvent.EMPTY_CONTENT, { startTime: this.#deps.now() }, { roundId: this.#nextId() });
        this.#send(ContentType.EVENT, null, content);
      }
    }
  }

  #startRound(plan: (roundId: string) => RoundPlan): void {
    this.#interrupt();
    const id = this.#nextId();
    const round: Round = { id, steps: roundSteps(plan(id)), next: 0, cancel: undefined };
    this.#round = round;
    this.#play(round);
  }

  #play(round: Round): void {
    round.cancel = undefined;
    do {
      const step = round.steps[round.next++]!;
      if ('binaryAudio' in step) this.#deps.send(step.binaryAudio, true);
      else this.#send(step.contentType, round.id, step.content(this.#deps.now()));
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
    const content = eventContent(ConversationEvent.CALL_AGENT_INTERRUPTED, { startTime: this.#deps.now() }, { roundId: round.id });
    this.#send(ContentType.EVENT, this.#nextId(), content);
  }

  #nextId(): string {
    this.#ids += 1;
    return `${this.#deps.requestId}_${this.#ids}`;
  }

  #send(contentType: ContentType, mid: string | null, content: Obj | undefined, msg?: string): void {
    const { requestId, now } = this.#deps;
    this.#deps.send(
      downFrame({ requestId, mid, contentType, ...(content !== undefined && { content }), t: now(), ...(msg !== undefined && { msg }) }),
      false,
    );
  }

  #error(msg: string): void {
    this.#deps.send(conversationErrorBody(msg), false);
  }
}
