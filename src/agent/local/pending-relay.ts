import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { refuseUpgrade, STOPPING_REFUSAL } from './refuse-upgrade.js';
import type { RelayCounters, RelayPort, RelayTraffic } from './relay-port.js';

/**
 * The relay as the local API sees it from start-up on: while the device is still being provisioned
 * there is no link to relay to, and an app is told so (503) instead of finding no socket at all.
 */
export class PendingRelay implements RelayPort {
  #relay: RelayPort | undefined;
  #stopped = false;

  /** The link exists: from now on upgrades go to `relay`. */
  ready(relay: RelayPort): void {
    this.#relay = relay;
  }

  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    if (this.#relay) return this.#relay.handleUpgrade(req, socket, head);
    this.#refuse(socket);
  }

  handleObserve(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    if (this.#relay) return this.#relay.handleObserve(req, socket, head);
    this.#refuse(socket);
  }

  #refuse(socket: Duplex): void {
    const why = this.#stopped ? STOPPING_REFUSAL : 'no botId yet: botlink is provisioning this device';
    refuseUpgrade(socket, 503, why);
  }

  get counters(): RelayCounters {
    return this.#relay?.counters ?? { attached: false, framesUp: 0, framesDown: 0, dropped: 0, observers: 0 };
  }

  get traffic(): RelayTraffic {
    return (
      this.#relay?.traffic ?? {
        attaches: 0,
        bytesUp: 0,
        bytesDown: 0,
        observers: { attaches: 0, frames: 0, bytes: 0, slow: 0, refused: 0 },
      }
    );
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    await this.#relay?.stop();
  }
}
