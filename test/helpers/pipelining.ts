// Clients that pipeline HTTP/1.1 requests on the local API's Unix socket: a flood that never reads its
// answers (issue 27's attack), one that reads them all, and one honest request at a time.
import { request } from 'node:http';
import { connect, type Socket } from 'node:net';

/** One GET as an HTTP/1.1 client must send it: without Host, Node answers 400 and closes, and no flood builds up. */
export const pipelined = (path: string): string => `GET ${path} HTTP/1.1\r\nHost: localhost\r\n\r\n`;

/** What one write of the flood holds: enough requests to fill a 64 KiB read of the daemon's several times over. */
const FLOOD_WRITE_REQUESTS = 4096;

/**
 * `connections` clients, each writing `GET path` over and over on one connection as fast as the socket
 * takes it and never reading; one the daemon cuts connects again at once, until stop().
 */
export class Flood {
  /** Connections the daemon ended while the flood ran. */
  cuts = 0;
  /** Connections opened, the first of each client included. */
  opened = 0;
  #running = true;
  readonly #sockets = new Set<Socket>();
  readonly #clients: Promise<void>[];

  constructor(
    readonly socketPath: string,
    connections: number,
    path = '/v1/metrics',
  ) {
    const chunk = Buffer.from(pipelined(path).repeat(FLOOD_WRITE_REQUESTS));
    this.#clients = Array.from({ length: connections }, () => this.#client(chunk));
  }

  async #client(chunk: Buffer): Promise<void> {
    while (this.#running) {
      await this.#connection(chunk);
      // A connection refused or cut at once must not spin this process.
      await new Promise((resolve) => setImmediate(resolve));
    }
  }

  /** One connection's life: write until the daemon stops taking bytes, wait, write again; resolves when it closes. */
  #connection(chunk: Buffer): Promise<void> {
    return new Promise((resolve) => {
      const s = connect(this.socketPath);
      this.#sockets.add(s);
      // Never read: whatever the daemon answers stays in the kernel's buffers and in the daemon.
      s.pause();
      const pump = (): void => {
        while (this.#running && !s.destroyed && s.write(chunk));
      };
      s.once('connect', () => {
        this.opened++;
        pump();
      });
      s.on('drain', pump);
      s.on('error', () => undefined);
      s.once('close', () => {
        this.#sockets.delete(s);
        if (this.#running) this.cuts++;
        resolve();
      });
    });
  }

  /** Ends every connection and every client. */
  async stop(): Promise<void> {
    this.#running = false;
    for (const s of this.#sockets) s.destroy();
    await Promise.all(this.#clients);
  }
}

export interface Answer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Answers at the head of `buf`, each with its bytes; stops at the first incomplete one. */
function parseAnswers(buf: Buffer): { answers: Answer[]; used: number } {
  const answers: Answer[] = [];
  let at = 0;
  for (;;) {
    const end = buf.indexOf('\r\n\r\n', at);
    if (end < 0) break;
    const [statusLine = '', ...lines] = buf.toString('latin1', at, end).split('\r\n');
    const headers = Object.fromEntries(
      lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()] as const),
    );
    const length = Number(headers['content-length'] ?? 0);
    if (buf.length < end + 4 + length) break;
    answers.push({ status: Number(statusLine.split(' ')[1]), headers, body: buf.toString('utf8', end + 4, end + 4 + length) });
    at = end + 4 + length;
  }
  return { answers, used: at };
}

/**
 * Writes a GET for each of `paths` in one write on one connection, then reads every answer: resolves with
 * them in the order they came once `paths.length` have, or with what came before the daemon closed.
 */
export function pipelineReading(socketPath: string, paths: readonly string[]): Promise<{ answers: Answer[]; closed: boolean }> {
  return new Promise((resolve, reject) => {
    const s = connect(socketPath);
    const answers: Answer[] = [];
    let pending = Buffer.alloc(0);
    s.on('data', (d: Buffer) => {
      pending = Buffer.concat([pending, d]);
      const parsed = parseAnswers(pending);
      answers.push(...parsed.answers);
      pending = pending.subarray(parsed.used);
      if (answers.length < paths.length) return;
      s.destroy();
      resolve({ answers, closed: false });
    });
    s.on('error', reject);
    s.on('close', () => resolve({ answers, closed: true }));
    s.write(paths.map(pipelined).join(''));
  });
}

/** One GET on a connection of its own, as `botlink status` asks: the status and how long the answer took. */
export function ask(socketPath: string, path: string): Promise<{ status: number; ms: number; body: string }> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    request({ socketPath, path, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, ms: performance.now() - started, body }));
      res.on('error', reject);
    })
      .on('error', reject)
      .end();
  });
}

/** `clients` honest clients, each asking `path` on a connection of its own, again as soon as answered, for `ms`: the answers they got. */
export async function askAsFastAsAnswered(socketPath: string, clients: number, ms: number, path = '/v1/metrics'): Promise<number> {
  const until = performance.now() + ms;
  let answered = 0;
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (performance.now() < until) if ((await ask(socketPath, path)).status === 200) answered++;
    }),
  );
  return answered;
}
