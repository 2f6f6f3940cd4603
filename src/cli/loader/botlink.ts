import { VERSION } from '../../version.js';
import { printable } from '../printable.js';
import { type AppBundle, loadApp } from './app-loader.js';

// The entry of dist/: a small module that answers `--version` by itself and loads an application
// bundle beside it, through V8's code cache when the service has a cache directory: the daemon's
// (botlink-daemon.cjs) for `botlink run`, the whole CLI's (botlink.cjs) for every other command.

/** Written by scripts/build.mjs: each application bundle's file beside this one, and its content id. */
declare const __BOTLINK_APPS__: Readonly<Record<'cli' | 'daemon', { file: string; id: string }>>;

/** A process that lives this long (the daemon, serve, demo) saves the code cache its start could not use. */
const SAVE_AFTER_MS = 5000;

/** An error no command foresaw: its message may quote a peer, so printable, its stack's lines kept. */
function fail(err: unknown): void {
  process.stderr.write(`botlink: ${printable(err instanceof Error ? (err.stack ?? err.message) : String(err), { lines: true })}\n`);
  process.exitCode = 1;
}

function run(argv: string[]): void {
  const { cli, daemon } = __BOTLINK_APPS__;
  const chosen = argv[0] === 'run' ? daemon : cli;
  const bundle: AppBundle = { ...chosen, url: new URL(chosen.file, import.meta.url) };
  // systemd sets CACHE_DIRECTORY for the unit's CacheDirectory=; commands run by hand have none.
  const app = loadApp(
    bundle,
    process.env.CACHE_DIRECTORY,
    Object.values(__BOTLINK_APPS__).map((b) => b.id),
  );
  if (app.cache === 'missing' || app.cache === 'rejected') setTimeout(app.saveCache, SAVE_AFTER_MS).unref();
  app.main(argv).then((code) => {
    process.exitCode = code;
  }, fail);
}

const argv = process.argv.slice(2);
// As main() answers it (its own copy serves callers of main()), without loading the application.
if (argv[0] === '--version' || argv[0] === '-v') {
  process.stdout.write(`${VERSION}\n`);
} else {
  try {
    run(argv);
  } catch (err) {
    fail(err);
  }
}
