import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';

/**
 * Answers on a bare socket (a refused upgrade, a request node could not parse) with a complete
 * HTTP/1.1 response carrying a JSON body and the server's Date, then closes the socket.
 */
export function writeRawResponse(socket: Duplex, status: number, body: string | object, nowMs: number): void {
  const payload = typeof body === 'string' ? body : JSON.stringify(body);
  const head = [
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}`,
    `Date: ${new Date(nowMs).toUTCString()}`,
    'Content-Type: application/json; charset=utf-8',
    `Content-Length: ${Buffer.byteLength(payload)}`,
    'Connection: close',
  ].join('\r\n');
  socket.end(`${head}\r\n\r\n${payload}`, () => socket.destroy());
}
