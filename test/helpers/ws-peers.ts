import type { EventEmitter } from 'node:events';
import { createServer, type IncomingMessage } from 'node:http';
import { createServer as createTcpServer, type AddressInfo, type Socket } from 'node:net';
import { WebSocketServer } from 'ws';
import { WsMessage } from '../../src/protocol/codes.js';
import { wsFailureBody } from '../../src/protocol/wire.js';

const PATH = '/soulmate/voiceChat/v1';

/**
 * A bare ws server on 127.0.0.1 that never answers pings by itself; `refuse` may answer a handshake
 * with an HTTP status and a body instead. `upgrades` counts the handshakes it was asked for.
 */
export async function rawWsServer(refuse?: (req: IncomingMessage) => { status: number; body: string } | undefined) {
  const server = createServer();
  const wss = new WebSocketServer({ noServer: true, autoPong: false });
  const peer = { upgrades: 0 };
  server.on('upgrade', (req, socket, head) => {
    peer.upgrades++;
    const answer = refuse?.(req);
    if (answer) {
      const { status, body } = answer;
      socket.end(
        `HTTP/1.1 ${status} Refused\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
      );
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => wss.emit('connection', ws, req));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return Object.assign(peer, {
    url: `ws://127.0.0.1:${port}${PATH}`,
    wss,
    close: () =>
      new Promise<void>((resolve) => {
        for (const c of wss.clients) c.terminate();
        wss.close();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  });
}

/**
 * A loopback server that refuses every upgrade with HTTP 401 and a JSON body announced in full but
 * sent one byte every 50 ms (a minute in all), as a broken proxy or a hostile cloud might.
 */
export async function tricklingRefusal() {
  const body = Buffer.from(wsFailureBody(WsMessage.UNAUTHORIZED).padEnd(1200, ' '));
  let hangUp: (bodyBytesSent: number) => void;
  const firstHangUp = new Promise<number>((resolve) => (hangUp = resolve));
  let asked: () => void;
  const firstRequest = new Promise<void>((resolve) => (asked = resolve));
  const sockets = new Set<Socket>();
  const server = createTcpServer((socket) => {
    sockets.add(socket);
    socket.once('data', () => {
      socket.write(`HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`);
      asked();
      let sent = 0;
      const timer = setInterval(() => sent < body.length && socket.write(body.subarray(sent, ++sent)), 50);
      socket.on('close', () => {
        clearInterval(timer);
        hangUp(sent);
      });
    });
    socket.on('error', () => undefined);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `ws://127.0.0.1:${port}${PATH}`,
    bodyLength: body.length,
    /** The first upgrade request arrived and its refusal's head was written. */
    firstRequest,
    /** How much of its body the first connection had been sent when the link hung up. */
    firstHangUp,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/**
 * The PONG frame among the `message`s `emitter` emits, other frames skipped: the one with this mid (a test peer
 * echoes it), or any (the reference service's PONG carries its own mid, as the guide's does).
 */
export function pongFrame(emitter: EventEmitter, mid?: string): Promise<void> {
  return new Promise((resolve) => {
    const on = (data: Buffer): void => {
      const text = data.toString();
      if (!text.includes('"PONG"') || (mid !== undefined && !text.includes(`"mid":"${mid}"`))) return;
      emitter.off('message', on);
      resolve();
    };
    emitter.on('message', on);
  });
}
