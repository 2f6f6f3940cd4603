/** Plain counters tests read; mutated only by the service. */
export interface ServiceStats {
  /** timestamps: the newest well-formed (13-digit) accessTimestamps received, at most 20,000. */
  getToken: { total: number; ok: number; byCode: Record<number, number>; timestamps: string[] };
  refreshToken: { total: number; ok: number };
  register: { total: number; ok: number };
  /** HEAD requests of any path: the agent takes its server-time samples this way (only the Date is read). */
  head: { total: number };
  ws: {
    open: number;
    total: number;
    maxConcurrentPerBot: number;
    displaced: number;
    perBotOpen(botId: string): number;
    /** Every accepted connection in order (the newest 10,000 to 20,000 of them): a relay test reads what each one got. */
    connections: ConnectionStats[];
  };
}

/** One accepted WebSocket connection. */
export interface ConnectionStats {
  botId: string;
  /** The address's query parameters other than botId (sessionId, requestId, needManualCall, feature, …). */
  params: Record<string, string>;
  /** CLIENT_VOICE_CHAT_UPDATE frames accepted on this connection: the guide wants exactly one. */
  voiceConfigs: number;
  open: boolean;
}

// A long-running `botlink serve` must not grow without bound; tests see far fewer than this.
const TIMESTAMPS_KEPT = 10_000;
const CONNECTIONS_KEPT = 10_000;
// Only a timestamp getToken could accept is kept: anyone may send 16 KiB of anything, no credentials needed.
const THIRTEEN_DIGITS = /^[0-9]{13}$/;

/** Owns the stats object and the bookkeeping behind it. */
export class StatsRecorder {
  readonly #openPerBot = new Map<string, number>();
  readonly stats: ServiceStats = {
    getToken: { total: 0, ok: 0, byCode: {}, timestamps: [] },
    refreshToken: { total: 0, ok: 0 },
    register: { total: 0, ok: 0 },
    head: { total: 0 },
    ws: {
      open: 0,
      total: 0,
      maxConcurrentPerBot: 0,
      displaced: 0,
      perBotOpen: (botId) => this.#openPerBot.get(botId) ?? 0,
      connections: [],
    },
  };

  /** A request reached a route, whatever its body. */
  received(route: string, body: unknown): void {
    switch (route) {
      case '/auth/getToken': {
        const { getToken } = this.stats;
        getToken.total += 1;
        const ts = isObject(body) ? body['accessTimestamp'] : undefined;
        if (typeof ts === 'string' && THIRTEEN_DIGITS.test(ts)) {
          getToken.timestamps.push(ts);
          if (getToken.timestamps.length > 2 * TIMESTAMPS_KEPT) getToken.timestamps.splice(0, TIMESTAMPS_KEPT);
        }
        return;
      }
      case '/auth/refreshToken':
        this.stats.refreshToken.total += 1;
        return;
      case '/device/register':
        this.stats.register.total += 1;
        return;
    }
  }

  headReceived(): void {
    this.stats.head.total += 1;
  }

  /** A route answered with this body (HTTP 200). */
  answered(route: string, body: unknown): void {
    if (!isObject(body)) return;
    switch (route) {
      case '/auth/getToken': {
        const code = body['code'];
        if (typeof code !== 'number') return;
        const { getToken } = this.stats;
        getToken.byCode[code] = (getToken.byCode[code] ?? 0) + 1;
        if (code === 0) getToken.ok += 1;
        return;
      }
      case '/auth/refreshToken':
        if (body['code'] === 0) this.stats.refreshToken.ok += 1;
        return;
      case '/device/register':
        if (body['state'] === 'SUCCESS') this.stats.register.ok += 1;
        return;
    }
  }

  /** Counts a new connection; its record is the caller's to update. */
  wsOpened(botId: string, params: Record<string, string>): ConnectionStats {
    const connection: ConnectionStats = { botId, params, voiceConfigs: 0, open: true };
    const { connections } = this.stats.ws;
    connections.push(connection);
    if (connections.length > 2 * CONNECTIONS_KEPT) connections.splice(0, CONNECTIONS_KEPT);
    const open = this.stats.ws.perBotOpen(botId) + 1;
    this.#openPerBot.set(botId, open);
    this.stats.ws.open += 1;
    this.stats.ws.total += 1;
    this.stats.ws.maxConcurrentPerBot = Math.max(this.stats.ws.maxConcurrentPerBot, open);
    return connection;
  }

  wsClosed(connection: ConnectionStats): void {
    const { botId } = connection;
    connection.open = false;
    const open = this.stats.ws.perBotOpen(botId) - 1;
    if (open > 0) this.#openPerBot.set(botId, open);
    else this.#openPerBot.delete(botId);
    this.stats.ws.open -= 1;
  }

  wsDisplaced(): void {
    this.stats.ws.displaced += 1;
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
