import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import type WebSocket from 'ws';
import { WebSocketServer } from 'ws';
import { isConversationEvent, type LinkStateData } from '../../protocol/conversation.js';
import type { ConnParams, LinkStateChange, LinkSupervisor } from '../link/supervisor.js';
import type { Clock } from '../time/clock.js';
import { appParams } from './app-params.js';
import { AttachTally } from './attach-tally.js';
import { CloudKeepalive } from './keepalive.js';
import { Observers, wantsAudio } from './observers.js';
import { LocalPeer, type PeerKind } from './peer.js';
import { refuseUpgrade } from './refuse-upgrade.js';
import { MAX_APP_BACKLOG_BYTES, MAX_APP_FRAME_BYTES, MAX_VOICE_CONFIG_BYTES, stateData } from './relay-decide.js';
import type { RelayCounters, RelayPort, RelayTraffic } from './relay-port.js';

/** At stop an app gets this long to finish its close: the link's own close and the exit must fit in 2 s. */
const STOP_CLOSE_GRACE_MS = 500;
const APP: PeerKind = { name: 'app', maxBacklogBytes: MAX_APP_BACKLOG_BYTES };

/** What the relay uses of the link. */
export type RelayLink = Pick<LinkSupervisor, 'status' | 'sessionId' | 'greeting' | 'useParams' | 'forgetParams' | 'send' | 'on' | 'off'>;

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
 * both ways, botlink's state reaches the app as LINK_STATE, and the voice config is replayed on
 * every new cloud connection. Nothing is ever queued: what cannot go now is dropped and counted.
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
  readonly #tally: AttachTally;
  readonly #observers: Observers;
  #app: LocalPeer | undefined;
  /** The attached app's last CLIENT_VOICE_CHAT_UPDATE: the service wants it once per connection. */
  #voiceConfig: Buffer | undefined;
  /** The attached app sent a frame: the cloud connection holds its conversation state. */
  #appSent = false;
  /**
   * The app re-attached to the socket it conversed on: what the cloud still sends is the last round's
   * tail, dropped until the app's first frame (its voice config, which ends that round on the cloud).
   */
  #holdCloud = false;
  /** Monotonic ms of the link's next attempt, while it waits. */
  #retryAt: number | undefined;
  #stopped = false;

  readonly #onState = (change: LinkStateChange): void => {
    if (change.state !== 'connected') this.#keepalive.disconnected();
    this.#retryAt = change.retryInMs === undefined ? undefined : this.#clock.monoNow() + change.retryInMs;
    const data = this.#stateNow();
    this.#app?.sendState(data, false);
    this.#observers.state(data);
  };
  readonly #onConnected = (): void => {
    this.#keepalive.connected();
    // Before any app frame: the service refuses audio on a connection that has no voice config.
    if (this.#app && this.#voiceConfig && this.#link.send(this.#voiceConfig, false)) this.#counters.framesUp++;
  };
  readonly #onCloudFrame = (data: Buffer, isBinary: boolean): void => {
    if (this.#keepalive.ownsPong(data, isBinary)) return;
    // Observers see the cloud as it is, the held tail of an app's last round included.
    this.#observers.frame(data, isBinary);
    const app = this.#app;
    if (!app?.open || this.#holdCloud) {
      this.#counters.dropped++;
      return;
    }
    this.#counters.framesDown++;
    this.#traffic.bytesDown += data.length;
    app.send(data, isBinary);
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
    this.#observers = new Observers(opts.clock, opts.log, this.#onChange);
    this.#link.on('state', this.#onState);
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
    if (this.#stopped) return refuseUpgrade(socket, 503, 'botlink is stopping: connect again once it runs');
    // An app whose close is under way has left: a quick reconnect of the same app must not get a 409.
    if (this.#app?.open) return refuseUpgrade(socket, 409, 'another app is attached: botlink relays one conversation at a time');
    this.#app?.leave();
    // ws answers a malformed handshake itself and then never calls back.
    this.#wss.handleUpgrade(req, socket, head, (ws) => this.#attach(ws, appParams(req.url)));
  }

  handleObserve(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    if (this.#stopped) return refuseUpgrade(socket, 503, 'botlink is stopping: connect again once it runs');
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
    this.#link.off('connected', this.#onConnected);
    this.#link.off('message', this.#onCloudFrame);
    this.#keepalive.stop();
    const stopped: LinkStateData = { state: 'stopped', sessionId: this.#link.sessionId };
    await Promise.all([this.#app?.stop(stopped, STOP_CLOSE_GRACE_MS), this.#observers.stop(stopped, STOP_CLOSE_GRACE_MS)]);
  }

  #attach(ws: WebSocket, params: ConnParams): void {
    // Before the app is attached: a reconnect's own state change would otherwise reach it twice.
    const outcome = this.#link.useParams(params);
    const app = new LocalPeer(ws, {
      kind: APP,
      clock: this.#clock,
      log: this.#log,
      onMessage: (data, isBinary) => this.#fromApp(data, isBinary),
      onLeft: () => this.#detached(),
    });
    this.#app = app;
    this.#counters.attached = true;
    this.#keepalive.appAttached();
    this.#traffic.attaches++;
    this.#holdCloud = outcome === 'reused';
    // Per connection at debug: an app in a loop must not fill the disk (the tally says it at info).
    this.#tally.attached();
    this.#log.debug({ outcome }, 'app attached');
    app.sendState(this.#stateNow(), true);
    const greeting = outcome === 'kept' || outcome === 'reused' ? this.#link.greeting : undefined;
    if (greeting) app.send(greeting, false);
    this.#onChange();
  }

  /** The app left: a new one attaches only after this, so the one leaving is always the one attached. */
  #detached(): void {
    this.#app = undefined;
    this.#counters.attached = false;
    this.#voiceConfig = undefined;
    this.#link.forgetParams(this.#appSent);
    this.#appSent = false;
    if (!this.#stopped) this.#keepalive.appDetached();
    this.#onChange();
  }

  #fromApp(data: Buffer, isBinary: boolean): void {
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

  #stateNow(): LinkStateData {
    return stateData(this.#link.status.state, this.#link.sessionId, this.#retryAt, this.#clock.monoNow());
  }
}
