import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { systemClock } from '../../src/clock.js';
import { LinkSupervisor, type LinkOptions, type LinkState } from '../../src/agent/link/supervisor.js';
import type { ReferenceService } from '../../src/service/server.js';
import { AgentKit } from './agent-kit.js';

/** Helpers of the long suites: socket timelines seen by the service, /proc samples, in-process agents. */

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** The most of `times` (ms, any order) that fit in one sliding window [t, t + widthMs). */
export function busiestWindow(times: number[], widthMs: number): { count: number; startMs: number } {
  const sorted = [...times].sort((a, b) => a - b);
  let best = { count: 0, startMs: sorted[0] ?? 0 };
  let first = 0;
  for (let last = 0; last < sorted.length; last++) {
    while (sorted[last]! - sorted[first]! >= widthMs) first++;
    if (last - first + 1 > best.count) best = { count: last - first + 1, startMs: sorted[first]! };
  }
  return best;
}

interface Change {
  /** performance.now() of the event in this process. */
  t: number;
  open: number;
}

/**
 * How many sockets the service held for one botId over time, from its 'ws-open'/'ws-close' events:
 * the service's own view, so it counts a socket from accept to close, whoever closed it.
 */
export class SocketTimeline {
  readonly changes: Change[] = [];
  readonly #botId: string;
  readonly #svc: ReferenceService;
  readonly #onEvent = ({ botId }: { botId: string }): void => {
    if (botId === this.#botId) this.changes.push({ t: performance.now(), open: this.#svc.stats.ws.perBotOpen(botId) });
  };

  constructor(svc: ReferenceService, botId: string) {
    this.#svc = svc;
    this.#botId = botId;
    svc.events.on('ws-open', this.#onEvent);
    svc.events.on('ws-close', this.#onEvent);
  }

  detach(): void {
    this.#svc.events.off('ws-open', this.#onEvent);
    this.#svc.events.off('ws-close', this.#onEvent);
  }

  /** Open count just after time t (0 before the first event). */
  #openAt(t: number): number {
    let open = 0;
    for (const c of this.changes) {
      if (c.t > t) break;
      open = c.open;
    }
    return open;
  }

  /** Milliseconds within [from, to] during which the open count satisfied `pred`. */
  timeWhere(from: number, to: number, pred: (open: number) => boolean): number {
    let total = 0;
    let cursor = from;
    let open = this.#openAt(from);
    for (const c of this.changes) {
      if (c.t <= from) continue;
      if (c.t >= to) break;
      if (pred(open)) total += c.t - cursor;
      cursor = c.t;
      open = c.open;
    }
    if (pred(open)) total += to - cursor;
    return total;
  }

  /** Share of [from, to] with at least one socket open. */
  availability(from: number, to: number): number {
    return this.timeWhere(from, to, (n) => n >= 1) / (to - from);
  }

  maxOpen(): number {
    return Math.max(0, ...this.changes.map((c) => c.open));
  }

  /** Every stretch with two or more sockets open, in ms (a displacement handover). */
  overlaps(until: number = performance.now()): number[] {
    const out: number[] = [];
    let started: number | undefined;
    for (const c of this.changes) {
      if (c.open >= 2 && started === undefined) started = c.t;
      if (c.open < 2 && started !== undefined) {
        out.push(c.t - started);
        started = undefined;
      }
    }
    if (started !== undefined) out.push(until - started);
    return out;
  }
}

/** The targets of a process's open file descriptors ("socket:[123]", "/path/file", "anon_inode:[eventfd]"). */
export function fdTargets(pid: number | 'self'): string[] {
  const dir = `/proc/${pid}/fd`;
  const out: string[] = [];
  for (const fd of readdirSync(dir)) {
    try {
      out.push(readlinkSync(`${dir}/${fd}`));
    } catch {
      // Closed between readdir and readlink: it was transient anyway.
    }
  }
  return out;
}

/** Socket inode → local and remote TCP ports, from /proc/self/net/tcp{,6}. */
function tcpPortsByInode(): Map<string, { local: number; remote: number }> {
  const map = new Map<string, { local: number; remote: number }>();
  for (const file of ['/proc/self/net/tcp', '/proc/self/net/tcp6']) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      if (cols.length < 10) continue;
      const port = (addr: string) => parseInt(addr.split(':')[1] ?? '0', 16);
      map.set(cols[9]!, { local: port(cols[1]!), remote: port(cols[2]!) });
    }
  }
  return map;
}

export interface FdBreakdown {
  total: number;
  /** TCP sockets whose remote port is the service's: the agents' ends. */
  clientSockets: number;
  /** TCP sockets whose local port is the service's: the service's ends and its listener. */
  serviceSockets: number;
  otherSockets: number;
  files: number;
  other: number;
}

function socketInode(target: string): string | undefined {
  return /^socket:\[(\d+)\]$/.exec(target)?.[1];
}

/** A process's descriptor targets split into its TCP sockets to `remotePort` and the rest. */
export function splitByRemotePort(targets: string[], remotePort: number): { toPort: string[]; rest: string[] } {
  const ports = tcpPortsByInode();
  const toPort: string[] = [];
  const rest: string[] = [];
  for (const target of targets) {
    const inode = socketInode(target);
    (inode !== undefined && ports.get(inode)?.remote === remotePort ? toPort : rest).push(target);
  }
  return { toPort, rest };
}

/** This process's descriptors, with TCP sockets split into the agents' and the service's ends. */
export function fdBreakdown(servicePort: number): FdBreakdown {
  const ports = tcpPortsByInode();
  const out: FdBreakdown = { total: 0, clientSockets: 0, serviceSockets: 0, otherSockets: 0, files: 0, other: 0 };
  for (const target of fdTargets('self')) {
    out.total++;
    const inode = socketInode(target);
    if (inode !== undefined) {
      const tcp = ports.get(inode);
      if (tcp?.remote === servicePort) out.clientSockets++;
      else if (tcp?.local === servicePort) out.serviceSockets++;
      else out.otherSockets++;
    } else if (target.startsWith('/')) out.files++;
    else out.other++;
  }
  return out;
}

export type FleetEvent =
  | { t: number; kind: 'connecting' }
  | { t: number; kind: 'connected' }
  | { t: number; kind: 'backoff'; delayMs: number; reason: string };

/** One in-process agent: its own state dir, store, token manager and link, with every link event timed. */
export class FleetAgent {
  readonly kit: AgentKit;
  readonly link: LinkSupervisor;
  readonly events: FleetEvent[] = [];

  constructor(opts: { url: string; wsUrl: string; botId: string; link?: Partial<LinkOptions> }) {
    this.kit = new AgentKit({ url: opts.url, identity: { kind: 'bot', id: opts.botId } });
    this.link = new LinkSupervisor({
      wsUrl: opts.wsUrl,
      botId: opts.botId,
      tokens: this.kit.tokens,
      clock: systemClock,
      log: this.kit.log,
      ...opts.link,
    });
    this.link.on('state', ({ state }: { state: LinkState }) => {
      if (state === 'connecting' || state === 'connected') this.events.push({ t: performance.now(), kind: state });
    });
    this.link.on('backoff', ({ delayMs, reason }: { delayMs: number; reason: string }) => {
      this.events.push({ t: performance.now(), kind: 'backoff', delayMs, reason });
    });
  }

  start(): void {
    this.kit.tokens.start();
    this.link.start();
  }

  get connected(): boolean {
    return this.link.status.state === 'connected';
  }

  async close(): Promise<void> {
    await this.link.stop();
    await this.kit.close();
  }
}
