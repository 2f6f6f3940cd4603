/**
 * `botlink watch`'s reading of what an observer gets (DESIGN §3.5): the cloud's frames and botlink's
 * LINK_STATE as the few things a technician follows, one line each; reply pieces are held per round
 * and said whole when the round ends. No I/O: frames in, events out.
 */

import { localClock } from '../log-lines.js';
import type { LinkStateData } from '../../protocol/conversation.js';
import { obj, readDownFrame } from '../../protocol/round-reader.js';
import { printable, printableJson } from '../printable.js';

export type WatchEvent =
  | { type: 'link'; state: string; sessionId?: string; retryInMs?: number }
  | { type: 'heard'; text: string }
  | { type: 'input'; roundId: string; text: string }
  | { type: 'reply'; roundId: string; text: string }
  | { type: 'cut'; roundId: string; text: string }
  | { type: 'lost'; roundId: string; text: string }
  | { type: 'empty'; roundId: string }
  | { type: 'refused'; roundId: string }
  | { type: 'error'; code: number; msg: string }
  | { type: 'voice-config' }
  | { type: 'proactive'; text: string }
  | { type: 'event'; eventType: string; roundId: string; eventData: unknown };

/** Reply text so far of each round still open, by roundId. */
export type OpenRounds = ReadonlyMap<string, string>;

/** Rounds held at once: a round the cloud never ends must not grow the map for ever. */
const MAX_OPEN_ROUNDS = 16;
/** Events whose line would say nothing a technician follows: subtitles of what the reply says (TTS_COMPLETE is readDownFrame's tts-complete). */
const QUIET_EVENTS: ReadonlySet<string> = new Set(['TTS_SENTENCE_START']);

/** A LINK_STATE: its event; when the link left `connected`, the rounds still open are lost and said so. */
export function watchLinkState(open: OpenRounds, s: LinkStateData): { open: OpenRounds; events: WatchEvent[] } {
  const link: WatchEvent = {
    type: 'link',
    state: s.state,
    ...(s.sessionId !== null && { sessionId: s.sessionId }),
    ...(s.retryInMs !== undefined && { retryInMs: s.retryInMs }),
  };
  if (s.state === 'connected') return { open, events: [link] };
  const lost: WatchEvent[] = [...open].map(([roundId, text]) => ({ type: 'lost', roundId, text }));
  return { open: new Map(), events: [...lost, link] };
}

/** One cloud frame (parsed JSON): the rounds still open after it and what to tell. */
export function watchFrame(open: OpenRounds, frame: unknown): { open: OpenRounds; events: WatchEvent[] } {
  const event = readDownFrame(frame);
  const ending = (roundId: string): Map<string, string> => {
    const next = new Map(open);
    next.delete(roundId);
    return next;
  };
  switch (event.kind) {
    case 'asr':
      return { open, events: event.final ? [{ type: 'heard', text: event.text }] : [] };
    case 'start':
      return { open: withRound(open, event.roundId, ''), events: [{ type: 'input', roundId: event.roundId, text: event.input }] };
    case 'piece':
      return { open: withRound(open, event.roundId, (open.get(event.roundId) ?? '') + event.text), events: [] };
    case 'complete':
      return { open: ending(event.roundId), events: [{ type: 'reply', roundId: event.roundId, text: open.get(event.roundId) ?? '' }] };
    case 'interrupted':
      return { open: ending(event.roundId), events: [{ type: 'cut', roundId: event.roundId, text: open.get(event.roundId) ?? '' }] };
    case 'empty':
      return { open: ending(event.roundId), events: [{ type: 'empty', roundId: event.roundId }] };
    case 'refused':
      return { open: ending(event.roundId), events: [{ type: 'refused', roundId: event.roundId }] };
    case 'error':
      return { open, events: [{ type: 'error', code: event.code, msg: event.msg }] };
    case 'voice-config':
      return { open, events: [{ type: 'voice-config' }] };
    case 'audio':
    case 'tts-complete':
      return { open, events: [] };
    default:
      return { open, events: otherEvents(obj(frame)) };
  }
}

/** What readDownFrame leaves as `other`: skills and custom events, the greeting, proactive text. */
function otherEvents(frame: Record<string, unknown>): WatchEvent[] {
  const content = obj(frame['content']);
  const roundId = typeof content['roundId'] === 'string' ? content['roundId'] : '';
  if (frame['contentType'] === 'ACTIVITY' && typeof content['content'] === 'string')
    return [{ type: 'proactive', text: content['content'] }];
  if (frame['contentType'] !== 'EVENT') return [];
  // CLIENT_CHAT_CONTEXT_RECEIVED names itself in activityType, not eventType (DESIGN §1.7).
  const name = content['eventType'] ?? content['activityType'];
  if (typeof name !== 'string' || QUIET_EVENTS.has(name)) return [];
  return [{ type: 'event', eventType: name, roundId, eventData: content['eventData'] ?? content['activityData'] ?? null }];
}

function withRound(open: OpenRounds, roundId: string, text: string): OpenRounds {
  const next = new Map(open);
  next.set(roundId, text);
  const oldest = next.keys().next().value;
  if (next.size > MAX_OPEN_ROUNDS && oldest !== undefined) next.delete(oldest);
  return next;
}

/**
 * One output line: `--json` the event with its time, else the local time and the event in words;
 * printable either way, for every field but the time comes from the cloud or an app.
 */
export function watchLine(event: WatchEvent, atMs: number, json: boolean): string {
  if (json) return printableJson({ at: new Date(atMs).toISOString(), ...event });
  return `${localClock(new Date(atMs))} ${printable(words(event))}`;
}

/** Event data on one line, cut short: a skill's arguments, not a page of JSON. */
const brief = (v: unknown): string => {
  const text = JSON.stringify(v) ?? '';
  return text.length > 200 ? `${text.slice(0, 199)}…` : text;
};
const round = (roundId: string): string => (roundId === '' ? '' : ` [${roundId}]`);

function words(e: WatchEvent): string {
  switch (e.type) {
    case 'link': {
      const retry = e.retryInMs === undefined ? '' : `, retry in ${Math.round(e.retryInMs / 100) / 10} s`;
      return `link ${e.state}${retry}${e.sessionId ? ` (session ${e.sessionId})` : ''}`;
    }
    case 'heard':
      return `heard: ${e.text}`;
    case 'input':
      return `input${round(e.roundId)}: ${e.text}`;
    case 'reply':
      return `reply${round(e.roundId)}: ${e.text}`;
    case 'cut':
      return `cut${round(e.roundId)} (CALL_AGENT_INTERRUPTED): ${e.text}`;
    case 'lost':
      return `lost${round(e.roundId)} (the link went down mid-round): ${e.text}`;
    case 'empty':
      return `empty${round(e.roundId)}: nothing to answer (EMPTY_CONTENT)`;
    case 'refused':
      return `refused${round(e.roundId)}: the input failed moderation (USER_AUDIT_FAIL)`;
    case 'error':
      return `error ${e.code}: ${e.msg}`;
    case 'voice-config':
      return 'voice config accepted (SERVER_VOICE_CHAT_UPDATED)';
    case 'proactive':
      return `proactive: ${e.text}`;
    case 'event':
      return `event ${e.eventType}${round(e.roundId)}${e.eventData === null ? '' : ` ${brief(e.eventData)}`}`;
  }
}
