import { EventEmitter } from 'node:events';
import type WebSocket from 'ws';
import { randomUUID } from 'node:crypto';
import { fixOf, messageOf } from '../../protocol/errors.js';
import { systemRandom, type Cancel, type Random } from '../../clock.js';
import type { BackoffState } from '../token/backoff.js';
import { Attempt } from './attempt.js';
import { appReconnectMade, withdrawAppReconnect, type AppReconnectCause } from './app-pacing.js';
import { decideLink, initialLinkMemory, type LinkDecision, type LinkEnding, type LinkMemory, type ReconnectCause } from './decide.js';
import { resolveLinkSettings, type LinkOptions, type LinkSettings } from './options.js';
import { ConnChoice, type ConnParams } from './params.js';
import { openCloudSocket } from './socket.js';
import { patchStatus, type LinkEvents, type LinkStateChange, type LinkStatus, type ParamsOutcome, type StatePatch } from './status.js';

export { DROPPED_FIRST_ATTEMPT, type ReconnectCause } from './decide.js';
export { MAX_CLOUD_MESSAGE_BYTES, type LinkOptions, type TokenSource } from './options.js';
export { NO_PARAMS, type ConnParams, type OpenedWith } from './params.js';
export type { LinkEvents, LinkState, LinkStateChange, LinkStatus, ParamsOutcome } from './status.js';

const idle: Cancel = () => undefined;

/**
 * Keeps exactly one authenticated WebSocket open: connects with a fresh token, watches it with
 * ping/pong, and reconnects as decideLink says; tells what happens through LinkEvents.
 */
export class LinkSupervisor extends EventEmitter<LinkEvents> {
  /** Opens the cloud socket with the wanted parameters, presenting `token`. */
  readonly #open: (token: string) => WebSocket;
  readonly #clock: LinkOptions['clock'];
  readonly #log: LinkOptions['log'];
  readonly #tokens: LinkOptions['tokens'];
  readonly #s: LinkSettings;
  readonly #random: Random;
  readonly #choice: ConnChoice;
  #status: LinkStatus;
  #memory: LinkMemory = initialLinkMemory();
  /** The link's socket, from its handshake to its close; undefined between sockets. */
  #attempt: Attempt | undefined;
  /** A socket being closed to reopen with new parameters. */
  #replacing: Promise<void> | undefined;
  /** An app-caused reconnect waiting its turn: the open socket stays (an app may still want it) but carries nothing. */
  #parked: { cancel: Cancel; backoffBefore: BackoffState } | undefined;
  #cancelRetry: Cancel = idle;
  #abort: AbortController | undefined;
  #stopped = true;

  constructor(opts: LinkOptions) {
    super();
    this.#open = (token) => {
      const { url, opened } = this.#choice.open(opts.wsUrl, opts.botId);
      this.emit('opening', opened);
      return openCloudSocket(url, token, opts.lookup);
    };
    this.#clock = opts.clock;
    this.#log = opts.log;
    this.#tokens = opts.tokens;
    this.#s = resolveLinkSettings(opts);
    this.#random = opts.random ?? systemRandom;
    this.#choice = new ConnChoice(opts.newSessionId ?? randomUUID);
    this.#status = { state: 'stopped', since: opts.clock.wallNow(), reconnects: 0, reconnectsByCause: {}, lastError: null };
  }

  get status(): LinkStatus {
    return { ...this.#status, reconnectsByCause: { ...this.#status.reconnectsByCause } };
  }

  /** The sessionId of the connection: the app's when it decided one, else the current (or last) socket's. */
  get sessionId(): string | null {
    return this.#choice.sessionId;
  }

  /**
   * Takes an app's parameters for the cloud connection: the open socket is kept when they fit it, else
   * replaced as decideLink says: at once, or after a wait (paced, DESIGN §3.5), counted either way.
   */
  useParams(params: ConnParams): ParamsOutcome {
    this.#choice.want(params);
    if (this.#choice.fit === 'other') return this.#replaceFor('app-params');
    if (this.#stopped || !this.#attempt) return 'later';
    this.#unpark();
    return 'kept';
  }

  /** Takes an app's parameters on a socket of its own: the open one is replaced as useParams would, even when they fit it. */
  renewSession(params: ConnParams): ParamsOutcome {
    this.#choice.want(params);
    return this.#replaceFor(this.#choice.fit === 'other' ? 'app-params' : 'app-reattach');
  }

  /** No app decides any more: later connections get fresh sessions; the open one is kept. */
  forgetParams(): void {
    this.#choice.forget();
    // Nobody waits for the replacement any more: the next app decides again.
    this.#unpark();
  }

  #replaceFor(cause: AppReconnectCause): ParamsOutcome {
    const attempt = this.#attempt;
    if (this.#stopped || !attempt) return 'later';
    // A replacement is already due: it opens with whatever parameters are wanted by then.
    if (this.#parked) return 'reconnecting';
    const backoffBefore = this.#memory.backoff;
    // A socket up for stableAfterMs has earned a fresh schedule, as after a drop.
    const d = this.#decisionFor({ kind: 'app', cause }, attempt.upMs());
    if (d.next.state === 'connecting') this.#replace(attempt, d.cause);
    else this.#park(d.next.delayMs, backoffBefore, d.cause, d.reason);
    return 'reconnecting';
  }

  /**
   * Waits `delayMs` before replacing the open socket for an app (DESIGN §3.5); calling it off restores
   * `backoffBefore`. Only useParams, renewSession and forgetParams change what is wanted, and each calls
   * it off or leaves it due: when it fires, the replacement is still wanted.
   */
  #park(delayMs: number, backoffBefore: BackoffState, cause: ReconnectCause, reason: string): void {
    this.#parked = {
      backoffBefore,
      cancel: this.#timer(delayMs, () => {
        this.#parked = undefined;
        if (this.#attempt) this.#replace(this.#attempt, cause);
      }),
    };
    this.#setState({ state: 'backoff', lastError: reason, fix: undefined, retryInMs: delayMs }, true);
  }

  /** Cancels a paced replacement that is no longer wanted: it never happened, and the open socket serves again. */
  #unpark(): void {
    if (!this.#callOff()) return;
    this.#setState({ state: this.#attempt?.isOpen ? 'connected' : 'connecting', lastError: null, fix: undefined }, true);
  }

  /** Cancels the paced replacement, if one waits, as if it had never been decided; whether one did. */
  #callOff(): boolean {
    const parked = this.#parked;
    if (!parked) return false;
    this.#parked = undefined;
    parked.cancel();
    this.#memory = withdrawAppReconnect(this.#memory, parked.backoffBefore);
    return true;
  }

  /** Closes the open socket and opens one with the wanted parameters: a reconnect an app caused. */
  #replace(attempt: Attempt, cause: ReconnectCause): void {
    // Recorded as made, when made: the cap counts what happened, never a wait that may be called off.
    this.#memory = appReconnectMade(this.#memory, this.#clock.monoNow(), this.#s);
    this.#count(cause);
    this.#attempt = undefined;
    this.#setState({ state: 'connecting' });
    this.#log.info({ cause }, 'reconnecting with the parameters an app asked for');
    this.#replacing = attempt.retire('parameters changed').then(() => {
      this.#replacing = undefined;
      void this.#connect();
    });
  }

  #count(cause: ReconnectCause): void {
    this.#status.reconnects++;
    this.#status.reconnectsByCause[cause] = (this.#status.reconnectsByCause[cause] ?? 0) + 1;
  }

  start(): void {
    if (!this.#stopped) return;
    this.#stopped = false;
    void this.#connect();
  }

  /** Closes the socket with 1000 and never reconnects. */
  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#cancelRetry();
    this.#callOff();
    this.#abort?.abort();
    const attempt = this.#attempt;
    this.#attempt = undefined;
    await attempt?.retire('shutdown');
    await this.#replacing;
    this.#setState({ state: 'stopped' });
    this.emit('stopped');
  }

  /** Sends on the open socket, as a text or a binary frame; false when not connected or the cloud is not reading. */
  send(data: string | Buffer, binary = typeof data !== 'string'): boolean {
    return this.#status.state === 'connected' && this.#attempt !== undefined && this.#attempt.send(data, binary);
  }

  async #connect(): Promise<void> {
    if (this.#stopped) return;
    this.#setState({ state: 'connecting' });
    this.#abort = new AbortController();
    let token: string;
    try {
      token = await this.#tokens.current({ minLeftMs: this.#s.tokenMarginMs, signal: this.#abort.signal });
    } catch (err) {
      if (this.#stopped) return;
      this.#decide({ kind: 'no-token', message: messageOf(err), fix: fixOf(err) }, undefined);
      return;
    }
    if (this.#stopped) return;
    let ws: WebSocket;
    try {
      ws = this.#open(token);
    } catch (err) {
      this.#decide({ kind: 'unopenable', message: messageOf(err) }, token);
      return;
    }
    const attempt: Attempt = new Attempt(ws, token, {
      clock: this.#clock,
      timer: (ms, fn) => this.#timer(ms, fn),
      settings: this.#s,
      hooks: {
        opened: () => this.#onOpen(),
        message: (frame, isBinary) => this.emit('message', frame, isBinary),
        ended: (ending, upMs, accepted) => this.#onEnded(attempt, ending, upMs, accepted),
      },
    });
    this.#attempt = attempt;
  }

  #onOpen(): void {
    // Opened while a paced replacement waits: it carries nothing until that wait is called off (#unpark).
    if (!this.#parked) this.#setState({ state: 'connected', lastError: null, fix: undefined });
  }

  #onEnded(attempt: Attempt, ending: LinkEnding, upMs: number | undefined, accepted: boolean): void {
    this.#attempt = undefined;
    if (this.#stopped) return;
    // The socket a paced replacement waited to close is gone anyway: the retry below takes the app's parameters.
    this.#callOff();
    this.#decide(ending, attempt.token, upMs, accepted, true);
  }

  /** decideLink's answer for `ending`, its memory kept; the open socket's up-time counts toward a reset. */
  #decisionFor(ending: LinkEnding, upMs?: number, accepted = false): LinkDecision {
    const facts = { ...this.#memory, now: this.#clock.monoNow(), accepted, ...(upMs !== undefined && { upMs }) };
    const d = decideLink(ending, facts, this.#s, this.#random());
    this.#memory = d.memory;
    return d;
  }

  /** Asks decideLink what this ending means and carries it out; `counted`: a socket closed, so this is a reconnect. */
  #decide(ending: LinkEnding, token: string | undefined, upMs?: number, accepted = false, counted = false): void {
    const d = this.#decisionFor(ending, upMs, accepted);
    if (counted) this.#count(d.cause);
    if (d.invalidateToken) this.#tokens.invalidate(token);
    if (d.sharedBotId) this.#log.error({ botId: this.#s.botId, displacements: d.displaced?.count, fix: d.fix }, d.reason);
    if (d.displaced) this.emit('displaced', d.displaced);
    this.#carryOut(d);
  }

  #carryOut({ next, reason, fix }: LinkDecision): void {
    // Of a socket's endings only Unauthorized reconnects at once (decideLink), with the token invalidated.
    if (next.state === 'connecting') {
      this.#log.warn(`link refused: ${reason}; renewing the token and reconnecting at once`);
      // Through #setState like every change: listeners (status.json, the relay's LINK_STATE) hear the reason.
      this.#setState({ state: 'connecting', lastError: reason, fix: undefined });
      void this.#connect();
      return;
    }
    if (this.#stopped) return;
    this.#setState({ state: next.state, lastError: reason, fix, retryInMs: next.delayMs });
    this.emit('backoff', { delayMs: next.delayMs, reason });
    this.#cancelRetry();
    this.#cancelRetry = this.#timer(next.delayMs, () => void this.#connect());
  }

  /** The link's timers hold the process open, as the global timers they replace did; stop() cancels them all. */
  #timer(ms: number, fn: () => void): Cancel {
    return this.#clock.setTimer(ms, fn, { ref: true });
  }

  /**
   * Applies a change of state: fields the patch leaves out keep their values (`fix: undefined` clears it).
   * `quiet`: a wait for a paced replacement, begun or called off, which an app in a loop can cause at will: debug only.
   */
  #setState(patch: StatePatch, quiet = false): void {
    const was = this.#status.state;
    const next = patchStatus(this.#status, patch, this.#clock.wallNow());
    if (!next) return;
    this.#status = next;
    const { state, lastError, fix } = next;
    this.#log[quiet ? 'debug' : 'info'](
      { state, reconnects: this.#status.reconnects, ...(lastError && { reason: lastError }), ...(fix && { fix }) },
      `link ${state}`,
    );
    const { retryInMs } = patch;
    const change: LinkStateChange = { ...this.status, ...(retryInMs !== undefined && { retryInMs }) };
    this.emit('state', change);
    // Whichever way the link gets there (a socket opened, a paced replacement called off), one 'connected' each time.
    if (state === 'connected' && was !== 'connected') this.emit('connected');
  }
}
