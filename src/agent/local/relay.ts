import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import type WebSocket from 'ws';
import { WebSocketServer } from 'ws';
import type { LinkStateData } from '../../protocol/conversation.js';
import type { ConnParams, LinkStateChange, LinkSupervisor, OpenedWith } from '../link/supervisor.js';
import type { Clock } from '../../clock.js';
import { appParams } from './app-params.js';
import { MinuteTally } from './minute-tally.js';
import { CloudKeepalive } from './keepalive.js';
import { Observers, wantsAudio } from './observers.js';
import { LocalPeer, type PeerKind } from './peer.js';
import { refuseUpgrade, STOPPING_REFUSAL } from './refuse-upgrade.js';
import { isSmallEvent, MAX_APP_BACKLOG_BYTES, MAX_APP_FRAME_BYTES, type SocketSeen, socketUse, stateData } from './relay-decide.js';
import type { RelayCounters, RelayPort, RelayTraffic } from './relay-port.js';

/** At stop an app gets this long to finish its close: the link's own close and the exit must fit in 2 s. */
const STOP_CLOSE_GRACE_MS = 500;
const APP: PeerKind = { name: 'app', maxBacklogBytes: MAX_APP_BACKLOG_BYTES };

/** What the relay uses of the link. */
export type RelayLink = Pick<
  LinkSupervisor,
  'status' | 'sessionId' | 'useParams' | 'renewSession' | 'forgetParams' | 'send' | 'on' | 'off'
>;

/** The conversation on the link's current (or last) cloud socket, as far as the relay saw it. */
interface CloudSocket extends SocketSeen {
  /** Its CFG_BOT_EVENT, replayed to an app that takes the socket as it is. */
  greeting: Buffer | undefined;
}

/** The attached app: its socket, its parameters, and its part of the conversation. */
interface AttachedApp {
  readonly peer: LocalPeer;
  readonly params: ConnParams;
  /** Its last CLIENT_VOICE_CHAT_UPDATE: the service wants it once per connection. */
  voiceConfig: Buffer | undefined;
  /** It sent a frame: the cloud socket holds its conversation state. */
  conversed: boolean;
  /**
   * It re-attached to the socket it conversed on: what the cloud still sends is the last round's tail,
   * dropped until its first frame (its voice config, which ends that round on the cloud).
   */
  holdCloud: boolean;
}

export interface RelayOptions {
  link: RelayLink;
  clock: Clock;
  log: Logger;
  /** Called after an app or an observer attaches or leaves: status.json is only rewritten when told. */
  onChange?: () => void;
  /** The JSON keepalive's interval while no app is attached (default KEEPALIVE_INTERVAL_MS). */
  keepaliveIntervalMs?: number;
}

/**
 * Carries one app's conversation over the link's cloud socket (DESIGN §3.5): frames pass unread
 * both ways, botlink's state reaches the app as LINK_STATE, the voice config is replayed on every new
 * cloud connection, and a socket's greeting to an app that takes it as it is; an app that would take
 * a socket another app conversed on gets a session of its own. Nothing is ever queued: what cannot go
 * now is dropped and counted.
 * Observers beside the app get the same cloud frames and states, read-only (Observers).
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
  readonly #counters: Omit<RelayCounters, 'observers'> = { attached: false, framesUp: 0, framesDown: 0, dropped: 0 };
  readonly #keepalive: CloudKeepalive;
  readonly #traffic: Omit<RelayTraffic, 'observers'> = { attaches: 0, bytesUp: 0, bytesDown: 0 };
  readonly #tally: MinuteTally;
  readonly #observers: Observers;
  #app: AttachedApp | undefined;
  /** The link's current (or last) socket, from the 'opening' that announced it. */
  #socket: CloudSocket | undefined;
  /** Monotonic ms of the link's next attempt, while it waits. */
  #retryAt: number | undefined;
  #stopped = false;

  readonly #onState = (change: LinkStateChange): void => {
    if (change.state !== 'connected') this.#keepalive.disconnected();
    this.#retryAt = change.retryInMs === undefined ? undefined : this.#clock.monoNow() + change.retryInMs;
    const data = this.#stateNow();
    this.#app?.peer.sendState(data, false);
    this.#observers.state(data);
  };
  readonly #onOpening = (opened: OpenedWith): void => {
    // A new socket: what was said on the last one stays with it.
    this.#socket = { opened, greeting: undefined, spentBy: undefined };
  };
  readonly #onConnected = (): void => {
    this.#keepalive.connected();
    // Before any app frame: the service refuses audio on a connection that has no voice config.
    const voiceConfig = this.#app?.voiceConfig;
    if (voiceConfig && this.#link.send(voiceConfig, false)) this.#counters.framesUp++;
  };
  readonly #onCloudFrame = (data: Buffer, isBinary: boolean): void => {
    if (this.#keepalive.ownsPong(data, isBinary)) return;
    if (this.#socket && isSmallEvent(data, isBinary, 'CFG_BOT_EVENT')) this.#socket.greeting = data;
    // Observers see the cloud as it is, the held tail of an app's last round included.
    this.#observers.frame(data, isBinary);
    const app = this.#app;
    if (!app?.peer.open || app.holdCloud) {
      this.#counters.dropped++;
      return;
    }
    this.#counters.framesDown++;
    this.#traffic.bytesDown += data.length;
    app.peer.send(data, isBinary);
  };

  /** Built on a link not started yet: a socket opened before would have its greeting and 'connected' unseen. */
  constructor(opts: RelayOptions) {
    if (opts.link.status.state !== 'stopped') throw new Error('a Relay is built before its link starts: it must see every socket open');
    this.#link = opts.link;
    this.#clock = opts.clock;
    this.#log = opts.log;
    this.#onChange = opts.onChange ?? (() => undefined);
    this.#keepalive = new CloudKeepalive({
      clock: opts.clock,
      send: (text) => this.#link.send(text, false),
      ...(opts.keepaliveIntervalMs !== undefined && { intervalMs: opts.keepaliveIntervalMs }),
    });
    // The first attach of a quiet minute is told at once; the rest of the minute in one line at its end.
    this.#tally = new MinuteTally(opts.clock, (count, first) =>
      first ? opts.log.info('an app attached') : opts.log.info({ attaches: count }, `apps attached ${count} more times in the last minute`),
    );
    this.#observers = new Observers(opts.clock, opts.log, this.#onChange);
    this.#link.on('state', this.#onState);
    this.#link.on('opening', this.#onOpening);
    this.#link.on('connected', this.#onConnected);
    this.#link.on('message', this.#onCloudFrame);
  }

  get counters(): RelayCounters {
    return { ...this.#counters, observers: this.#observers.count };
  }

  get traffic(): RelayTraffic {
    return { ...this.#traffic, observers: this.#observers.traffic };
  }

  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    if (this.#stopped) return refuseUpgrade(socket, 503, STOPPING_REFUSAL);
    // An app whose close is under way has left: a quick reconnect of the same app must not get a 409.
    if (this.#app?.peer.open) return refuseUpgrade(socket, 409, 'another app is attached: botlink relays one conversation at a time');
    this.#app?.peer.leave();
    // ws answers a malformed handshake itself and then never calls back.
    this.#wss.handleUpgrade(req, socket, head, (ws) => this.#attach(ws, appParams(req.url)));
  }

  handleObserve(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    if (this.#stopped) return refuseUpgrade(socket, 503, STOPPING_REFUSAL);
    // 429, not 503: the limit is the clients' own doing and clears when one of them leaves.
    if (!this.#observers.admit())
      return refuseUpgrade(socket, 429, `${this.#observers.count} observers are attached, the most botlink serves: close one first`);
    this.#wss.handleUpgrade(req, socket, head, (ws) => this.#observers.add(ws, wantsAudio(req.url), this.#stateNow()));
  }

  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#tally.stop();
    this.#link.off('state', this.#onState);
    this.#link.off('opening', this.#onOpening);
    this.#link.off('connected', this.#onConnected);
    this.#link.off('message', this.#onCloudFrame);
    this.#keepalive.stop();
    const stopped: LinkStateData = { state: 'stopped', sessionId: this.#link.sessionId };
    await Promise.all([this.#app?.peer.stop(stopped, STOP_CLOSE_GRACE_MS), this.#observers.stop(stopped, STOP_CLOSE_GRACE_MS)]);
  }

  #attach(ws: WebSocket, params: ConnParams): void {
    const use = socketUse(this.#socket, params);
    // Before the app is attached: a reconnect's own state change would otherwise reach it twice.
    const outcome = use === 'reattach' ? this.#link.renewSession(params) : this.#link.useParams(params);
    // Taken as it is, the socket's greeting is the app's; reused, so is the tail of its last round, held back.
    const taken = outcome === 'kept';
    const app: AttachedApp = {
      peer: new LocalPeer(ws, {
        kind: APP,
        clock: this.#clock,
        log: this.#log,
        onMessage: (data, isBinary) => this.#fromApp(app, data, isBinary),
        onLeft: () => this.#detached(app),
      }),
      params,
      voiceConfig: undefined,
      conversed: false,
      holdCloud: taken && use === 'reused',
    };
    this.#app = app;
    this.#counters.attached = true;
    this.#keepalive.appAttached();
    this.#traffic.attaches++;
    // Per connection at debug: an app in a loop must not fill the disk (the tally says it at info).
    this.#tally.add();
    this.#log.debug({ use, outcome }, 'app attached');
    app.peer.sendState(this.#stateNow(), true);
    const greeting = taken ? this.#socket?.greeting : undefined;
    if (greeting) app.peer.send(greeting, false);
    this.#onChange();
  }

  /** The app left: a new one attaches only after this, so the one leaving is always the one attached. */
  #detached(app: AttachedApp): void {
    this.#app = undefined;
    this.#counters.attached = false;
    // The socket now (or last) open holds its history, maybe its voice config and a round's tail: see socketUse.
    if (app.conversed && this.#socket) this.#socket.spentBy = app.params;
    this.#link.forgetParams();
    if (!this.#stopped) this.#keepalive.appDetached();
    this.#onChange();
  }

  #fromApp(app: AttachedApp, data: Buffer, isBinary: boolean): void {
    // A config sent while the cloud is down is still the app's config: the next connection gets it first.
    if (isSmallEvent(data, isBinary, 'CLIENT_VOICE_CHAT_UPDATE')) app.voiceConfig = data;
    app.conversed = true;
    app.holdCloud = false;
    if (this.#link.send(data, isBinary)) {
      this.#counters.framesUp++;
      this.#traffic.bytesUp += data.length;
      this.#keepalive.upFrame();
    } else this.#counters.dropped++;
  }

  #stateNow(): LinkStateData {
    return stateData(this.#link.status.state, this.#link.sessionId, this.#retryAt, this.#clock.monoNow());
  }
}
