import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';

/** status.relay of DESIGN §3.4. */
export interface RelayCounters {
  attached: boolean;
  framesUp: number;
  framesDown: number;
  dropped: number;
  /** Observers attached now (DESIGN §3.5 /v1/observe). */
  observers: number;
}

/** What observers got since start: frames and bytes sent to them (one per observer reached), those cut, those refused. */
export interface ObserverTraffic {
  attaches: number;
  frames: number;
  bytes: number;
  /** Closed with 1008 for leaving their backlog limit unread. */
  slow: number;
  /** Refused at the MAX_OBSERVERS cap. */
  refused: number;
}

/** What the metrics (§3.5) count beyond status.relay: apps attached since start, bytes of the frames counted. */
export interface RelayTraffic {
  attaches: number;
  bytesUp: number;
  bytesDown: number;
  observers: ObserverTraffic;
}

/** What the local API server needs of the relay (DESIGN §3.5): the server owns the socket, the relay the app. */
export interface RelayPort {
  /** Takes an HTTP upgrade on the relay path; answers 409 itself when an app is already attached. */
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void;
  /** Takes an HTTP upgrade on the observer path; answers 429 itself when MAX_OBSERVERS are attached. */
  handleObserve(req: IncomingMessage, socket: Duplex, head: Buffer): void;
  readonly counters: RelayCounters;
  readonly traffic: RelayTraffic;
  /** Tells the attached app and the observers `LINK_STATE stopped`, then closes them with 1001. */
  stop(): Promise<void>;
}
