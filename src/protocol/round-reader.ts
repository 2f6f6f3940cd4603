/**
 * An app's reading of the cloud's down frames (DESIGN §1.7, the guide's shapes) into round events, and
 * one turn's state machine: what `botlink chat`, the demo app and the relay client decide, without I/O.
 */

type Obj = Record<string, unknown>;

/** A down frame as a turn sees it; `roundId` is '' where the frame has none (never a round's name). */
export type RoundEvent =
  | { kind: 'asr'; text: string; final: boolean }
  | { kind: 'start'; roundId: string; input: string }
  | { kind: 'piece'; roundId: string; text: string }
  | { kind: 'audio'; roundId: string; base64: string }
  | { kind: 'tts-complete'; roundId: string }
  | { kind: 'complete'; roundId: string }
  | { kind: 'empty'; roundId: string }
  | { kind: 'interrupted'; roundId: string }
  | { kind: 'refused'; roundId: string }
  | { kind: 'voice-config'; eventData: Obj }
  | { kind: 'error'; code: number; msg: string }
  | { kind: 'other' };

/** A JSON value as an object to read fields from ({} when it is none, or an array). */
export const obj = (v: unknown): Obj => (typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Obj) : {});
const str = (v: unknown): string => (typeof v === 'string' ? v : '');

/** One parsed down frame as a round event; anything this app has no use for is `other`, never an error. */
export function readDownFrame(frame: unknown): RoundEvent {
  const f = obj(frame);
  if (typeof f['code'] === 'number' && f['code'] !== 200) return { kind: 'error', code: f['code'], msg: str(f['msg']) };
  const content = obj(f['content']);
  const roundId = str(content['roundId']);
  switch (f['contentType']) {
    case 'ASR':
      return typeof content['text'] === 'string'
        ? { kind: 'asr', text: content['text'], final: content['textType'] === 'IS_FINAL' }
        : OTHER;
    case 'AGENT':
      return typeof content['content'] === 'string' ? { kind: 'piece', roundId, text: content['content'] } : OTHER;
    case 'TTS':
      return typeof content['audioBase64'] === 'string' ? { kind: 'audio', roundId, base64: content['audioBase64'] } : OTHER;
    case 'EVENT':
      return readEvent(content, roundId);
    default:
      return OTHER; // PONG, ACTIVITY (proactive, not an answer), BOTLINK, the unknown
  }
}

const OTHER: RoundEvent = { kind: 'other' };

function readEvent(content: Obj, roundId: string): RoundEvent {
  switch (content['eventType']) {
    case 'CALL_AGENT_START_EVENT':
      return { kind: 'start', roundId, input: str(obj(content['eventData'])['input']) };
    case 'TTS_COMPLETE':
      return { kind: 'tts-complete', roundId };
    case 'COMPLETE':
      return { kind: 'complete', roundId };
    case 'EMPTY_CONTENT':
      return { kind: 'empty', roundId };
    case 'CALL_AGENT_INTERRUPTED':
    case 'INTERRUPT': // a public device client handles it like CALL_AGENT_INTERRUPTED
      return { kind: 'interrupted', roundId };
    case 'USER_AUDIT_FAIL':
      return { kind: 'refused', roundId };
    case 'SERVER_VOICE_CHAT_UPDATED':
      return { kind: 'voice-config', eventData: obj(content['eventData']) };
    default:
      return OTHER;
  }
}

/** How a turn ended: a reply, or why there is none. */
export type Outcome = 'complete' | 'empty' | 'interrupted' | 'refused' | 'error';

/**
 * One turn of an app: its input is sent and it `waits` for the cloud to name a round; the round is
 * `open` until it ends; then `done`. `heard` is the last final ASR text of the turn.
 */
export type Turn =
  | { phase: 'waiting'; heard: string | undefined }
  | { phase: 'open'; roundId: string; heard: string | undefined }
  | { phase: 'done'; roundId: string; heard: string | undefined; outcome: Outcome; detail: string };

export const NEW_TURN: Turn = { phase: 'waiting', heard: undefined };

/** The next turn and, when the event belongs to this turn, the event (a piece to show, audio to keep). */
export interface Step {
  turn: Turn;
  accepted?: Extract<RoundEvent, { kind: 'asr' | 'piece' | 'audio' }>;
}

/**
 * The turn after `event`. A round is named by CALL_AGENT_START_EVENT or, failing that, the first round
 * frame with a non-empty roundId (an interrupt aside); `roundId: ""` (the greeting) and frames without
 * one never start or end it. While waiting, EMPTY_CONTENT and USER_AUDIT_FAIL answer the input whatever their roundId:
 * they say no round will come.
 */
export function nextTurn(turn: Turn, event: RoundEvent): Step {
  if (turn.phase === 'done') return { turn };
  if (event.kind === 'error') return { turn: end(turn, 'error', `the cloud answered ${event.code}: ${event.msg}`) };
  if (event.kind === 'asr') return event.final ? { turn: { ...turn, heard: event.text }, accepted: event } : { turn };
  if (event.kind === 'other' || event.kind === 'voice-config') return { turn };
  if (turn.phase === 'waiting') {
    if (event.kind === 'empty') return { turn: end(turn, 'empty', EMPTY) };
    if (event.kind === 'refused') return { turn: end(turn, 'refused', REFUSED) };
    // A cut names no round of ours: an unseen round cannot be one this turn started.
    if (event.roundId === '' || event.kind === 'interrupted') return { turn };
    return nextTurn({ phase: 'open', roundId: event.roundId, heard: turn.heard }, event);
  }
  if (event.roundId !== turn.roundId) return { turn }; // another round's frame, or none's
  switch (event.kind) {
    case 'piece':
    case 'audio':
      return { turn, accepted: event };
    case 'complete':
      return { turn: end(turn, 'complete', '') };
    case 'empty':
      return { turn: end(turn, 'empty', EMPTY) };
    case 'interrupted':
      return { turn: end(turn, 'interrupted', 'the reply was cut (CALL_AGENT_INTERRUPTED): new speech or an interrupt stopped it') };
    case 'refused':
      return { turn: end(turn, 'refused', REFUSED) };
    default:
      return { turn }; // start again, tts-complete: the round goes on
  }
}

const EMPTY = 'the cloud found nothing to answer (EMPTY_CONTENT): no reply';
const REFUSED = 'the input failed the cloud content moderation (USER_AUDIT_FAIL): no reply';

function end(turn: Turn, outcome: Outcome, detail: string): Turn {
  return { phase: 'done', roundId: turn.phase === 'waiting' ? '' : turn.roundId, heard: turn.heard, outcome, detail };
}
