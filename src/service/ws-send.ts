import { WebSocket, type RawData } from 'ws';
import { closeWithin } from '../ws-close.js';
import { realTimer } from './real-timer.js';

/** What one session may leave unread on the service before it is closed: a peer that stops reading holds no more. */
export const MAX_UNREAD_BYTES = 4 * 1024 * 1024;
/** Close code and reason for a peer that stopped reading: policy violation. */
export const NOT_READING_CLOSE_CODE = 1008;
export const NOT_READING_REASON = 'client is not reading';
/** How long a peer closed for not reading has to finish the close handshake before its socket is destroyed. */
export const NOT_READING_GRACE_MS = 2000;

export type SendOutcome = 'sent' | 'not-open' | 'overflow';

function byteLength(data: RawData | string): number {
  if (typeof data === 'string') return Buffer.byteLength(data);
  if (Array.isArray(data)) return data.reduce((n, b) => n + b.length, 0);
  return data.byteLength;
}

/**
 * Every frame the service sends to a session goes through here. When the peer already leaves
 * MAX_UNREAD_BYTES unread, the frame is not queued: the socket is closed with 1008, reading from it
 * stops (its sends are what would fill us next), and it is destroyed after NOT_READING_GRACE_MS.
 */
export function sendBounded(ws: WebSocket, data: RawData | string, binary = false): SendOutcome {
  if (ws.readyState !== WebSocket.OPEN) return 'not-open';
  if (ws.bufferedAmount + byteLength(data) > MAX_UNREAD_BYTES) {
    // The close frame waits behind what the peer does not read; ws's own 30 s close timeout is too generous.
    void closeWithin(ws, NOT_READING_CLOSE_CODE, NOT_READING_REASON, { setTimer: realTimer }, NOT_READING_GRACE_MS);
    ws.pause();
    return 'overflow';
  }
  ws.send(data, { binary });
  return 'sent';
}
