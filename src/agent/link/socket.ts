import type { LookupFunction } from 'node:net';
import WebSocket from 'ws';
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
