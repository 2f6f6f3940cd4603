// The broker store's two databases for a contract suite: a fresh SQLite file or PostgreSQL database per test,
// a place brought to an older schema version (to test a migration on what a store already holds), and the
// stores opened, each closed after its test.
import { join } from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { openStore } from '../../src/broker/store/open.js';
import { POSTGRES_MIGRATIONS } from '../../src/broker/store/postgres-schema.js';
import { SQLITE_MIGRATIONS } from '../../src/broker/store/sqlite-schema.js';
import type { BrokerStore, StoreKind } from '../../src/broker/store/types.js';
import { openDatabase } from '../../src/native.js';
import type { Harness } from './harness.js';
import { type PostgresServer, startPostgres } from './postgres.js';

export interface Backend {
  kind: StoreKind;
  /** A new, empty place: its spec. */
  fresh(): Promise<string>;
  /** Brings the place to schema version `version` (an older release's), with `sql` run after it. */
  atVersion(spec: string, version: number, sql: string): Promise<void>;
}

/** Both backends, PostgreSQL started for the file and stopped after it; `open` closes each store after its test. */
export function storeBackends(
  h: Pick<Harness, 'tempDir' | 'cleanups'>,
  prefix: string,
): { sqlite: Backend; postgres: Backend; open(spec: string): Promise<BrokerStore> } {
  const clock = { wallNow: () => Date.now() };
  let server: PostgresServer;
  beforeAll(async () => {
    server = await startPostgres();
  }, 120_000);
  afterAll(() => server?.stop(), 60_000);
  return {
    async open(spec) {
      const store = await openStore(spec, { clock });
      h.cleanups.push(() => store.close());
      return store;
    },
    sqlite: {
      kind: 'sqlite',
      async fresh() {
        return `sqlite:${join(h.tempDir(prefix), 'broker.db')}`;
      },
      async atVersion(spec, version, sql) {
        const db = openDatabase(spec.slice('sqlite:'.length));
        try {
          for (const m of SQLITE_MIGRATIONS.slice(0, version)) db.exec(m);
          db.exec(sql);
          db.pragma(`user_version = ${version}`);
        } finally {
          db.close();
        }
      },
    },
    postgres: {
      kind: 'postgres',
      fresh: () => server.freshDatabase(),
      async atVersion(spec, version, sql) {
        for (const m of POSTGRES_MIGRATIONS.slice(0, version)) await server.query(spec, m);
        await server.query(spec, sql);
        await server.query(spec, 'CREATE TABLE broker_schema (one BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one), version INTEGER NOT NULL)');
        await server.query(spec, 'INSERT INTO broker_schema (version) VALUES ($1)', [version]);
      },
    },
  };
}
