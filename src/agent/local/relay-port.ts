import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';

/** status.relay of DESIGN §3.4. */
export interface RelayCounters {
  attached: boolean;
  framesUp: number;
  framesDown: number;
  dropped: number;
}

/** What the metrics (§3.5) count beyond status.relay: apps attached since start, bytes of the frames counted. */
export interface RelayTraffic {
  attaches: number;
  bytesUp: number;
  bytesDown: number;
}

/** What the local API server needs of the relay (DESIGN §3.5): the server owns the socket, the relay the app. */
export interface RelayPort {
  /** Takes an HTTP upgrade on the relay path; answers 409 itself when an app is already attached. */
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void;
  readonly counters: RelayCounters;
  readonly traffic: RelayTraffic;
  /** Tells the attached app `LINK_STATE stopped`, then closes it with 1001. */
  stop(): Promise<void>;
}
