import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import WebSocket, { WebSocketServer, type RawData } from 'ws';
import { isConversationEvent, linkStateFrame, type LinkStateData } from '../../protocol/conversation.js';
import type { ConnParams, LinkStateChange, LinkSupervisor } from '../link/supervisor.js';
import type { Clock } from '../time/clock.js';
import { appParams } from './app-params.js';
import { AttachTally } from './attach-tally.js';
import { CloudKeepalive } from './keepalive.js';
import { refuseUpgrade } from './refuse-upgrade.js';
import {
  APP_CLOSE_GRACE_MS,
  MAX_APP_BACKLOG_BYTES,
  MAX_APP_FRAME_BYTES,
  MAX_VOICE_CONFIG_BYTES,
  stateChanged,
  stateData,
} from './relay-decide.js';
import type { RelayCounters, RelayPort, RelayTraffic } from './relay-port.js';

/** At stop an app gets this long to finish its close: the link's own close and the exit must fit in 2 s. */
const STOP_CLOSE_GRACE_MS = 500;

/** What the relay uses of the link. */
export type RelayLink = Pick<LinkSupervisor, 'status' | 'sessionId' | 'greeting' | 'useParams' | 'forgetParams' | 'send' | 'on' | 'off'>;

export interface RelayOptions {
  link: RelayLink;
  clock: Clock;
  log: Logger;
  /** Called after an app attaches or detaches: status.json is only rewritten when told. */
  onChange?: () => void;
  /** The JSON keepalive's interval while no app is attached (default KEEPALIVE_INTERVAL_MS). */
  keepaliveIntervalMs?: number;
}

/**
 * Carries one app's conversation over the link's cloud socket (DESIGN §3.5): frames pass unread
 * both ways, botlink's state reaches the app as LINK_STATE, and the voice config is replayed on
 * every new cloud connection. Nothing is ever queued: what cannot go now is dropped and counted.
 * While no app is attached, the relay keeps the line the guide's way (CloudKeepalive).
 */
export class Relay implements RelayPort {
  readonly #link: RelayLink;
  readonly #clock: Clock;
  readonly #log: Logger;
  readonly #onChange: () => void;
  readonly #wss = new WebSocketServer({
    noServer: true,
    clientTracking: false,
    perMessageDeflate: false,
    maxPayload: MAX_APP_FRAME_BYTES,
  });
  readonly #counters: RelayCounters = { attached: false, framesUp: 0, framesDown: 0, dropped: 0 };
  readonly #keepalive: CloudKeepalive;
  readonly #traffic: RelayTraffic = { attaches: 0, bytesUp: 0, bytesDown: 0 };
  readonly #tally: AttachTally;
  #app: WebSocket | undefined;
  /** The attached app's last CLIENT_VOICE_CHAT_UPDATE: the service wants it once per connection. */
  #voiceConfig: Buffer | undefined;
  /** The attached app sent a frame: the cloud connection holds its conversation state. */
  #appSent = false;
  /**
   * The app re-attached to the socket it conversed on: what the cloud still sends is the last round's
   * tail, dropped until the app's first frame (its voice config, which ends that round on the cloud).
   */
  #holdCloud = false;
  #lastState: LinkStateData | undefined;
  /** Monotonic ms of the link's next attempt, while it waits. */
  #retryAt: number | undefined;
  #stopped = false;

  readonly #onState = (change: LinkStateChange): void => {
    if (change.state !== 'connected') this.#keepalive.disconnected();
    this.#retryAt = change.retryInMs === undefined ? undefined : this.#clock.monoNow() + change.retryInMs;
    if (this.#app) this.#sendState(false);
  };
  readonly #onConnected = (): void => {
    this.#keepalive.connected();
    // Before any app frame: the service refuses audio on a connection that has no voice config.
    if (this.#app && this.#voiceConfig && this.#link.send(this.#voiceConfig, false)) this.#counters.framesUp++;
  };
  readonly #onCloudFrame = (data: Buffer, isBinary: boolean): void => {
    if (this.#keepalive.ownsPong(data, isBinary)) return;
    const app = this.#app;
    if (!app || app.readyState !== WebSocket.OPEN || this.#holdCloud) {
      this.#counters.dropped++;
      return;
    }
    this.#counters.framesDown++;
    this.#traffic.bytesDown += data.length;
    this.#toApp(app, data, isBinary);
  };

  constructor(opts: RelayOptions) {
    this.#link = opts.link;
    this.#clock = opts.clock;
    this.#log = opts.log;
    this.#onChange = opts.onChange ?? (() => undefined);
    this.#keepalive = new CloudKeepalive({
      clock: opts.clock,
      send: (text) => this.#link.send(text, false),
      ...(opts.keepaliveIntervalMs !== undefined && { intervalMs: opts.keepaliveIntervalMs }),
    });
    this.#tally = new AttachTally(opts.clock, opts.log);
    this.#link.on('state', this.#onState);
    this.#link.on('connected', this.#onConnected);
    this.#link.on('message', this.#onCloudFrame);
  }

  get counters(): RelayCounters {
    return { ...this.#counters };
  }

  get traffic(): RelayTraffic {
    return { ...this.#traffic };
  }

  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    if (this.#stopped) return refuseUpgrade(socket, 503, 'botlink is stopping: connect again once it runs');
    // An app whose close is under way has left: a quick reconnect of the same app must not get a 409.
    if (this.#app?.readyState === WebSocket.OPEN)
      return refuseUpgrade(socket, 409, 'another app is attached: botlink relays one conversation at a time');
    if (this.#app) this.#detach(this.#app);
    // ws answers a malformed handshake itself and then never calls back.
    this.#wss.handleUpgrade(req, socket, head, (ws) => this.#attach(ws, appParams(req.url)));
  }

  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#tally.stop();
    this.#link.off('state', this.#onState);
    this.#link.off('connected', this.#onConnected);
    this.#link.off('message', this.#onCloudFrame);
    this.#keepalive.stop();
    const app = this.#app;
    if (!app) return;
    this.#detach(app);
    if (app.readyState !== WebSocket.OPEN) {
      // Its close is under way but it never finished it (a half-open app): ws would hold it for 30 s.
      app.terminate();
      return;
    }
    app.send(linkStateFrame({ state: 'stopped', sessionId: this.#link.sessionId }));
    const closed = new Promise<void>((resolve) => app.once('close', () => resolve()));
    this.#close(app, 1001, 'botlink is stopping', STOP_CLOSE_GRACE_MS);
    await closed;
  }

  /** Closes an app, and cuts it when it does not finish the closing handshake (ws would wait 30 s). */
  #close(app: WebSocket, code: number, reason: string, graceMs = APP_CLOSE_GRACE_MS): void {
    const cancel = this.#clock.setTimer(graceMs, () => app.terminate());
    app.once('close', cancel);
    app.close(code, reason);
  }

  #attach(ws: WebSocket, params: ConnParams): void {
    // Before the app is attached: a reconnect's own state change would otherwise reach it twice.
    const outcome = this.#link.useParams(params);
    this.#app = ws;
    this.#counters.attached = true;
    this.#keepalive.appAttached();
    this.#traffic.attaches++;
    this.#holdCloud = outcome === 'reused';
    // Per connection at debug: an app in a loop must not fill the disk (the tally says it at info).
    this.#tally.attached();
    this.#log.debug({ outcome }, 'app attached');
    ws.on('message', (data: RawData, isBinary: boolean) => this.#fromApp(ws, data as Buffer, isBinary));
    ws.on('error', (err) => {
      this.#log.debug({ err: err.message }, 'app socket failed');
      // ws has sent its close (1009 for an oversized frame) but stopped reading: an app still writing
      // would never see the handshake through, and ws would hold the socket for 30 s.
      this.#detach(ws);
      const cancel = this.#clock.setTimer(APP_CLOSE_GRACE_MS, () => ws.terminate());
      ws.once('close', cancel);
    });
    ws.on('close', (code) => {
      this.#log.debug({ code }, 'app detached');
      this.#detach(ws);
    });
    this.#sendState(true);
    const greeting = outcome === 'kept' || outcome === 'reused' ? this.#link.greeting : undefined;
    if (greeting) this.#toApp(ws, greeting, false);
    this.#onChange();
  }

  #detach(ws: WebSocket): void {
    if (this.#app !== ws) return;
    this.#app = undefined;
    this.#counters.attached = false;
    this.#voiceConfig = undefined;
    this.#lastState = undefined;
    this.#link.forgetParams(this.#appSent);
    this.#appSent = false;
    if (!this.#stopped) this.#keepalive.appDetached();
    this.#onChange();
  }

  #fromApp(ws: WebSocket, data: Buffer, isBinary: boolean): void {
    if (ws !== this.#app) return;
    // A config sent while the cloud is down is still the app's config: the next connection gets it first.
    if (!isBinary && data.length <= MAX_VOICE_CONFIG_BYTES && isConversationEvent(data, 'CLIENT_VOICE_CHAT_UPDATE')) {
      this.#voiceConfig = data;
    }
    this.#appSent = true;
    this.#holdCloud = false;
    if (this.#link.send(data, isBinary)) {
      this.#counters.framesUp++;
      this.#traffic.bytesUp += data.length;
      this.#keepalive.upFrame();
    } else this.#counters.dropped++;
  }

  #sendState(always: boolean): void {
    const app = this.#app;
    if (!app) return;
    const data = stateData(this.#link.status.state, this.#link.sessionId, this.#retryAt, this.#clock.monoNow());
    if (!always && !stateChanged(this.#lastState, data)) return;
    this.#lastState = data;
    this.#toApp(app, linkStateFrame(data), false);
  }

  /** Sends to the app; an app that leaves MAX_APP_BACKLOG_BYTES unread is closed, the cloud never slowed. */
  #toApp(app: WebSocket, data: Buffer | string, isBinary: boolean): void {
    app.send(data, { binary: isBinary });
    if (app.bufferedAmount < MAX_APP_BACKLOG_BYTES) return;
    this.#log.warn({ waiting: app.bufferedAmount }, 'the app stopped reading: closed with 1008');
    this.#detach(app);
    this.#close(app, 1008, 'app too slow: 4 MiB unread');
  }
}
