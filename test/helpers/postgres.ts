// A throwaway PostgreSQL for a test file, in the run's folder for other uids (test/global-setup.ts).
import { inject } from 'vitest';
import { type PostgresServer, startPostgresIn } from '../../scripts/lib/postgres-server.js';

export { POSTGRES_MISSING, type PostgresServer } from '../../scripts/lib/postgres-server.js';

/**
 * Runs `initdb` as nobody in a folder below the tests' folder for other uids, then `postgres` on
 * 127.0.0.1 with a free port and its socket in that folder; resolves once its log says it accepts
 * connections. Fails by name when PostgreSQL is not installed.
 */
export function startPostgres(): Promise<PostgresServer> {
  return startPostgresIn(inject('otherUsersRoot'));
}
