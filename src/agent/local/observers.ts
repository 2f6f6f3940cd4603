import type { Logger } from 'pino';
import type WebSocket from 'ws';
import type { LinkStateData } from '../../protocol/conversation.js';
import type { Clock } from '../../clock.js';
import { LocalPeer, type PeerKind } from './peer.js';
import type { ObserverTraffic } from './relay-port.js';

/** Observers at once (DESIGN §3.5): each holds a slot of the local connection cap and a copy of every frame. */
export const MAX_OBSERVERS = 8;
/** An observer is a screen or a technician: 1 MiB unread means it fell behind, and it is closed with 1008. */
export const OBSERVER: PeerKind = { name: 'observer', maxBacklogBytes: 1024 * 1024 };

/** Whether an observer asked for the binary (audio) frames too: `?audio=1`. */
export function wantsAudio(requestUrl: string | undefined): boolean {
  return new URL(requestUrl ?? '/', 'http://botlink.invalid').searchParams.get('audio') === '1';
}

/**
 * The read-only clients beside the app (DESIGN §3.5 /v1/observe): each gets LINK_STATE first and on
 * every change, then every cloud frame as it came, binary ones only if it asked for audio.
 */
export class Observers {
  readonly #clock: Clock;
  readonly #log: Logger;
  readonly #onChange: () => void;
  readonly #peers = new Map<LocalPeer, { audio: boolean }>();
  readonly #traffic: ObserverTraffic = { attaches: 0, frames: 0, bytes: 0, slow: 0, refused: 0 };

  constructor(clock: Clock, log: Logger, onChange: () => void) {
    this.#clock = clock;
    this.#log = log;
    this.#onChange = onChange;
  }

  get count(): number {
    return this.#peers.size;
  }

  get traffic(): ObserverTraffic {
    return { ...this.#traffic };
  }

  /** Whether another may attach; a refusal is counted. */
  admit(): boolean {
    if (this.#peers.size < MAX_OBSERVERS) return true;
    this.#traffic.refused++;
    return false;
  }

  add(ws: WebSocket, audio: boolean, state: LinkStateData): void {
    const peer = new LocalPeer(ws, {
      kind: OBSERVER,
      clock: this.#clock,
      log: this.#log,
      onLeft: (left, why) => {
        this.#peers.delete(left);
        if (why === 'slow') this.#traffic.slow++;
        this.#onChange();
      },
    });
    this.#peers.set(peer, { audio });
    this.#traffic.attaches++;
    // Per connection at debug: a screen reconnecting in a loop must not fill the disk.
    this.#log.debug({ audio, observers: this.#peers.size }, 'observer attached');
    // status.json first: whoever the first frame tells of the attach finds it counted there.
    this.#onChange();
    peer.sendState(state, true);
  }

  // A Map may lose entries while it is iterated (a peer that falls behind leaves in send): no copy is
  // made, as frame() runs for every cloud frame, observers or none.
  state(data: LinkStateData): void {
    for (const peer of this.#peers.keys()) peer.sendState(data, false);
  }

  /** A frame from the cloud, to every observer that takes its kind. */
  frame(data: Buffer, isBinary: boolean): void {
    for (const [peer, { audio }] of this.#peers) {
      if (isBinary && !audio) continue;
      if (!peer.send(data, isBinary)) continue;
      this.#traffic.frames++;
      this.#traffic.bytes += data.length;
    }
  }

  async stop(stopped: LinkStateData, graceMs: number): Promise<void> {
    await Promise.all([...this.#peers.keys()].map((peer) => peer.stop(stopped, graceMs)));
  }
}
