/** Far longer than any in-process wait: it only turns a lost event into a failure that names it. */
const LOST_EVENT_MS = 15_000;

/**
 * A component's change callback (TokenManager's onChange) as promises, so a test waits on the event
 * itself rather than polling: `until(check)` resolves at the first call after which `check` holds.
 */
export class Changes {
  /** How many times onChange was called. */
  calls = 0;
  readonly #waits = new Set<{ check: () => boolean; done: (err?: Error) => void }>();

  readonly onChange = (): void => {
    this.calls++;
    for (const w of [...this.#waits]) {
      let held: boolean;
      try {
        held = w.check();
      } catch (err) {
        w.done(err as Error);
        continue;
      }
      if (held) w.done();
    }
  };

  /** Resolves at once when `check` holds already, else at the first change after which it does. */
  until(check: () => boolean, what: string): Promise<void> {
    if (check()) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const bound = setTimeout(() => wait.done(new Error(`no change brought ${what} within ${LOST_EVENT_MS / 1000} s`)), LOST_EVENT_MS);
      const wait = {
        check,
        done: (err?: Error): void => {
          clearTimeout(bound);
          this.#waits.delete(wait);
          if (err) reject(err);
          else resolve();
        },
      };
      this.#waits.add(wait);
    });
  }
}
