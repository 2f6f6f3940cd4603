import { randomUUID } from 'node:crypto';
import type { EventEmitter } from 'node:events';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type RawData, type WebSocket } from 'ws';
import { WsMessage } from '../protocol/codes.js';
import { ContentType, ConversationEvent, downFrame, eventContent, VOICE_CHAT_PATH } from '../protocol/conversation.js';
import { wsFailureBody } from '../protocol/wire.js';
import type { ServiceContext, ServiceEvents } from './context.js';
import { writeRawResponse } from '../raw-response.js';
import type { WsRefusal, WsRefusalForm } from './faults.js';
import { Conversation } from './conversation/session.js';
import type { StatsRecorder } from './stats.js';
import { bearerAccess, sameIdentity } from './tokens.js';
import { realTimer } from './real-timer.js';
import { MAX_UNREAD_BYTES, sendBounded } from './ws-send.js';

/** Close code sent to a displaced session; 4000 is the first application-defined code. */
export const DISPLACED_CLOSE_CODE = 4000;
/** The largest frame a session may send: the relay's app frame limit (DESIGN §3.5), so whatever it passes on fits. */
export const MAX_FRAME_BYTES = 1024 * 1024;
/** Close code of an in-band refusal (fault knob): policy violation. */
const REFUSED_CLOSE_CODE = 1008;

/**
 * How a displaced session is told (DESIGN §1.4): 'event' (the default) sends the public guide's EVENT frame and
 * closes without a reason; 'code400' sends the seed's `{code:400,msg:"REPEAT_CLIENT_SESSION"}` and closes with that reason.
 */
export type DisplacementMarker = 'code400' | 'event';
export const DISPLACEMENT_MARKERS: readonly DisplacementMarker[] = ['code400', 'event'];

interface Session {
  ws: WebSocket;
  botId: string;
  /** The connection's requestId parameter (DESIGN §1.7), echoed in the frames the service sends. */
  requestId: string;
  /** Answered the last ping. */
  alive: boolean;
  conversation: Conversation;
}

export interface EndpointDeps {
  ctx: ServiceContext;
  stats: StatsRecorder;
  events: EventEmitter<ServiceEvents>;
  pingIntervalMs: number;
  displacementMarker: DisplacementMarker;
  /** Pause between two frames of a conversation round; 0 sends a round at once. */
  roundDelayMs: number;
  /** Free mode: silence after speech that ends an utterance. */
  vadSilenceMs: number;
  /** Whether binary audio is echoed back at once (a benchmark knob, off by default). */
  echoAudio(): boolean;
  /** Waits out the latency fault; never settles once the service is closing. */
  delay(ms: number): Promise<void>;
}

/** WebSocket VOICE_CHAT_PATH: Bearer-authenticated, one session per botId, the conversation subset of §1.7, pings. */
export class VoiceChatEndpoint {
  readonly #deps: EndpointDeps;
  readonly #wss = new WebSocketServer({ noServer: true, clientTracking: false, maxPayload: MAX_FRAME_BYTES });
  /** The current session of each bot. */
  readonly #current = new Map<string, Session>();
  /** Every accepted session until its close, displaced ones included. */
  readonly #open = new Set<Session>();
  /** Sockets accepted only to be refused in-band. */
  readonly #refused = new Set<WebSocket>();
  /** Upgrade requests waiting out the latency fault; node no longer tracks them. */
  readonly #waiting = new Set<Duplex>();
  readonly #pinger: NodeJS.Timeout;

  constructor(deps: EndpointDeps) {
    this.#deps = deps;
    this.#wss.on('headers', (headers) => headers.push(`Date: ${new Date(deps.ctx.now()).toUTCString()}`));
    this.#pinger = setInterval(() => this.#pingAll(), deps.pingIntervalMs).unref();
  }

  /** The http server's 'upgrade' listener. */
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    // A peer that resets mid-handshake must not take the service down.
    socket.on('error', () => socket.destroy());
    this.#deps.events.emit('ws-upgrade');
    this.#waiting.add(socket);
    void this.#deps.delay(this.#deps.ctx.faults.latencyMs).then(() => {
      this.#waiting.delete(socket);
      this.#handshake(req, socket, head);
    });
  }

  #handshake(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    const { ctx } = this.#deps;
    let url: URL;
    try {
      url = new URL(req.url ?? '/', 'http://service.invalid');
    } catch {
      return writeRawResponse(socket, 400, { code: 400, msg: 'bad request' }, ctx.now());
    }
    if (url.pathname !== VOICE_CHAT_PATH) return writeRawResponse(socket, 404, { code: 404, msg: 'not found' }, ctx.now());
    const refusal = ctx.faults.wsRefusal;
    if (refusal?.form === 'handshake') return writeRawResponse(socket, 400, wsFailureBody(refusal.msg), ctx.now());
    if (refusal) return this.#wss.handleUpgrade(req, socket, head, (ws) => this.#refuseInBand(ws, refusal.msg, refusal.form));
    // The token comes first, so nobody without one learns which botIds exist.
    const token = bearerAccess(ctx, req.headers.authorization);
    if (!token) return writeRawResponse(socket, 400, wsFailureBody(WsMessage.UNAUTHORIZED), ctx.now());
    const botId = url.searchParams.get('botId');
    if (!botId) return writeRawResponse(socket, 400, wsFailureBody(WsMessage.BOT_INVALID), ctx.now());
    // A token of another bot or of a vendor gets the same answer whether that botId exists or not.
    if (!sameIdentity(token.identity, { kind: 'bot', id: botId })) {
      return writeRawResponse(socket, 400, wsFailureBody(WsMessage.UNAUTHORIZED), ctx.now());
    }
    const params = Object.fromEntries([...url.searchParams].filter(([name]) => name !== 'botId'));
    this.#wss.handleUpgrade(req, socket, head, (ws) => this.#accept(ws, botId, params));
  }

  /** Terminates every socket without a close frame. */
  dropAll(): void {
    for (const session of this.#open) session.ws.terminate();
    for (const ws of this.#refused) ws.terminate();
  }

  /** Sends a frame to the bot's current session, as the cloud would; false when it has none. */
  push(botId: string, data: string | Buffer, binary: boolean): boolean {
    const session = this.#current.get(botId);
    if (!session) return false;
    this.#send(session, data, binary);
    return true;
  }

  close(): void {
    clearInterval(this.#pinger);
    for (const session of this.#open) session.conversation.close();
    for (const socket of this.#waiting) socket.destroy();
    this.dropAll();
    this.#wss.close();
  }

  #accept(ws: WebSocket, botId: string, params: Record<string, string>): void {
    const { stats, events, ctx, roundDelayMs, vadSilenceMs, echoAudio } = this.#deps;
    const requestId = params['requestId'] || randomUUID();
    const record = stats.wsOpened(botId, params);
    const conversation = new Conversation({
      requestId,
      now: ctx.now,
      roundDelayMs,
      manual: params['needManualCall'] === 'true',
      vadSilenceMs,
      setTimer: realTimer,
      send: (data, binary) => this.#send(session, data, binary),
      onVoiceConfig: () => {
        record.voiceConfigs += 1;
      },
      echoAudio,
    });
    const session: Session = { ws, botId, requestId, alive: true, conversation };
    const previous = this.#current.get(botId);
    this.#open.add(session);
    this.#current.set(botId, session);
    ws.on('pong', () => {
      session.alive = true;
    });
    ws.on('message', (data, isBinary) => {
      const frame = toBuffer(data);
      events.emit('ws-message', { botId, data: frame, isBinary });
      conversation.receive(frame, isBinary);
    });
    // Protocol errors from the peer: ws closes the socket itself, and 'close' does the bookkeeping.
    ws.on('error', () => undefined);
    ws.on('close', () => {
      conversation.close();
      this.#open.delete(session);
      if (this.#current.get(botId) === session) this.#current.delete(botId);
      stats.wsClosed(record);
      events.emit('ws-close', { botId });
    });
    if (previous) this.#displace(previous);
    events.emit('ws-open', { botId });
    conversation.greet();
  }

  /** Every frame to a session goes through here, so a peer that stops reading is closed at MAX_UNREAD_BYTES. */
  #send(session: Session, data: Buffer | string, binary = false): void {
    if (sendBounded(session.ws, data, binary) !== 'overflow') return;
    this.#deps.events.emit('not-reading', { botId: session.botId, limitBytes: MAX_UNREAD_BYTES });
  }

  #displace(session: Session): void {
    const { stats, events, ctx, displacementMarker } = this.#deps;
    stats.wsDisplaced();
    session.conversation.close();
    events.emit('displaced', { botId: session.botId });
    if (displacementMarker === 'event') {
      this.#send(session, displacementEvent(session.requestId, ctx.now()));
      session.ws.close(DISPLACED_CLOSE_CODE);
    } else {
      this.#send(session, wsFailureBody(WsMessage.REPEAT_SESSION));
      session.ws.close(DISPLACED_CLOSE_CODE, WsMessage.REPEAT_SESSION);
    }
  }

  #refuseInBand(ws: WebSocket, msg: WsRefusal, form: WsRefusalForm): void {
    this.#refused.add(ws);
    ws.on('error', () => undefined);
    ws.on('close', () => this.#refused.delete(ws));
    if (form === 'frame') {
      ws.send(wsFailureBody(msg));
      ws.close(REFUSED_CLOSE_CODE);
    } else {
      ws.close(REFUSED_CLOSE_CODE, msg);
    }
  }

  #pingAll(): void {
    for (const session of this.#open) {
      if (!session.alive) {
        session.ws.terminate();
        continue;
      }
      session.alive = false;
      session.ws.ping();
    }
  }
}

/** The public guide's displacement marker: an EVENT frame in the down envelope of DESIGN §1.7, `mid: null`. */
function displacementEvent(requestId: string, nowMs: number): string {
  const content = eventContent(ConversationEvent.REPEAT_CLIENT_SESSION);
  return downFrame({ requestId, mid: null, contentType: ContentType.EVENT, content, t: nowMs });
}

/** ws hands a frame over as one Buffer unless told otherwise; the other shapes are normalised anyway. */
function toBuffer(data: RawData): Buffer {
  if (Buffer.isBuffer(data)) return data;
  if (Array.isArray(data)) return Buffer.concat(data);
  return Buffer.from(data);
}
