import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';

/** status.relay of DESIGN §3.4. */
export interface RelayCounters {
  attached: boolean;
  framesUp: number;
  framesDown: number;
  dropped: number;
}

/** What the local API server needs of the relay (DESIGN §3.5): the server owns the socket, the relay the app. */
export interface RelayPort {
  /** Takes an HTTP upgrade on the relay path; answers 409 itself when an app is already attached. */
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void;
  readonly counters: RelayCounters;
  /** Tells the attached app `LINK_STATE stopped`, then closes it with 1001. */
  stop(): Promise<void>;
}
