import { once } from 'node:events';
import { WebSocket } from 'ws';

/** One frame a conversation client received; `json` when it is a JSON text frame. */
export interface Frame {
  binary: boolean;
  data: Buffer;
  json: Record<string, unknown> | undefined;
}

export type FramePredicate = (f: Frame) => boolean;

function parse(data: Buffer): Record<string, unknown> | undefined {
  try {
    const v: unknown = JSON.parse(data.toString('utf8'));
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** The `content` of a JSON frame. */
export function contentOf(f: Frame): Record<string, unknown> {
  return (f.json?.['content'] ?? {}) as Record<string, unknown>;
}

/** Matches an EVENT frame of this eventType. */
export const isEvent =
  (eventType: string): FramePredicate =>
  (f) =>
    f.json?.['contentType'] === 'EVENT' && contentOf(f)['eventType'] === eventType;

/** Matches a JSON frame of this contentType. */
export const isContent =
  (contentType: string): FramePredicate =>
  (f) =>
    f.json?.['contentType'] === contentType;

/** A WebSocket that records every frame from its first byte and waits on frames by content, never by time. */
export class ConversationClient {
  readonly frames: Frame[] = [];
  readonly closed: Promise<{ code: number; reason: string }>;
  readonly #waiters = new Set<() => void>();

  private constructor(readonly ws: WebSocket) {
    ws.on('message', (data: Buffer, binary) => {
      this.frames.push({ binary, data, json: binary ? undefined : parse(data) });
      for (const wake of this.#waiters) wake();
    });
    this.closed = new Promise((resolve) =>
      ws.once('close', (code, reason) => {
        resolve({ code, reason: reason.toString('utf8') });
        for (const wake of this.#waiters) wake();
      }),
    );
  }

  /** Opens `wsUrl?botId=…&params…` with the token as Bearer. */
  static async open(wsUrl: string, botId: string, token: string, params: Record<string, string> = {}): Promise<ConversationClient> {
    const url = new URL(wsUrl);
    url.searchParams.set('botId', botId);
    for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v);
    const ws = new WebSocket(url, { headers: { authorization: `Bearer ${token}` } });
    const client = new ConversationClient(ws);
    await once(ws, 'open');
    return client;
  }

  /** Attaches to a daemon's relay as an app, over its local API socket. */
  static async local(socketPath: string, params: Record<string, string> = {}): Promise<ConversationClient> {
    const query = new URLSearchParams(params).toString();
    const ws = new WebSocket(`ws+unix://${socketPath}:/soulmate/voiceChat/v1${query ? `?${query}` : ''}`, { perMessageDeflate: false });
    const client = new ConversationClient(ws);
    await once(ws, 'open');
    return client;
  }

  /** Sends an object as JSON, a string as text, a Buffer as binary. */
  send(frame: Record<string, unknown> | string | Buffer): void {
    this.ws.send(typeof frame === 'string' || Buffer.isBuffer(frame) ? frame : JSON.stringify(frame));
  }

  /** The index of the first frame at or after `from` that matches; waits for it; fails if the socket closes first. */
  async indexOf(match: FramePredicate, from = 0, what = 'a matching frame'): Promise<number> {
    for (;;) {
      const i = this.frames.findIndex((f, n) => n >= from && match(f));
      if (i >= 0) return i;
      if (this.ws.readyState === WebSocket.CLOSED) {
        throw new Error(
          `closed before ${what}; frames: ${this.frames.map((f) => (f.binary ? `<${f.data.length} bytes>` : f.data.toString())).join('\n')}`,
        );
      }
      await new Promise<void>((resolve) => {
        const wake = (): void => {
          this.#waiters.delete(wake);
          resolve();
        };
        this.#waiters.add(wake);
      });
    }
  }

  /** The frames from `from` up to and including the first COMPLETE or CALL_AGENT_INTERRUPTED. */
  async round(from: number): Promise<Frame[]> {
    const end = await this.indexOf((f) => isEvent('COMPLETE')(f) || isEvent('CALL_AGENT_INTERRUPTED')(f), from, 'the end of a round');
    return this.frames.slice(from, end + 1);
  }

  terminate(): void {
    this.ws.terminate();
  }
}
