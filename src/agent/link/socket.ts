import type { LookupFunction } from 'node:net';
import WebSocket from 'ws';
import type { Cancel } from '../time/clock.js';
import { MAX_CLOUD_MESSAGE_BYTES } from './options.js';

/** A closing handshake the peer leaves unfinished is cut after this (ws would wait 30 s). */
export const CLOSE_GRACE_MS = 2000;

/** The cloud socket: no compression (audio does not shrink), no redirects, frames bounded. */
export function openCloudSocket(url: URL, token: string, lookup: LookupFunction | undefined): WebSocket {
  return new WebSocket(url, {
    headers: { Authorization: `Bearer ${token}` },
    perMessageDeflate: false,
    followRedirects: false,
    maxPayload: MAX_CLOUD_MESSAGE_BYTES,
    closeTimeout: CLOSE_GRACE_MS,
    ...(lookup && { lookup }),
  });
}

/** Closes with 1000 and resolves once closed, cutting the socket when the peer does not finish within the grace. */
export function closeWithin(ws: WebSocket, reason: string, timer: (ms: number, fn: () => void) => Cancel): Promise<void> {
  if (ws.readyState === WebSocket.CLOSED) return Promise.resolve();
  return new Promise<void>((resolve) => {
    const cancelForce = timer(CLOSE_GRACE_MS, () => {
      ws.terminate();
      resolve();
    });
    ws.once('close', () => {
      cancelForce();
      resolve();
    });
    if (ws.readyState === WebSocket.OPEN) ws.close(1000, reason);
    else ws.terminate();
  });
}
