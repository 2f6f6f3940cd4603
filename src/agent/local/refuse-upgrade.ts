import type { Duplex } from 'node:stream';

/** What an app or observer that comes while the daemon stops is told, with 503. */
export const STOPPING_REFUSAL = 'botlink is stopping: connect again once it runs';

const REASONS = { 404: 'Not Found', 409: 'Conflict', 429: 'Too Many Requests', 503: 'Service Unavailable' } as const;

/** Answers an upgrade the relay will not take with a JSON `{code, msg}` (DESIGN §3.5) and hangs up. */
export function refuseUpgrade(socket: Duplex, code: keyof typeof REASONS, msg: string): void {
  const body = JSON.stringify({ code, msg });
  socket.end(
    `HTTP/1.1 ${code} ${REASONS[code]}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    () => socket.destroy(),
  );
}
