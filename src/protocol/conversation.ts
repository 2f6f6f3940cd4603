/**
 * The conversation frames of DESIGN §1.7 and botlink's own BOTLINK frame (§3.5). The reference service
 * speaks them in the guide's shapes; the relay carries frames unread and looks only at what it must, cheaply.
 */

/** The conversation's path, on the cloud and on botlink's local socket alike (DESIGN §1.7, §3.5). */
export const VOICE_CHAT_PATH = '/soulmate/voiceChat/v1';

/** The cloud's socket address when only its baseUrl is known (DESIGN §3.2 `wsUrl`'s default): ws(s) + VOICE_CHAT_PATH. */
export function voiceChatUrl(baseUrl: string): string {
  return baseUrl.replace(/^http/, 'ws') + VOICE_CHAT_PATH;
}
/** botlink's own path on the local socket for read-only observers of the conversation (DESIGN §3.5). */
export const OBSERVE_PATH = '/v1/observe';

export const ContentType = {
  TEXT: 'TEXT',
  AUDIO: 'AUDIO',
  EVENT: 'EVENT',
  PING: 'PING',
  PONG: 'PONG',
  ASR: 'ASR',
  AGENT: 'AGENT',
  TTS: 'TTS',
  ACTIVITY: 'ACTIVITY',
} as const;
export type ContentType = (typeof ContentType)[keyof typeof ContentType];
const CONTENT_TYPES: readonly string[] = Object.values(ContentType);

export const ConversationEvent = {
  CFG_BOT_EVENT: 'CFG_BOT_EVENT',
  CLIENT_VOICE_CHAT_UPDATE: 'CLIENT_VOICE_CHAT_UPDATE',
  SERVER_VOICE_CHAT_UPDATED: 'SERVER_VOICE_CHAT_UPDATED',
  CALL_AGENT_START_EVENT: 'CALL_AGENT_START_EVENT',
  TTS_SENTENCE_START: 'TTS_SENTENCE_START',
  TTS_COMPLETE: 'TTS_COMPLETE',
  COMPLETE: 'COMPLETE',
  EMPTY_CONTENT: 'EMPTY_CONTENT',
  CLIENT_AUDIO_FINISH: 'CLIENT_AUDIO_FINISH',
  CLIENT_INTERRUPT: 'CLIENT_INTERRUPT',
  CLIENT_INPUT_TEXT_TO_SPEECH: 'CLIENT_INPUT_TEXT_TO_SPEECH',
  CALL_AGENT_INTERRUPTED: 'CALL_AGENT_INTERRUPTED',
  REPEAT_CLIENT_SESSION: 'REPEAT_CLIENT_SESSION',
} as const;
export type ConversationEvent = (typeof ConversationEvent)[keyof typeof ConversationEvent];

/** The `activityType`s of §1.7: two up requests and the down answer to one of them. */
export const ActivityType = {
  VOICE_CHAT_TRIGGER: 'VOICE_CHAT_TRIGGER',
  CLIENT_UPDATE_CHAT_CONTEXT: 'CLIENT_UPDATE_CHAT_CONTEXT',
  CLIENT_CHAT_CONTEXT_RECEIVED: 'CLIENT_CHAT_CONTEXT_RECEIVED',
} as const;

/** The guide's answer to a binary frame on a connection whose voice config is not binary. */
export const AUDIO_BINARY_NOT_SUPPORTED = 'audio binary not support.';

type Obj = Record<string, unknown>;

/** A frame from the device: `{mid, uid?, contentType, content}`; `uid` and unknown fields are not kept. */
export interface UpFrame {
  mid: string | undefined;
  contentType: ContentType;
  content: Obj;
}

/** The guide's `msg` of a down frame, by contentType (an EVENT answering an ACTIVITY says "Activity success"). */
export const DOWN_MSG: Readonly<Record<ContentType, string>> = {
  TEXT: 'Event success',
  AUDIO: 'Event success',
  EVENT: 'Event success',
  PING: 'Event success',
  PONG: 'Event success',
  ASR: 'ASR success',
  AGENT: 'LLM success',
  TTS: 'TTS success',
  ACTIVITY: 'LLM success',
};
export const ACTIVITY_MSG = 'Activity success';

/**
 * A frame from the service: `{code: 200, msg, requestId, mid, contentType, content, t}`, in that key order;
 * `mid` is null where the guide has it so, and a PONG has no `content` at all.
 */
export interface DownFrame {
  code: 200;
  msg: string;
  requestId: string;
  mid: string | null;
  contentType: ContentType;
  content?: Obj;
  t: number;
}

export function downFrame(f: {
  requestId: string;
  mid: string | null;
  contentType: ContentType;
  content?: Obj;
  t: number;
  msg?: string;
}): string {
  const frame: DownFrame = {
    code: 200,
    msg: f.msg ?? DOWN_MSG[f.contentType],
    requestId: f.requestId,
    mid: f.mid,
    contentType: f.contentType,
    ...(f.content !== undefined && { content: f.content }),
    t: f.t,
  };
  return JSON.stringify(frame);
}

export function upFrame(contentType: ContentType, content: Obj, mid?: string): string {
  // JSON.stringify leaves out a mid that is undefined: no spread needed for that.
  return JSON.stringify({ mid, contentType, content });
}

/** An EVENT's content: `{eventType, eventData}` plus extra fields such as `roundId`, which go first as in the guide's frames. */
export function eventContent(eventType: ConversationEvent, eventData: Obj = {}, extra: Obj = {}): Obj {
  return { ...extra, eventType, eventData };
}

/** The service's error frame, `{code: 400, msg}`, as the guide shows it (no envelope). */
export function conversationErrorBody(msg: string): string {
  return JSON.stringify({ code: 400, msg });
}

export type ParsedUpFrame = { ok: true; frame: UpFrame } | { ok: false; msg: string };

function isObject(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Reads an up frame; a refusal's msg says what is wrong so an app developer can fix the frame. */
export function parseUpFrame(text: string): ParsedUpFrame {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return { ok: false, msg: 'malformed frame: not JSON' };
  }
  if (!isObject(parsed)) return { ok: false, msg: 'malformed frame: expected a JSON object' };
  const { mid, contentType, content } = parsed;
  if (typeof contentType !== 'string' || !CONTENT_TYPES.includes(contentType)) {
    return { ok: false, msg: `malformed frame: contentType must be one of ${CONTENT_TYPES.join(', ')}` };
  }
  if (mid !== undefined && typeof mid !== 'string') return { ok: false, msg: 'malformed frame: mid must be a string' };
  if (content !== undefined && !isObject(content)) return { ok: false, msg: 'malformed frame: content must be an object' };
  return { ok: true, frame: { mid, contentType: contentType as ContentType, content: content ?? {} } };
}

/** The eventType of an EVENT frame's content, if it has one. */
export function eventTypeOf(frame: { contentType: string; content: Obj }): string | undefined {
  if (frame.contentType !== ContentType.EVENT) return undefined;
  const type = frame.content['eventType'];
  return typeof type === 'string' ? type : undefined;
}

/** `contentType` botlink speaks in; the cloud never sends it. */
export const BOTLINK_CONTENT_TYPE = 'BOTLINK';

/**
 * Whether a text frame is the `EVENT` `eventType`: a substring search first, so only the rare frame
 * that mentions the event is parsed (a TTS frame saying its name is not one).
 */
export function isConversationEvent(frame: Buffer, eventType: string): boolean {
  if (!frame.includes(eventType)) return false;
  let parsed: unknown;
  try {
    parsed = JSON.parse(frame.toString('utf8'));
  } catch {
    return false;
  }
  if (typeof parsed !== 'object' || parsed === null) return false;
  const { contentType, content } = parsed as Record<string, unknown>;
  return (
    contentType === 'EVENT' &&
    typeof content === 'object' &&
    content !== null &&
    (content as Record<string, unknown>)['eventType'] === eventType
  );
}

export interface LinkStateData {
  state: string;
  sessionId: string | null;
  retryInMs?: number;
}

/** botlink's state frame to an app: `{"contentType":"BOTLINK","content":{"eventType":"LINK_STATE","eventData":…}}`. */
export function linkStateFrame(data: LinkStateData): string {
  return JSON.stringify({ contentType: BOTLINK_CONTENT_TYPE, content: { eventType: 'LINK_STATE', eventData: data } });
}

/** The LINK_STATE data of a frame an app got (parsed JSON), else undefined: what linkStateFrame wrote, read back. */
export function readLinkState(frame: unknown): LinkStateData | undefined {
  if (!isObject(frame) || frame['contentType'] !== BOTLINK_CONTENT_TYPE) return undefined;
  const content = frame['content'];
  if (!isObject(content) || content['eventType'] !== 'LINK_STATE') return undefined;
  const data = content['eventData'];
  if (!isObject(data) || typeof data['state'] !== 'string') return undefined;
  const { sessionId, retryInMs } = data;
  return {
    state: data['state'],
    sessionId: typeof sessionId === 'string' ? sessionId : null,
    ...(typeof retryInMs === 'number' && { retryInMs }),
  };
}
