// An app of the relay benchmark: one WebSocket (direct to the service, or through a relay) in binary
// audio mode, and what the benchmark times on it: round trips, a window of frames in flight, a stream.
import { once } from 'node:events';
import WebSocket from 'ws';

/** 120 ms of 16 kHz 16-bit mono PCM: the uplink frame. */
export const UP_FRAME_BYTES = 3840;
/** 40 ms of the same: the downlink frame. */
export const DOWN_FRAME_BYTES = 1280;
export const UP_EVERY_MS = 120;
export const DOWN_EVERY_MS = 40;

const VOICE_CONFIG = JSON.stringify({
  mid: 'cfg',
  contentType: 'EVENT',
  content: {
    eventType: 'CLIENT_VOICE_CHAT_UPDATE',
    eventData: { audio: { binary: true, input: { format: 'pcm', sampleRate: 16000 }, output: { format: 'pcm', sampleRate: 16000 } } },
  },
});

type OnFrame = (data: Buffer, isBinary: boolean) => void;

/** Rejects after `ms` unless `p` settles first: a lost frame fails the benchmark instead of hanging it. */
export async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: nothing within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}

export class App {
  readonly #ws: WebSocket;
  #onFrame: OnFrame | undefined;
  #onClose: ((err: Error) => void) | undefined;
  /** Frames received since the app opened. */
  received = 0;

  private constructor(ws: WebSocket) {
    this.#ws = ws;
    ws.on('message', (data: Buffer, isBinary: boolean) => {
      this.received++;
      this.#onFrame?.(data, isBinary);
    });
    ws.on('close', (code) => this.#onClose?.(new Error(`app socket closed (${code})`)));
  }

  /** Opens `url`, sends a binary-audio voice config and waits until the service took it. */
  static async open(url: string, headers: Record<string, string> = {}): Promise<App> {
    const ws = new WebSocket(url, { headers, perMessageDeflate: false });
    const app = new App(ws);
    await within(once(ws, 'open'), 15_000, `open ${url}`);
    const updated = app.#until((d, b) => !b && d.includes('SERVER_VOICE_CHAT_UPDATED'));
    ws.send(VOICE_CONFIG);
    await within(updated, 15_000, `voice config on ${url}`);
    return app;
  }

  /** Resolves on the next frame that matches. */
  #until(match: (data: Buffer, isBinary: boolean) => boolean): Promise<void> {
    return new Promise((resolve, reject) => {
      this.#onClose = reject;
      this.#onFrame = (d, b) => {
        if (!match(d, b)) return;
        this.#onFrame = undefined;
        resolve();
      };
    });
  }

  /** Milliseconds of `n` round trips, one at a time: PING → PONG, or a binary frame → its echo. */
  async roundTrips(n: number, kind: 'ping' | 'binary'): Promise<number[]> {
    const audio = Buffer.alloc(UP_FRAME_BYTES, 0x5a);
    const out: number[] = [];
    const run = async (): Promise<void> => {
      for (let i = 0; i < n; i++) {
        const back = kind === 'ping' ? this.#until((d, b) => !b && d.includes('"PONG"')) : this.#until((_, b) => b);
        const t0 = performance.now();
        this.#ws.send(kind === 'ping' ? `{"mid":"p${i}","contentType":"PING","content":{}}` : audio, { binary: kind === 'binary' });
        await back;
        out.push(performance.now() - t0);
      }
    };
    await within(run(), 60_000, `${n} ${kind} round trips`);
    return out;
  }

  /** Frames per second echoed for `total` binary frames of UP_FRAME_BYTES, `window` of them in flight. */
  throughput(total: number, window: number): Promise<number> {
    const audio = Buffer.alloc(UP_FRAME_BYTES, 0x5a);
    let sent = 0;
    let got = 0;
    const send = (): void => {
      sent++;
      this.#ws.send(audio, { binary: true });
    };
    const run = new Promise<number>((resolve, reject) => {
      this.#onClose = reject;
      const t0 = performance.now();
      this.#onFrame = (_, isBinary) => {
        if (!isBinary) return;
        if (++got === total) {
          this.#onFrame = undefined;
          resolve(total / ((performance.now() - t0) / 1000));
        } else if (sent < total) send();
      };
      while (sent < Math.min(window, total)) send();
    });
    return within(run, 60_000, `${total} frames, ${window} in flight`);
  }

  /** Sends a frame of UP_FRAME_BYTES every UP_EVERY_MS until the returned function is called. */
  streamUp(): { sent: () => number; stop: () => void } {
    const audio = Buffer.alloc(UP_FRAME_BYTES, 0x5a);
    let sent = 0;
    const timer = setInterval(() => {
      sent++;
      this.#ws.send(audio, { binary: true });
    }, UP_EVERY_MS);
    return { sent: () => sent, stop: () => clearInterval(timer) };
  }

  close(): void {
    this.#onClose = undefined;
    this.#ws.close();
  }
}
