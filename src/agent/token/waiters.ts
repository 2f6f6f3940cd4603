/** Callers of TokenManager.current() waiting for a token with some life left. */
interface Waiter {
  minLeftMs: number;
  failFast: boolean;
  resolve(token: string): void;
  reject(err: unknown): void;
}

export class Waiters {
  #list: Waiter[] = [];

  /** A promise for a token with `minLeftMs` left; when `signal` aborts it rejects with `abortReason()`. */
  add(opts: { minLeftMs: number; failFast: boolean; signal?: AbortSignal | undefined }, abortReason: () => unknown): Promise<string> {
    return new Promise<string>((resolve, reject) => {
      const waiter: Waiter = { minLeftMs: opts.minLeftMs, failFast: opts.failFast, resolve, reject };
      this.#list.push(waiter);
      opts.signal?.addEventListener(
        'abort',
        () => {
          this.#list = this.#list.filter((w) => w !== waiter);
          reject(abortReason());
        },
        { once: true },
      );
    });
  }

  /** The longest life a waiting caller needs (0 with none): a token shorter than that is renewed ahead of the schedule. */
  neededLeftMs(): number {
    return Math.max(0, ...this.#list.map((w) => w.minLeftMs));
  }

  /** Resolves every waiter `tokenFor` has a token for; the others keep waiting. */
  settle(tokenFor: (minLeftMs: number) => string | undefined): void {
    this.#list = this.#list.filter((w) => {
      const token = tokenFor(w.minLeftMs);
      if (token !== undefined) w.resolve(token);
      return token === undefined;
    });
  }

  /** Rejects the callers who asked to fail fast (or, with `all`, every caller). */
  reject(err: unknown, all = false): void {
    this.#list = this.#list.filter((w) => {
      const rejected = all || w.failFast;
      if (rejected) w.reject(err);
      return !rejected;
    });
  }
}
