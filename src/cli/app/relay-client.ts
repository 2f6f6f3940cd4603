import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { resolve } from 'node:path';
import WebSocket, { type RawData } from 'ws';
import { NEW_TURN, nextTurn, obj, readDownFrame, type Turn } from '../../protocol/round-reader.js';
import { type LinkStateData, readLinkState, VOICE_CHAT_PATH } from '../../protocol/conversation.js';
import { RelayRefused, RoundEnded, RoundLost, type RoundResult } from './relay-errors.js';
import { socketGroupName } from './socket-group.js';

/** What an app does with a turn's frames as they come. */
export interface TurnHandlers {
  onPiece?: (text: string) => void;
  onHeard?: (text: string) => void;
  /** TTS audio of the round: decoded audioBase64, or a binary frame while the round is open. */
  onAudio?: (audio: Buffer) => void;
  /** Every change of the turn, e.g. to stop streaming once the round is open. */
  onTurn?: (turn: Turn) => void;
}

type Frame = { contentType?: unknown; code?: unknown; msg?: unknown; content?: unknown };

/**
 * An app's side of botlink's relay, as `botlink chat` and the demo app use it: the link state as it
 * changes ('state' events), and turns (TEXT rounds, voice turns) one at a time.
 */
export class RelayClient extends EventEmitter<{ state: [LinkStateData]; frame: [Frame]; binary: [Buffer]; close: [number, string] }> {
  readonly #ws: WebSocket;
  state: LinkStateData | undefined;
  closed: { code: number; reason: string } | undefined;

  private constructor(ws: WebSocket) {
    super();
    this.#ws = ws;
    ws.on('message', (data: RawData, isBinary: boolean) => {
      if (isBinary) {
        this.emit('binary', Buffer.from(data as Buffer));
        return;
      }
      let frame: Frame;
      try {
        frame = obj(JSON.parse(data.toString())) as Frame;
      } catch {
        return;
      }
      const state = readLinkState(frame);
      if (state) {
        this.state = state;
        this.emit('state', state);
      } else this.emit('frame', frame);
    });
    ws.on('close', (code, reason) => {
      this.closed = { code, reason: reason.toString() };
      this.emit('close', code, this.closed.reason);
    });
  }

  /** Attaches to the relay at `socketPath` (or observes it on OBSERVE_PATH); rejects with RelayRefused naming the socket and the fix. */
  static connect(socketPath: string, urlPath: string = VOICE_CHAT_PATH): Promise<RelayClient> {
    const path = resolve(socketPath);
    return new Promise((done, fail) => {
      const ws = new WebSocket(`ws+unix://${path}:${urlPath}`);
      ws.once('open', () => {
        ws.removeAllListeners('error');
        ws.on('error', () => {}); // a reset after the handshake shows as 'close'
        done(new RelayClient(ws));
      });
      ws.once('unexpected-response', (_req, res) => {
        let body = '';
        res.on('data', (d: Buffer) => (body += d.toString()));
        res.on('end', () => fail(refusedByStatus(path, res.statusCode ?? 0, body)));
        res.on('error', () => fail(refusedByStatus(path, res.statusCode ?? 0, body)));
      });
      ws.once('error', (err: NodeJS.ErrnoException) => fail(refusedByError(path, err)));
    });
  }

  /** Resolves once the link is `connected` (at once when it is). */
  untilConnected(): Promise<void> {
    if (this.state?.state === 'connected') return Promise.resolve();
    return new Promise((done, fail) => {
      const onState = (s: LinkStateData): void => {
        if (s.state !== 'connected') return;
        this.off('close', onClose);
        this.off('state', onState);
        done();
      };
      const onClose = (code: number): void => {
        this.off('state', onState);
        fail(new RoundLost(closedMessage(code)));
      };
      this.on('state', onState);
      this.once('close', onClose);
    });
  }

  /** One TEXT round: `onPiece` gets each AGENT piece as it comes; resolves on the round's COMPLETE. */
  round(input: string, onPiece?: (text: string) => void): Promise<RoundResult> {
    return this.turn(() => this.send({ mid: randomUUID(), contentType: 'TEXT', content: { input } }), { ...(onPiece && { onPiece }) });
  }

  /**
   * One turn: `start` sends its input, then the cloud's frames drive the turn (round-reader) until the
   * round ends. Resolves on COMPLETE; rejects with RoundEnded when the cloud gives no reply, RoundLost
   * when the link or the relay goes.
   */
  turn(start: () => void, on: TurnHandlers = {}): Promise<RoundResult> {
    const started = performance.now();
    let turn: Turn = NEW_TURN;
    let reply = '';
    const result = (): RoundResult => ({
      reply,
      roundId: turn.phase === 'waiting' ? '' : turn.roundId,
      ...(turn.heard !== undefined && { heard: turn.heard }),
      ms: Math.round(performance.now() - started),
    });
    return new Promise((done, fail) => {
      const finish = (err?: Error): void => {
        this.off('frame', onFrame);
        this.off('binary', onBinary);
        this.off('state', onState);
        this.off('close', onClose);
        if (err) fail(err);
        else done(result());
      };
      const onFrame = (frame: Frame): void => {
        const step = nextTurn(turn, readDownFrame(frame));
        const changed = step.turn !== turn;
        turn = step.turn;
        const event = step.accepted;
        if (event?.kind === 'piece') {
          reply += event.text;
          on.onPiece?.(event.text);
        } else if (event?.kind === 'asr') on.onHeard?.(event.text);
        else if (event?.kind === 'audio') on.onAudio?.(Buffer.from(event.base64, 'base64'));
        if (changed) on.onTurn?.(turn);
        if (turn.phase !== 'done') return;
        if (turn.outcome === 'complete') finish();
        else finish(new RoundEnded(turn.outcome, turn.detail, result()));
      };
      // Binary frames carry no roundId: they are the round's audio only while it is open.
      const onBinary = (audio: Buffer): void => {
        if (turn.phase === 'open') on.onAudio?.(audio);
      };
      const onState = (s: LinkStateData): void => {
        if (s.state !== 'connected') finish(new RoundLost(`the cloud link went ${s.state} during the round: its reply is lost`));
      };
      const onClose = (code: number): void => finish(new RoundLost(closedMessage(code)));
      this.on('frame', onFrame);
      this.on('binary', onBinary);
      this.on('state', onState);
      this.once('close', onClose);
      start();
    });
  }

  /** Sends one JSON frame to the cloud through the relay. */
  send(frame: object): void {
    this.#ws.send(JSON.stringify(frame));
  }

  /** Resolves with the relay's close (at once when it is closed). */
  whenClosed(): Promise<{ code: number; reason: string }> {
    const { closed } = this;
    if (closed) return Promise.resolve(closed);
    return new Promise((done) => this.once('close', (code, reason) => done({ code, reason })));
  }

  close(): void {
    this.#ws.close(1000);
  }
}

/** Why the relay closed, in words: 1001 is the daemon's stop. */
export function closedMessage(code: number): string {
  return code === 1001 ? 'the botlink daemon stopped (close 1001)' : `botlink closed the relay (close ${code})`;
}

/** What to check when botlink's socket does not answer or goes away. */
export const DAEMON_FIX = 'is the daemon running? systemctl status botlink (the socket is localSocket in the config)';

function refusedByError(path: string, err: NodeJS.ErrnoException): RelayRefused {
  switch (err.code) {
    case 'ENOENT':
      return new RelayRefused(`no botlink local API at ${path} (no such socket)`, DAEMON_FIX);
    case 'ECONNREFUSED':
      return new RelayRefused(`nothing listens on ${path} (connection refused)`, DAEMON_FIX);
    case 'EACCES': {
      const group = socketGroupName(path);
      return new RelayRefused(
        `permission denied on ${path}`,
        `only root and group ${group} may use it: sudo usermod -aG ${group} $USER, then log in again (a service: SupplementaryGroups=${group})`,
      );
    }
    default:
      return new RelayRefused(`cannot attach to ${path}: ${err.message}`, DAEMON_FIX);
  }
}

function refusedByStatus(path: string, status: number, body: string): RelayRefused {
  let msg = body.trim();
  try {
    msg = String(obj(JSON.parse(body)).msg ?? msg);
  } catch {
    // not JSON: the body as it came
  }
  if (status === 409)
    return new RelayRefused(
      `another app is attached to botlink's relay at ${path} (HTTP 409: ${msg})`,
      'botlink serves one app at a time: stop the other app first (botlink status shows relay.attached)',
    );
  if (status === 429)
    return new RelayRefused(
      `botlink has all the observers it serves at ${path} (HTTP 429: ${msg})`,
      'close another botlink watch or screen observing (botlink status shows relay.observers)',
    );
  return new RelayRefused(`botlink refused the relay at ${path} (HTTP ${status}: ${msg})`, DAEMON_FIX);
}
