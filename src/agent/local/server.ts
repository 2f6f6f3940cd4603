import { Server } from 'node:http';
import { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { messageOf } from '../../protocol/errors.js';
import type { Clock } from '../../clock.js';
import { AnswerTurns } from './answer-turns.js';
import { MinuteTally } from './minute-tally.js';
import type { RelayPort } from './relay-port.js';
import { refuseUpgrade } from './refuse-upgrade.js';
import { RequestGate } from './request-gate.js';
import { OBSERVE_PATH, VOICE_CHAT_PATH } from '../../protocol/conversation.js';
import { answer, pathOf, routeOf, type RouteDeps } from './routes.js';
import { type BoundSocket, bindSocket, checkSocketPath, unlinkBound } from './socket-file.js';

/** Node's own HTTP limits for local clients (DESIGN §3.5): small headers, short patience, no body. */
export const LOCAL_LIMITS = Object.freeze({
  maxHeaderSize: 8 * 1024,
  /** A request's headers must arrive within this, its whole self within requestTimeoutMs. */
  headersTimeoutMs: 5_000,
  requestTimeoutMs: 10_000,
  /** An idle keep-alive connection between requests. */
  keepAliveTimeoutMs: 5_000,
  /**
   * An answer the client leaves unread this long, the kernel's buffer (~200 KiB) full of earlier ones,
   * and the connection is cut (issue 27). Until then it holds that one answer and nothing more: the
   * next request is not read. As patient as keep-alive: a client reading its answers takes microseconds.
   */
  unreadTimeoutMs: 5_000,
  /** A connection that sends nothing at all. */
  idleTimeoutMs: 30_000,
  /**
   * How often Node looks for connections over the header and request timeouts (Node's default), so a
   * stalled client goes within this after its timeout, as a silent one does after idleTimeoutMs. Each
   * look wakes the idle daemon: every 1 s cost 8 ms of CPU a minute, 3.5× a minimal client's idle.
   */
  checkIntervalMs: 30_000,
  /**
   * An HTTP connection older than this gets `Connection: close` on its next answer: a client that asks
   * every few seconds never goes idle, and would otherwise hold its slot of the cap for ever.
   */
  httpLifetimeMs: 60_000,
});

/** Node's HTTP server, handed each connection through a RequestGate: its parser sees one request at a time (issue 27). */
class GatedServer extends Server {
  // Node documents 'connection' as the way to hand its HTTP server any Duplex; the listening socket's own go through here too.
  override emit(event: string | symbol, ...args: unknown[]): boolean {
    const [socket] = args;
    if (event === 'connection' && socket instanceof Socket) return super.emit(event, new RequestGate(socket));
    // Node's typings name only string events; EventEmitter emits its errorMonitor symbol through here too, passed as it is.
    return super.emit(event as string, ...args);
  }
}

export interface LocalApiOptions extends RouteDeps {
  path: string;
  clock: Clock;
  /** Connections at once, upgraded ones included (localConnectionsMax); past it new ones are refused at once. */
  maxConnections: number;
  /** The socket's group; null keeps the daemon's own. */
  gid: number | null;
  relay: RelayPort;
  log: Logger;
}

/** The local API (DESIGN §3.5): HTTP/1.1 on one Unix socket whose permissions decide who may connect. */
export class LocalApi {
  readonly #path: string;
  readonly #gid: number | null;
  readonly #relay: RelayPort;
  readonly #log: Logger;
  /** Holds the connection cap too (maxConnections): the server enforces it, and the refusal line reads it there. */
  readonly #server: Server;
  /** Every open connection, upgraded ones too (the server forgets those): stop() cuts what is left. */
  readonly #sockets = new Set<Socket>();
  /** When each connection came (monotonic ms): what the HTTP lifetime counts from. */
  readonly #since = new WeakMap<Duplex, number>();
  /** Each HTTP connection's answers, one request at a time (issue 27), by the gate its requests come through. */
  readonly #turns = new WeakMap<Duplex, AnswerTurns>();
  /** Connections refused at the cap since start, and since the last line said so. */
  #refused = 0;
  /** `path status` → count: paths are the routes and "other", statuses the few the API answers. */
  readonly #requests = new Map<string, number>();
  /** One line a minute at most, however many are refused: a flood must not fill the disk. */
  readonly #refusedLine: MinuteTally;
  #bound: BoundSocket | undefined;

  constructor(opts: LocalApiOptions) {
    this.#path = opts.path;
    this.#gid = opts.gid;
    this.#relay = opts.relay;
    this.#refusedLine = new MinuteTally(opts.clock, (count) => {
      const max = this.#server.maxConnections;
      this.#log.warn({ refused: count, max }, `local API: ${count} connections refused at the cap of ${max}`);
    });
    this.#log = opts.log;
    this.#server = new GatedServer({
      maxHeaderSize: LOCAL_LIMITS.maxHeaderSize,
      headersTimeout: LOCAL_LIMITS.headersTimeoutMs,
      requestTimeout: LOCAL_LIMITS.requestTimeoutMs,
      keepAliveTimeout: LOCAL_LIMITS.keepAliveTimeoutMs,
      connectionsCheckingInterval: LOCAL_LIMITS.checkIntervalMs,
    });
    this.#server.timeout = LOCAL_LIMITS.idleTimeoutMs;
    this.#server.maxConnections = opts.maxConnections;
    this.#server.on('drop', () => this.#onRefused());
    this.#server.on('connection', (gate: RequestGate) => {
      const { socket } = gate;
      this.#sockets.add(socket);
      this.#since.set(gate, opts.clock.monoNow());
      this.#turns.set(gate, new AnswerTurns(gate, opts.clock, LOCAL_LIMITS.unreadTimeoutMs, (unread) => this.#onCut(unread)));
      socket.once('close', () => this.#sockets.delete(socket));
    });
    this.#server.on('request', (req, res) => {
      res.once('finish', () => this.#countRequest(routeOf(req.url), res.statusCode));
      const since = this.#since.get(req.socket);
      if (since !== undefined && opts.clock.monoNow() - since >= LOCAL_LIMITS.httpLifetimeMs) res.shouldKeepAlive = false;
      // A body is never read (the API takes none): the connection ends after its answer, so no byte of it passes for a request.
      if (req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0) res.shouldKeepAlive = false;
      void this.#turns.get(req.socket)?.take(res, () =>
        answer(req, res, opts).catch((err: unknown) => {
          opts.log.error({ err: messageOf(err), url: req.url }, 'local API request failed');
          res.destroy();
        }),
      );
    });
    this.#server.on('upgrade', (req, socket: Duplex, head: Buffer) => this.#upgrade(req, socket, head));
  }

  get path(): string {
    return this.#path;
  }

  /** Open connections now, and those refused at the cap since start (the metrics, §3.5). */
  get connections(): { open: number; refused: number } {
    return { open: this.#sockets.size, refused: this.#refused };
  }

  /** Requests answered since start, by path (a route or "other") and status. */
  get requests(): { path: string; status: number; count: number }[] {
    return [...this.#requests].map(([key, count]) => {
      const at = key.lastIndexOf(' ');
      return { path: key.slice(0, at), status: Number(key.slice(at + 1)), count };
    });
  }

  #countRequest(path: string, status: number): void {
    const key = `${path} ${status}`;
    this.#requests.set(key, (this.#requests.get(key) ?? 0) + 1);
  }

  /** At debug, as every per-connection event: a client cut again and again must not fill the disk. */
  #onCut(unread: number): void {
    this.#log.debug({ unread }, 'local API: cut a connection that left its answer unread');
  }

  #onRefused(): void {
    this.#refused++;
    this.#refusedLine.add();
  }

  /** Binds the socket; a dead one left by a crash is replaced, a live one or any other file is an error. */
  async start(): Promise<void> {
    await checkSocketPath(this.#path);
    this.#bound = await bindSocket(this.#server, this.#path, this.#gid);
    this.#log.info({ socket: this.#path, gid: this.#gid ?? process.getgid?.() }, 'local API listening');
  }

  /** Stops accepting, ends the app's relay and the observers, closes every connection and removes the socket file. */
  async stop(): Promise<void> {
    const bound = this.#bound;
    this.#bound = undefined;
    if (!bound) return;
    const closed = new Promise<void>((resolve) => this.#server.close(() => resolve()));
    await this.#relay.stop();
    this.#server.closeAllConnections();
    // An upgraded connection the relay let go of but its app never closed would hold close() open.
    for (const socket of this.#sockets) socket.destroy();
    this.#refusedLine.stop();
    await closed;
    unlinkBound(bound);
  }

  #upgrade(req: Parameters<RelayPort['handleUpgrade']>[0], gate: Duplex, head: Buffer): void {
    // The relay and the observers get the connection's own socket, as they always did: the gate is for HTTP only.
    const socket = gate instanceof RequestGate ? gate.release() : gate;
    // Nothing listens on an upgraded socket until ws takes it: an app that hangs up at once must not crash the daemon.
    socket.on('error', () => socket.destroy());
    // The relay's path is the cloud's own, so an app written for the cloud changes only its URL (DESIGN §3.5).
    const path = pathOf(req.url);
    const take = path === VOICE_CHAT_PATH ? this.#relay.handleUpgrade : path === OBSERVE_PATH ? this.#relay.handleObserve : undefined;
    if (!take) return refuseUpgrade(socket, 404, `no upgrade here: the relay is on ${VOICE_CHAT_PATH}, observers on ${OBSERVE_PATH}`);
    // The relay owns the connection from here: the server's idle limit is for HTTP only.
    if ('setTimeout' in socket && typeof socket.setTimeout === 'function') socket.setTimeout(0);
    take.call(this.#relay, req, socket, head);
  }
}
