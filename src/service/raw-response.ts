import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import { writeRawResponse } from '../raw-response.js';

const CLIENT_ERROR_STATUS: Readonly<Record<string, number>> = {
  ERR_HTTP_REQUEST_TIMEOUT: 408,
  HPE_HEADER_OVERFLOW: 431,
};

/** The http server's 'clientError' listener: node's own 400/408 answers, with our Date and a JSON body. */
export function answerClientError(err: NodeJS.ErrnoException, socket: Duplex, nowMs: number): void {
  if (err.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy();
    return;
  }
  const status = CLIENT_ERROR_STATUS[err.code ?? ''] ?? 400;
  writeRawResponse(socket, status, { code: status, msg: STATUS_CODES[status] ?? 'bad request' }, nowMs);
}
