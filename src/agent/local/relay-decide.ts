/** The relay's limits and its small pure decisions (DESIGN §3.5). */

import type { LinkStateData } from '../../protocol/conversation.js';
import { MAX_CLOUD_BACKLOG_BYTES, MAX_CLOUD_MESSAGE_BYTES } from '../link/options.js';
import { CLOSE_GRACE_MS } from '../link/socket.js';

/** An app frame over this closes the app with 1009: the cloud takes no more. */
export const MAX_APP_FRAME_BYTES = MAX_CLOUD_MESSAGE_BYTES;
/** An app that leaves this much unread is closed with 1008: the relay holds no more for an app than the link for the cloud. */
export const MAX_APP_BACKLOG_BYTES = MAX_CLOUD_BACKLOG_BYTES;
/** A voice config is a small event: larger app frames are never searched for one. */
export const MAX_VOICE_CONFIG_BYTES = 16 * 1024;
/** A closing app that does not finish its close handshake is cut after this. */
export const APP_CLOSE_GRACE_MS = CLOSE_GRACE_MS;

/** A new LINK_STATE is due when the state or the session changed since the last one the app got. */
export function stateChanged(last: LinkStateData | undefined, next: LinkStateData): boolean {
  return last === undefined || last.state !== next.state || last.sessionId !== next.sessionId;
}

/** The state for the app; `retryInMs` only while waiting, counted down from when the link announced it. */
export function stateData(state: string, sessionId: string | null, retryAtMono: number | undefined, nowMono: number): LinkStateData {
  const waiting = (state === 'backoff' || state === 'displaced') && retryAtMono !== undefined;
  return { state, sessionId, ...(waiting && { retryInMs: Math.max(0, Math.round(retryAtMono - nowMono)) }) };
}
