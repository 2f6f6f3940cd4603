/** A wait for the first SIGINT or SIGTERM. */
export interface SignalWait {
  /** The signal that came; until then, neither signal kills the process (which would exit with code null). */
  readonly received: Promise<NodeJS.Signals>;
  /** Gives both signals back to Node's default (the process dies of them), as `received` does once it resolves. */
  cancel(): void;
}

/** Until SIGINT or SIGTERM: the one way a command that runs until stopped (run, serve, demo, watch, broker) waits. */
export function untilSignal(): SignalWait {
  let resolve!: (signal: NodeJS.Signals) => void;
  const received = new Promise<NodeJS.Signals>((r) => (resolve = r));
  const cancel = (): void => {
    process.off('SIGINT', on);
    process.off('SIGTERM', on);
  };
  const on = (signal: NodeJS.Signals): void => {
    cancel();
    resolve(signal);
  };
  process.on('SIGINT', on);
  process.on('SIGTERM', on);
  return { received, cancel };
}

/** What a command stopped by `signal` says (on stderr, or in the daemon's log): `SIGTERM: closing`. */
export function stoppingOn(signal: NodeJS.Signals): string {
  return `${signal}: closing`;
}
