import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { useHarness } from '../../helpers/harness.js';

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
const { tempDir } = useHarness();

interface Violation {
  from: string;
  to: string;
  rule: { name: string };
}

/** Writes a tree of modules (path → the paths it imports, or `node:` modules) into a temp dir. */
function writeTree(tree: Record<string, string[]>): string {
  const dir = tempDir('botlink-import-rules-');
  for (const [file, imports] of Object.entries(tree)) {
    const path = join(dir, file);
    mkdirSync(dirname(path), { recursive: true });
    const lines = imports.map((to, i) => {
      // './x.js' for x.ts, as the sources write it; `type:` marks a type-only import.
      const target = to.replace(/^type:/, '');
      const spec = target.startsWith('node:') ? target : `./${join(dirname(file).replace(/[^/]+/g, '..'), target).replace(/\.ts$/, '.js')}`;
      return to.startsWith('type:') ? `import type { T as T${i} } from '${spec}';` : `import { v as v${i} } from '${spec}';`;
    });
    writeFileSync(path, `${lines.join('\n')}\nexport type T = number;\nexport const v = 1;\n`);
  }
  return dir;
}

/** `npm run depcruise`'s command, run in `dir` over the folders of src, test and scripts it holds. */
function depcruise(dir: string, ...args: string[]): { status: number | null; stdout: string; stderr: string } {
  const bin = join(ROOT, 'node_modules', 'dependency-cruiser', 'bin', 'dependency-cruise.mjs');
  const roots = ['src', 'test', 'scripts'].filter((root) => existsSync(join(dir, root)));
  return spawnSync(process.execPath, [bin, ...roots, '--config', join(ROOT, '.dependency-cruiser.cjs'), ...args], {
    cwd: dir,
    encoding: 'utf8',
  });
}

/** The violations in a tree, as "rule: from -> to", sorted. */
function violations(dir: string): string[] {
  const r = depcruise(dir, '--output-type', 'json');
  expect(r.status, r.stderr).toBe(0);
  const { summary } = JSON.parse(r.stdout) as { summary: { violations: Violation[] } };
  return summary.violations.map((v) => `${v.rule.name}: ${v.from} -> ${v.to}`).sort();
}

describe('.dependency-cruiser.cjs (npm run depcruise)', () => {
  it('accepts the layers as they are meant: shared leaves and protocol below, doctor and cli on top', () => {
    const dir = writeTree({
      'src/protocol/wire.ts': ['src/protocol/codes.ts'],
      'src/protocol/codes.ts': [],
      'src/log.ts': ['src/protocol/codes.ts', 'src/ownership.ts'],
      'src/ownership.ts': [],
      'src/clock.ts': [],
      'src/cloud/client.ts': ['src/protocol/wire.ts', 'src/clock.ts'],
      'src/sqlite/open.ts': ['src/protocol/errors.ts', 'src/ownership.ts'],
      'src/protocol/errors.ts': [],
      'src/agent/link/link.ts': ['src/log.ts', 'src/protocol/wire.ts', 'src/clock.ts', 'src/cloud/client.ts', 'src/sqlite/open.ts'],
      'src/broker/server.ts': ['src/log.ts', 'src/protocol/wire.ts', 'src/cloud/client.ts', 'src/sqlite/open.ts'],
      'src/service/server.ts': ['src/log.ts', 'src/protocol/wire.ts', 'src/sqlite/open.ts'],
      'src/doctor/doctor.ts': ['src/agent/link/link.ts', 'src/service/server.ts'],
      'src/cli/main.ts': ['src/doctor/doctor.ts', 'src/agent/link/link.ts', 'src/broker/server.ts'],
    });
    expect(violations(dir)).toEqual([]);
    const r = depcruise(dir);
    expect(r.status, r.stdout + r.stderr).toBe(0);
  });

  it('names every rule a bad import breaks', () => {
    const dir = writeTree({
      'src/agent/store/lease.ts': ['src/agent/store/instance.ts'],
      'src/agent/store/instance.ts': ['src/agent/store/lease.ts'],
      'src/service/a.ts': ['type:src/service/b.ts'],
      'src/service/b.ts': ['type:src/service/a.ts'],
      'src/protocol/wire.ts': ['src/log.ts'],
      'src/log.ts': [],
      'src/native.ts': ['src/service/store.ts'],
      'src/ownership.ts': ['src/sqlite/open.ts'],
      'src/service/store.ts': ['src/sqlite/open.ts'],
      'src/sqlite/open.ts': ['src/sqlite/group-commit.ts', 'src/agent/store/token-store.ts', 'src/broker/sqlite.ts', 'src/cli/main.ts'],
      'src/sqlite/group-commit.ts': ['src/cloud/http.ts'],
      'src/cloud/http.ts': [],
      'src/agent/store/token-store.ts': [],
      'src/broker/sqlite.ts': [],
      'src/agent/link/link.ts': ['src/service/store.ts'],
      'src/service/ws.ts': ['src/agent/link/link.ts', 'src/doctor/net.ts'],
      'src/doctor/net.ts': [],
      'src/clock.ts': ['test/helpers/manual-clock.ts', 'scripts/bench/stats.ts', 'src/cloud/client.ts'],
      'src/cloud/client.ts': ['src/agent/time/trusted.ts', 'src/sqlite/open.ts'],
      'src/agent/time/trusted.ts': ['src/broker/store.ts'],
      'src/broker/store.ts': ['src/agent/time/trusted.ts', 'src/service/seed.ts', 'src/cli/main.ts'],
      'src/service/seed.ts': ['src/broker/store.ts'],
      'src/cli/main.ts': ['src/service/testing.ts'],
      'src/cli/app/relay-client.ts': ['src/cli/commands/chat.ts'],
      'src/cli/commands/chat.ts': [],
      'src/service/testing.ts': [],
      'test/helpers/manual-clock.ts': [],
      'scripts/bench/stats.ts': [],
    });
    // A cycle is reported once, from its first module; one of types only counts too.
    expect(violations(dir)).toEqual([
      'agent-not-service: src/agent/link/link.ts -> src/service/store.ts',
      'agent-not-service: src/agent/time/trusted.ts -> src/broker/store.ts',
      'broker-alone: src/broker/store.ts -> src/agent/time/trusted.ts',
      'broker-alone: src/broker/store.ts -> src/service/seed.ts',
      'cli-roles: src/cli/app/relay-client.ts -> src/cli/commands/chat.ts',
      'cloud-is-shared: src/cloud/client.ts -> src/agent/time/trusted.ts',
      'cloud-is-shared: src/cloud/client.ts -> src/sqlite/open.ts',
      'doctor-and-cli-on-top: src/broker/store.ts -> src/cli/main.ts',
      'doctor-and-cli-on-top: src/service/ws.ts -> src/doctor/net.ts',
      'doctor-and-cli-on-top: src/sqlite/open.ts -> src/cli/main.ts',
      'no-cycle: src/agent/store/instance.ts -> src/agent/store/lease.ts',
      'no-cycle: src/agent/time/trusted.ts -> src/broker/store.ts',
      'no-cycle: src/broker/store.ts -> src/service/seed.ts',
      'no-cycle: src/service/a.ts -> src/service/b.ts',
      'protocol-is-a-leaf: src/protocol/wire.ts -> src/log.ts',
      'service-not-agent: src/service/seed.ts -> src/broker/store.ts',
      'service-not-agent: src/service/ws.ts -> src/agent/link/link.ts',
      'service-test-controls-for-tests: src/cli/main.ts -> src/service/testing.ts',
      'shared-leaves-stay-low: src/clock.ts -> src/cloud/client.ts',
      'shared-leaves-stay-low: src/native.ts -> src/service/store.ts',
      'shared-leaves-stay-low: src/ownership.ts -> src/sqlite/open.ts',
      'sqlite-is-shared: src/sqlite/group-commit.ts -> src/cloud/http.ts',
      'sqlite-is-shared: src/sqlite/open.ts -> src/agent/store/token-store.ts',
      'sqlite-is-shared: src/sqlite/open.ts -> src/broker/sqlite.ts',
      'sqlite-is-shared: src/sqlite/open.ts -> src/cli/main.ts',
      'src-not-tests-or-scripts: src/clock.ts -> scripts/bench/stats.ts',
      'src-not-tests-or-scripts: src/clock.ts -> test/helpers/manual-clock.ts',
    ]);
    // CI runs the default reporter: it must fail the step and name the rule.
    const r = depcruise(dir);
    expect(r.status).not.toBe(0);
    expect(r.stdout).toContain('error agent-not-service: src/agent/link/link.ts → src/service/store.ts');
  });

  it('keeps the console (browser code) apart: it imports only itself, and no module of src imports it; tests may', () => {
    const dir = writeTree({
      'src/clock.ts': [],
      'src/console/main.ts': ['src/console/logic.ts', 'src/clock.ts', 'test/helpers/wait-for.ts'],
      'src/console/logic.ts': [],
      'src/broker/admin/router.ts': ['src/console/logic.ts'],
      'test/helpers/wait-for.ts': [],
      'test/unit/console/logic.test.ts': ['src/console/logic.ts'],
    });
    expect(violations(dir)).toEqual([
      'console-alone: src/console/main.ts -> src/clock.ts',
      'console-alone: src/console/main.ts -> test/helpers/wait-for.ts',
      'console-only-built: src/broker/admin/router.ts -> src/console/logic.ts',
      'src-not-tests-or-scripts: src/console/main.ts -> test/helpers/wait-for.ts',
    ]);
  });

  it('keeps the benchmarks off the tests, scripts/lib shared by both, and test/unit free of I/O', () => {
    const dir = writeTree({
      'src/clock.ts': [],
      'scripts/lib/stats.ts': [],
      'scripts/lib/exec.ts': ['src/clock.ts', 'scripts/bench/relay.ts'],
      'scripts/bench/relay.ts': ['scripts/lib/stats.ts', 'src/clock.ts', 'test/helpers/wait-for.ts'],
      'test/helpers/wait-for.ts': [],
      'test/helpers/harness.ts': [],
      'test/helpers/manual-clock.ts': ['src/clock.ts'],
      'test/integration/agent/relay.test.ts': ['test/helpers/harness.ts', 'scripts/lib/exec.ts', 'scripts/bench/relay.ts', 'node:net'],
      'test/unit/agent/relay-decide.test.ts': [
        'test/helpers/manual-clock.ts',
        'scripts/lib/stats.ts',
        'node:path',
        'test/helpers/harness.ts',
        'scripts/lib/exec.ts',
        'node:net',
        'node:child_process',
      ],
    });
    expect(violations(dir)).toEqual([
      'scripts-lib-is-shared: scripts/lib/exec.ts -> scripts/bench/relay.ts',
      'scripts-not-tests: scripts/bench/relay.ts -> test/helpers/wait-for.ts',
      'unit-tests-do-no-io: test/unit/agent/relay-decide.test.ts -> child_process',
      'unit-tests-do-no-io: test/unit/agent/relay-decide.test.ts -> net',
      'unit-tests-do-no-io: test/unit/agent/relay-decide.test.ts -> scripts/lib/exec.ts',
      'unit-tests-do-no-io: test/unit/agent/relay-decide.test.ts -> test/helpers/harness.ts',
    ]);
  });
});
