import { createReferenceService, DISPLACEMENT_MARKERS, type ReferenceService, SERVICE_DEFAULTS } from '../../service/server.js';
import { DEFAULT_SEED, loadSeedFile } from '../../service/seed.js';
import { isLoopbackHost } from '../../loopback.js';
import { defineCommand } from '../frame/command.js';
import { Failure, UsageError } from '../frame/exit.js';
import { stoppingOn, untilSignal } from '../frame/signals.js';
import { printable } from '../printable.js';

const USAGE = `usage: botlink serve [--host H] [--port P] [--db FILE] [--seed FILE] [--access-ttl S] [--refresh-ttl S]
                    [--displacement-marker event|code400] [--round-delay-ms MS] [--vad-silence-ms MS]

  --host H         address to listen on (default ${SERVICE_DEFAULTS.host})
  --port P         port, 0 picks a free one (default ${SERVICE_DEFAULTS.port})
  --db FILE        SQLite file that keeps tokens across restarts, created 0600 (default: in memory)
  --seed FILE      accounts, vendors and bots as JSON (default: AK/SK, vendor V1, bot bot-1, served on
                   loopback only: a --host other than loopback needs --seed)
  --access-ttl S   access token lifetime in seconds (default ${SERVICE_DEFAULTS.accessTtlS})
  --refresh-ttl S  refresh token lifetime in seconds (default ${SERVICE_DEFAULTS.refreshTtlS})
  --displacement-marker event|code400
                   how a displaced WebSocket is told: the public guide's EVENT frame with eventType
                   REPEAT_CLIENT_SESSION (default) or {"code":400,"msg":"REPEAT_CLIENT_SESSION"}
  --round-delay-ms MS
                   pause between two frames of a conversation round, 0 answers at once (default ${SERVICE_DEFAULTS.roundDelayMs})
  --vad-silence-ms MS
                   free mode: silence after speech that ends an utterance (default ${SERVICE_DEFAULTS.vadSilenceMs})`;

const LISTEN_ERRORS = new Set(['EADDRINUSE', 'EADDRNOTAVAIL', 'EACCES', 'ENOTFOUND', 'EAI_AGAIN']);

/** 127.0.0.0/8 and ::1 (in any spelling, ::ffff:127.x.y.z too): addresses no other machine reaches. */
/** `botlink serve`: the reference token service in the foreground until SIGTERM or SIGINT. */
export const serve = defineCommand({
  usage: USAGE,
  flags: {
    host: { type: 'string' },
    port: { type: 'integer', min: 0, max: 65535 },
    db: { type: 'string' },
    seed: { type: 'string' },
    'access-ttl': { type: 'integer', min: 1, max: 2 ** 31 },
    'refresh-ttl': { type: 'integer', min: 1, max: 2 ** 31 },
    'displacement-marker': { type: 'string', choices: DISPLACEMENT_MARKERS },
    'round-delay-ms': { type: 'integer', min: 0, max: 60_000 },
    'vad-silence-ms': { type: 'integer', min: 20, max: 60_000 },
  },
  async run({ flags, stdout, stderr }) {
    const note = (line: string): void => void stderr.write(`botlink serve: ${printable(line)}\n`);
    if (flags.host === '') throw new UsageError('--host must not be empty');
    // The built-in account's secret is in this very usage text: on the LAN anyone could sign with it.
    if (flags.host !== undefined && flags.seed === undefined && !isLoopbackHost(flags.host))
      throw new UsageError(
        `--host ${flags.host} is not a loopback address: the built-in account (AK/SK) is served on loopback only; give --seed FILE with accounts of your own`,
      );
    const displacementMarker = flags['displacement-marker'];
    if (flags.seed === undefined) note('no --seed: serving accessKeyId AK (secretKey SK), vendor V1, bot bot-1');
    // A seed file that will not do is a SeedError: exit 65, its message naming the spot.
    const seed = flags.seed === undefined ? DEFAULT_SEED : loadSeedFile(flags.seed);
    let service: ReferenceService;
    try {
      service = await createReferenceService({
        seed,
        ...(flags.host !== undefined && { host: flags.host }),
        ...(flags.port !== undefined && { port: flags.port }),
        ...(flags.db !== undefined && { dbFile: flags.db }),
        ...(flags['access-ttl'] !== undefined && { accessTtlS: flags['access-ttl'] }),
        ...(flags['refresh-ttl'] !== undefined && { refreshTtlS: flags['refresh-ttl'] }),
        ...(displacementMarker !== undefined && { displacementMarker }),
        ...(flags['round-delay-ms'] !== undefined && { roundDelayMs: flags['round-delay-ms'] }),
        ...(flags['vad-silence-ms'] !== undefined && { vadSilenceMs: flags['vad-silence-ms'] }),
      });
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== undefined && LISTEN_ERRORS.has(code))
        throw new Failure(`cannot listen: ${(err as Error).message}`, { kind: 'unavailable' });
      throw err;
    }
    service.events.on('internal-error', (err: unknown) =>
      note(`internal error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`),
    );
    // The wait before the line: its reader may stop us at once, and a SIGTERM with no handler would kill us (code null).
    const stop = untilSignal();
    stdout.write(`listening on ${service.url}\n`);
    note(stoppingOn(await stop.received));
    await service.close();
  },
});
