import { createReferenceService, DISPLACEMENT_MARKERS, type DisplacementMarker, type ReferenceService } from '../../service/server.js';
import { DEFAULT_SEED, loadSeedFile, SeedError, type Seed } from '../../service/seed.js';
import { ServiceDbError } from '../../service/store-schema.js';
import { parseFlags } from './common.js';
import { Exit, UsageError } from '../frame/exit.js';

const USAGE = `usage: botlink serve [--host H] [--port P] [--db FILE] [--seed FILE] [--access-ttl S] [--refresh-ttl S]
                    [--displacement-marker event|code400] [--round-delay-ms MS] [--vad-silence-ms MS]

  --host H         address to listen on (default 127.0.0.1)
  --port P         port, 0 picks a free one (default 0)
  --db FILE        SQLite file that keeps tokens across restarts, created 0600 (default: in memory)
  --seed FILE      accounts, vendors and bots as JSON (default: AK/SK, vendor V1, bot bot-1)
  --access-ttl S   access token lifetime in seconds (default 7200)
  --refresh-ttl S  refresh token lifetime in seconds (default 604800)
  --displacement-marker event|code400
                   how a displaced WebSocket is told: the public guide's EVENT frame with eventType
                   REPEAT_CLIENT_SESSION (default) or {"code":400,"msg":"REPEAT_CLIENT_SESSION"}
  --round-delay-ms MS
                   pause between two frames of a conversation round, 0 answers at once (default 5)
  --vad-silence-ms MS
                   free mode: silence after speech that ends an utterance (default 600)`;

const LISTEN_ERRORS = new Set(['EADDRINUSE', 'EADDRNOTAVAIL', 'EACCES', 'ENOTFOUND', 'EAI_AGAIN']);

function integer(flag: string, raw: string | undefined, min: number, max: number): number | undefined {
  if (raw === undefined) return undefined;
  const n = /^[0-9]{1,10}$/.test(raw) ? Number(raw) : NaN;
  if (!(n >= min && n <= max)) throw new UsageError(`--${flag} must be an integer from ${min} to ${max}, got '${raw}'`);
  return n;
}

function marker(raw: string | undefined): DisplacementMarker | undefined {
  if (raw === undefined) return undefined;
  const known = DISPLACEMENT_MARKERS.find((m) => m === raw);
  if (!known) throw new UsageError(`--displacement-marker must be one of ${DISPLACEMENT_MARKERS.join(', ')}, got '${raw}'`);
  return known;
}

function note(line: string): void {
  process.stderr.write(`botlink serve: ${line}\n`);
}

/** `botlink serve`: the reference token service in the foreground until SIGTERM or SIGINT. */
export async function serve(argv: string[]): Promise<number> {
  const { values } = parseFlags(
    argv,
    {
      host: { type: 'string' },
      port: { type: 'string' },
      db: { type: 'string' },
      seed: { type: 'string' },
      'access-ttl': { type: 'string' },
      'refresh-ttl': { type: 'string' },
      'displacement-marker': { type: 'string' },
      'round-delay-ms': { type: 'string' },
      'vad-silence-ms': { type: 'string' },
    },
    USAGE,
  );
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return Exit.OK;
  }
  const port = integer('port', values.port, 0, 65535);
  const accessTtlS = integer('access-ttl', values['access-ttl'], 1, 2 ** 31);
  const refreshTtlS = integer('refresh-ttl', values['refresh-ttl'], 1, 2 ** 31);
  if (values.host === '') throw new UsageError('--host must not be empty');
  const displacementMarker = marker(values['displacement-marker']);
  const roundDelayMs = integer('round-delay-ms', values['round-delay-ms'], 0, 60_000);
  const vadSilenceMs = integer('vad-silence-ms', values['vad-silence-ms'], 20, 60_000);

  let seed: Seed = DEFAULT_SEED;
  if (values.seed === undefined) {
    note('no --seed: serving accessKeyId AK (secretKey SK), vendor V1, bot bot-1');
  } else {
    try {
      seed = loadSeedFile(values.seed);
    } catch (err) {
      if (!(err instanceof SeedError)) throw err;
      note(err.message);
      return Exit.DATAERR;
    }
  }

  let service: ReferenceService;
  try {
    service = await createReferenceService({
      seed,
      ...(values.host !== undefined && { host: values.host }),
      ...(port !== undefined && { port }),
      ...(values.db !== undefined && { dbFile: values.db }),
      ...(accessTtlS !== undefined && { accessTtlS }),
      ...(refreshTtlS !== undefined && { refreshTtlS }),
      ...(displacementMarker !== undefined && { displacementMarker }),
      ...(roundDelayMs !== undefined && { roundDelayMs }),
      ...(vadSilenceMs !== undefined && { vadSilenceMs }),
    });
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    if (e.code !== undefined && LISTEN_ERRORS.has(e.code)) {
      note(`cannot listen: ${e.message}`);
      return Exit.UNAVAILABLE;
    }
    if (err instanceof ServiceDbError) {
      note(err.message);
      return Exit.DATAERR;
    }
    throw err;
  }
  service.events.on('internal-error', (err: unknown) =>
    note(`internal error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`),
  );
  // The handlers before the line: its reader may stop us at once, and a SIGTERM with none would kill us (code null).
  const stopped = new Promise<NodeJS.Signals>((resolve) => {
    const stop = (sig: NodeJS.Signals): void => {
      process.off('SIGTERM', stop);
      process.off('SIGINT', stop);
      resolve(sig);
    };
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
  });
  process.stdout.write(`listening on ${service.url}\n`);
  const signal = await stopped;
  note(`${signal}: closing`);
  await service.close();
  return Exit.OK;
}
