/**
 * One displacement (DESIGN §3.7, revoke --displace). The cloud ends no token early and closes a socket only
 * when another connects for its botId (§1.4), so a revoked device's open socket would outlive the revoke:
 * the broker gets a token of its own for the botId, opens one WebSocket with it and closes it at once.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import WebSocket from 'ws';
import type { CloudClient } from '../cloud/client.js';
import type { Clock } from '../clock.js';
import { WsMessage } from '../protocol/codes.js';
import { messageOf } from '../protocol/errors.js';
import { parseWsFailure } from '../protocol/wire.js';
import type { CloudGate } from './cloud-gate.js';

/** The whole displacement, token and socket, gives up after this. */
export const DISPLACE_TIMEOUT_MS = 10_000;
/** Once the socket opened (the displacement is done), its closing handshake gets this long before it is cut. */
const CLOSE_GRACE_MS = 2_000;
/** Of a refused handshake's body, only this much is read: enough for `{code, msg}`. */
const MAX_REFUSAL_BYTES = 1024;

export type Displacement = { outcome: 'displaced' } | { outcome: 'failed'; reason: string };

export interface DisplacerDeps {
  /** The account's client: it signs getToken for the botId, as it does for the devices. */
  cloud: Pick<CloudClient, 'getToken'>;
  /** The cloud's socket address, without botId (voiceChatUrl of the broker's baseUrl). */
  wsUrl: string;
  clock: Clock;
  /** The broker's cap on cloud calls; an operator's command has none. */
  gate?: Pick<CloudGate, 'run'>;
}

/**
 * Displaces whatever socket holds `botId`: a token of the broker's own, one socket opened with it and closed
 * at once. Never rejects: a failure (the cloud away or refusing, DISPLACE_TIMEOUT_MS passed, `signal`
 * aborted) is told in words that hold no token.
 */
export function displace(d: DisplacerDeps, botId: string, signal?: AbortSignal): Promise<Displacement> {
  return new Promise((resolve) => {
    let socket: WebSocket | undefined;
    let settled = false;
    const finish = (result: Displacement): void => {
      if (settled) return;
      settled = true;
      cancelDeadline();
      cancelGrace();
      signal?.removeEventListener('abort', onAbort);
      socket?.terminate();
      resolve(result);
    };
    const failed = (reason: string): void => finish({ outcome: 'failed', reason });
    const onAbort = (): void => failed('the broker is stopping');
    let cancelGrace = (): void => undefined;
    const cancelDeadline = d.clock.setTimer(DISPLACE_TIMEOUT_MS, () => failed(`no displacement within ${DISPLACE_TIMEOUT_MS / 1000} s`), {
      ref: true,
    });
    if (signal?.aborted) return onAbort();
    signal?.addEventListener('abort', onAbort, { once: true });
    const getToken = () => d.cloud.getToken({ kind: 'bot', id: botId }, d.clock.wallNow());
    (d.gate ? d.gate.run(getToken) : getToken()).then(
      ({ accessToken }) => {
        if (settled) return;
        try {
          socket = open(d.wsUrl, botId, accessToken);
        } catch (err) {
          return failed(`cannot open the socket (${messageOf(err)})`);
        }
        let opened = false;
        socket.on('open', () => {
          opened = true;
          // The cloud displaced the old socket when it accepted this one: nothing is left to wait for but the close.
          cancelGrace = d.clock.setTimer(CLOSE_GRACE_MS, () => finish({ outcome: 'displaced' }), { ref: true });
          socket?.close(1000);
        });
        socket.on('message', (data, isBinary) => {
          const failure = isBinary ? undefined : parseWsFailure(data.toString(), { bare: false });
          if (failure !== undefined && failure !== WsMessage.REPEAT_SESSION) failed(`the cloud refused the socket: ${failure}`);
        });
        socket.on('close', (code, reason) => {
          const failure = parseWsFailure(reason.toString('utf8'));
          if (failure !== undefined && failure !== WsMessage.REPEAT_SESSION) failed(`the cloud refused the socket: ${failure}`);
          else if (opened) finish({ outcome: 'displaced' });
          else failed(`the cloud closed the socket before it opened (${code})`);
        });
        socket.on('unexpected-response', (_req, res: IncomingMessage) => refusal(res).then(failed));
        socket.on('error', (err) => failed(`cannot open the socket (${codeOf(err)})`));
      },
      (err: unknown) => failed(`no token for the botId: ${messageOf(err)}`),
    );
  });
}

/** The largest frame the displacing socket reads: the guide's refusal frames are a few hundred bytes. */
const MAX_DISPLACE_FRAME_BYTES = 64 * 1024;

function open(wsUrl: string, botId: string, accessToken: string): WebSocket {
  const url = new URL(wsUrl);
  url.searchParams.set('botId', botId);
  // A session of its own, as the guide advises for every connection (DESIGN §1.7).
  url.searchParams.set('sessionId', randomUUID());
  // Only the guide's small refusal frames matter here: a peer's larger message ends the socket, never grows a buffer.
  return new WebSocket(url, {
    headers: { Authorization: `Bearer ${accessToken}` },
    perMessageDeflate: false,
    followRedirects: false,
    maxPayload: MAX_DISPLACE_FRAME_BYTES,
  });
}

/** A refused handshake in words: the failure its body names, else its status. */
function refusal(res: IncomingMessage): Promise<string> {
  return new Promise((resolve) => {
    let body = '';
    const done = (): void => {
      const failure = parseWsFailure(body);
      resolve(`the cloud refused the socket: ${failure ?? `HTTP ${res.statusCode}`}`);
    };
    res.setEncoding('utf8');
    res.on('data', (chunk: string) => {
      body += chunk;
      if (body.length >= MAX_REFUSAL_BYTES) {
        res.destroy();
        done();
      }
    });
    res.on('end', done);
    res.on('error', done);
  });
}

function codeOf(err: Error): string {
  const code = (err as NodeJS.ErrnoException).code;
  return typeof code === 'string' ? code : err.message;
}
