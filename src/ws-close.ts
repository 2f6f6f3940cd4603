import WebSocket from 'ws';

/** The part of a clock a grace needs (the agent's Clock has it; the service passes real timers). */
export interface GraceTimers {
  /** Calls `fn` once, `ms` from now; the function returned cancels it. */
  setTimer(ms: number, fn: () => void): () => void;
}

/**
 * Closes `ws` with `code` and `reason`, and cuts it if the peer leaves the closing handshake unfinished
 * for `graceMs` (ws alone would wait 30 s). A socket not open (still connecting, or closing already)
 * has no handshake of ours to wait for: it is cut at once. Resolves once it is closed or cut.
 */
export function closeWithin(ws: WebSocket, code: number, reason: string, timers: GraceTimers, graceMs: number): Promise<void> {
  const gone = cutAfter(ws, timers, graceMs);
  if (ws.readyState === WebSocket.OPEN) ws.close(code, reason);
  else ws.terminate();
  return gone;
}

/** Cuts `ws` unless it is closed within `graceMs`: bounds a closing handshake already under way. Resolves once closed or cut. */
export function cutAfter(ws: WebSocket, timers: GraceTimers, graceMs: number): Promise<void> {
  if (ws.readyState === WebSocket.CLOSED) return Promise.resolve();
  return new Promise<void>((resolve) => {
    const cancel = timers.setTimer(graceMs, () => {
      ws.terminate();
      resolve();
    });
    ws.once('close', () => {
      cancel();
      resolve();
    });
  });
}
