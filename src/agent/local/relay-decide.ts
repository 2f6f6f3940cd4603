/** The relay's limits and its small pure decisions (DESIGN §3.5). */

import { isConversationEvent, type LinkStateData } from '../../protocol/conversation.js';
import { MAX_CLOUD_BACKLOG_BYTES, MAX_CLOUD_MESSAGE_BYTES } from '../link/options.js';
import { fitOf, sameParams, type ConnParams, type OpenedWith } from '../link/params.js';
import { CLOSE_GRACE_MS } from '../link/socket.js';

/** An app frame over this closes the app with 1009: the cloud takes no more. */
export const MAX_APP_FRAME_BYTES = MAX_CLOUD_MESSAGE_BYTES;
/** An app that leaves this much unread is closed with 1008: the relay holds no more for an app than the link for the cloud. */
export const MAX_APP_BACKLOG_BYTES = MAX_CLOUD_BACKLOG_BYTES;
/** The events the relay looks for (the app's voice config, the cloud's greeting) are small: larger frames are never searched. */
export const MAX_SEARCHED_EVENT_BYTES = 16 * 1024;
/** A closing app that does not finish its close handshake is cut after this. */
export const APP_CLOSE_GRACE_MS = CLOSE_GRACE_MS;

/** Whether a frame is the conversation event `eventType`, e.g. CLIENT_VOICE_CHAT_UPDATE or CFG_BOT_EVENT. */
export function isSmallEvent(data: Buffer, isBinary: boolean, eventType: string): boolean {
  return !isBinary && data.length <= MAX_SEARCHED_EVENT_BYTES && isConversationEvent(data, eventType);
}

/** A new LINK_STATE is due when the state or the session changed since the last one the app got. */
export function stateChanged(last: LinkStateData | undefined, next: LinkStateData): boolean {
  return last === undefined || last.state !== next.state || last.sessionId !== next.sessionId;
}

/** The state for the app; `retryInMs` only while waiting, counted down from when the link announced it. */
export function stateData(state: string, sessionId: string | null, retryAtMono: number | undefined, nowMono: number): LinkStateData {
  const waiting = (state === 'backoff' || state === 'displaced') && retryAtMono !== undefined;
  return { state, sessionId, ...(waiting && { retryInMs: Math.max(0, Math.round(retryAtMono - nowMono)) }) };
}

/** The link's current (or last) cloud socket as the relay knows it: what it was opened with, and who conversed on it. */
export interface SocketSeen {
  readonly opened: OpenedWith;
  /** The parameters of the app that conversed on it, once one did. */
  spentBy: ConnParams | undefined;
}

/**
 * How an app with `wanted` parameters may use the socket: `kept` (they fit it, nobody conversed on it),
 * `reused` (an app conversed on it, and these are its parameters or name this very socket: the same app
 * coming back), `reattach` (they fit, but another app conversed on it, so the cloud holds its voice
 * config, its history and maybe the tail of a round: this app needs a session of its own) or `other`
 * (other parameters, or no socket yet: another socket).
 */
export type SocketUse = 'kept' | 'reused' | 'reattach' | 'other';

export function socketUse(socket: SocketSeen | undefined, wanted: ConnParams): SocketUse {
  const fit = fitOf(socket?.opened, wanted);
  if (socket === undefined || fit === 'other') return 'other';
  if (socket.spentBy === undefined) return 'kept';
  return fit === 'exact' || sameParams(socket.spentBy, wanted) ? 'reused' : 'reattach';
}
