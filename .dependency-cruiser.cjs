// The import rules of the house (`npm run depcruise`, run in CI). The layers, bottom to top:
//   src/protocol            the wire contract: imports nothing of ours outside itself
//   src/*.ts                shared leaves (clock, log, native, ownership, version, ws-close, exposition, raw-response, private-file): protocol and each other only
//   src/cloud               the cloud client (signing, getToken, refreshToken, register) that agent and broker share
//   src/sqlite              opening, migrating and group-committing SQLite, for agent, service and broker
//   src/agent, src/service, src/broker
//                           the three products: each may use the layers below, never each other
//   src/doctor, src/cli     applications on top: nothing below imports them
//   src/console             the operator's console, browser code: imports nothing of ours outside itself, and no
//                           module of src imports it (the build embeds it: src/broker/admin imports `botlink:console`)
// Nothing in src imports test/ or scripts/. Tests may use scripts (the build, scripts/lib); scripts never use
// tests: what the benchmarks and the tests share lives in scripts/lib, which imports nothing else of ours but src.
// test/unit does no I/O: no process, socket or server of its own, no temp folder.
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-cycle',
      comment: 'A cycle makes two modules one: break it by moving the shared part into a leaf both import.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    {
      name: 'protocol-is-a-leaf',
      comment: 'src/protocol is the contract both sides share: it may import only itself (and packages).',
      severity: 'error',
      from: { path: '^src/protocol/' },
      to: { path: '^(src|test|scripts)/', pathNot: '^src/protocol/' },
    },
    {
      name: 'shared-leaves-stay-low',
      comment:
        'src/*.ts (clock, log, native, ownership, version, ws-close, exposition, raw-response, private-file) serve every product: they import only src/protocol and each other.',
      severity: 'error',
      from: { path: '^src/[^/]+\\.ts$' },
      to: { path: '^src/(cloud|sqlite|agent|service|broker|doctor|cli)/' },
    },
    {
      name: 'cloud-is-shared',
      comment: 'src/cloud is what agent and broker both need of the cloud: it imports only protocol and the shared leaves.',
      severity: 'error',
      from: { path: '^src/cloud/' },
      to: { path: '^src/(sqlite|agent|service|broker|doctor|cli)/' },
    },
    {
      name: 'sqlite-is-shared',
      comment:
        'src/sqlite is how agent, service and broker open, migrate and group-commit SQLite: it imports only protocol and the shared leaves.',
      severity: 'error',
      from: { path: '^src/sqlite/' },
      to: { path: '^src/(cloud|agent|service|broker|doctor|cli)/' },
    },
    {
      name: 'agent-not-service',
      comment: 'The agent talks to any cloud through the protocol, never through the reference service code.',
      severity: 'error',
      from: { path: '^src/agent/' },
      to: { path: '^src/(service|broker)/' },
    },
    {
      name: 'service-not-agent',
      comment: 'The reference service implements the contract alone: it never uses agent code.',
      severity: 'error',
      from: { path: '^src/service/' },
      to: { path: '^src/(agent|broker)/' },
    },
    {
      name: 'broker-alone',
      comment: 'The broker is a third application: it shares only protocol, cloud, sqlite and the leaves with agent and service.',
      severity: 'error',
      from: { path: '^src/broker/' },
      to: { path: '^src/(agent|service)/' },
    },
    {
      name: 'doctor-and-cli-on-top',
      comment: 'doctor and cli are applications of the agent and service: move what is shared down into agent, service or protocol.',
      severity: 'error',
      from: { path: '^src/(agent|service|broker|cloud|sqlite|protocol)/' },
      to: { path: '^src/(doctor|cli)/' },
    },
    {
      name: 'service-test-controls-for-tests',
      comment: "The reference service's test controls (faults, push, echo) are for tests and benchmarks: `botlink serve` never ships them.",
      severity: 'error',
      from: { path: '^src/' },
      to: { path: '^src/service/testing\\.ts$' },
    },
    {
      name: 'cli-roles',
      comment: "src/cli's app-side client, command frame and loader serve the commands: they never import one.",
      severity: 'error',
      from: { path: '^src/cli/(app|frame|loader)/' },
      to: { path: '^src/cli/commands/' },
    },
    {
      name: 'console-alone',
      comment:
        "src/console runs in the operator's browser: it imports only itself, never node code of src (nor test or scripts), so nothing of the daemon or the broker ends up in the page.",
      severity: 'error',
      from: { path: '^src/console/' },
      to: { path: '^(src|test|scripts)/', pathNot: '^src/console/' },
    },
    {
      name: 'console-only-built',
      comment:
        "The console reaches the product only as the build's `botlink:console` module (scripts/lib/console-build.mjs): no module of src imports its source, which is browser code.",
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/console/' },
      to: { path: '^src/console/' },
    },
    {
      name: 'src-not-tests-or-scripts',
      comment: 'Shipped code never depends on tests or build and bench scripts.',
      severity: 'error',
      from: { path: '^src/' },
      to: { path: '^(test|scripts)/' },
    },
    {
      name: 'scripts-not-tests',
      comment:
        'The build and the benchmarks never import tests: what they share with them (process stats, median and quantile, running a command, a throwaway PostgreSQL) lives in scripts/lib.',
      severity: 'error',
      from: { path: '^scripts/' },
      to: { path: '^test/' },
    },
    {
      name: 'scripts-lib-is-shared',
      comment: 'scripts/lib serves tests and benchmarks alike: it imports only itself and src, never a benchmark, the build or a test.',
      severity: 'error',
      from: { path: '^scripts/lib/' },
      to: { path: '^(test|scripts)/', pathNot: '^scripts/lib/' },
    },
    {
      name: 'unit-tests-do-no-io',
      comment:
        'test/unit holds pure parts on manual clocks: a test that starts a process, a socket or a server, or makes a temp folder, belongs in test/integration (swc sees type-only imports too: name a type through the module under test).',
      severity: 'error',
      from: { path: '^test/unit/' },
      to: {
        path: [
          '^(node:)?(child_process|cluster|dgram|http|http2|https|net|tls|worker_threads)$',
          '^node_modules/(better-sqlite3|pg|ws)/',
          '^test/helpers/(agent-kit|app-child|broker-rig|bundle|conversation-client|daemon-proc|faketime|guide-cloud|harness|in-process|notify-listener|pipelining|ports|postgres|relay-rig|scripted-server|serve-proc|service-client|tmpfs|unit-file|ws-peers)\\.ts$',
          '^scripts/lib/(exec|postgres-server|procfs|file-appears)\\.ts$',
        ],
      },
    },
  ],
  options: {
    // TypeScript 7 has no JS API for dependency-cruiser to parse with: swc reads the sources (type-only
    // imports included, so a cycle of types counts too: it still ties two modules together).
    parser: 'swc',
    doNotFollow: { path: 'node_modules' },
  },
};
