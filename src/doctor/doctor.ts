import { systemClock, type Clock } from '../clock.js';
import { brokerCheck } from './broker.js';
import { clockCheck, dnsCheck, getTokenCheck, serverTimeCheck, tcpCheck, tlsCheck, websocketCheck } from './cloud.js';
import { messageOf } from '../protocol/errors.js';
import { fail, skip, UNMET, type Check, type CheckResult, type DoctorContext, type Outcome } from './check.js';
import { configCheck, databaseCheck, localApiCheck, runtimeDirCheck, secretFileCheck, stateDirCheck } from './local.js';

export type { CheckResult } from './check.js';

export interface DoctorOptions {
  configFile?: string;
  env: Readonly<Record<string, string | undefined>>;
  clock?: Clock;
  /** Per check, so doctor finishes fast with the network down. */
  timeoutMs?: number;
  onResult?: (result: CheckResult) => void;
}

export interface DoctorReport {
  results: CheckResult[];
  /** False when the configuration or its secret file could not be used, so nearly everything was skipped. */
  configUsable: boolean;
  /** A check overran its time limit and may still hold a socket or a DNS request. */
  timedOut: boolean;
}

export const DEFAULT_CHECK_TIMEOUT_MS = 5000;
/** Checks honour their abort signal; this later limit only catches one that does not. */
const BACKSTOP_MS = 1000;

/** In order: each may rely on what the ones before it found (the list, DESIGN §3.1). */
const CHECKS: readonly Check[] = [
  configCheck,
  secretFileCheck,
  stateDirCheck,
  runtimeDirCheck,
  clockCheck,
  dnsCheck,
  tcpCheck,
  tlsCheck,
  brokerCheck,
  serverTimeCheck,
  getTokenCheck,
  websocketCheck,
  localApiCheck,
  databaseCheck,
];

export const CHECK_NAMES: readonly string[] = CHECKS.map((c) => c.name);

async function runOne(check: Check, ctx: DoctorContext): Promise<{ outcome: Outcome; timedOut: boolean }> {
  const unmet = check.needs.map((need) => UNMET[need](ctx)).find((reason) => reason !== undefined);
  if (unmet !== undefined) return { outcome: skip(unmet), timedOut: false };
  let backstop: NodeJS.Timeout | undefined;
  const overran = new Promise<undefined>((resolve) => {
    backstop = setTimeout(() => resolve(undefined), ctx.timeoutMs + BACKSTOP_MS);
  });
  try {
    const run = Promise.resolve().then(() => check.run(ctx, AbortSignal.timeout(ctx.timeoutMs)));
    const outcome = await Promise.race([run, overran]);
    if (outcome) return { outcome, timedOut: false };
    const limit = `no answer within ${ctx.timeoutMs / 1000} s`;
    return { outcome: fail(limit, 'check the network path to the service (firewall, proxy, routing)'), timedOut: true };
  } catch (err) {
    return {
      outcome: fail(`unexpected error: ${messageOf(err)}`, 'report it to the botlink maintainers with this output'),
      timedOut: false,
    };
  } finally {
    clearTimeout(backstop);
  }
}

/** Runs every check in order; the later ones skip when what they need failed earlier. */
export async function runDoctor(opts: DoctorOptions): Promise<DoctorReport> {
  const ctx: DoctorContext = {
    configFile: opts.configFile,
    env: opts.env,
    clock: opts.clock ?? systemClock,
    timeoutMs: opts.timeoutMs ?? DEFAULT_CHECK_TIMEOUT_MS,
    storeTrouble: [],
  };
  const results: CheckResult[] = [];
  let timedOut = false;
  try {
    for (const check of CHECKS) {
      const run = await runOne(check, ctx);
      timedOut ||= run.timedOut;
      const result = { name: check.name, ...run.outcome };
      results.push(result);
      opts.onResult?.(result);
    }
  } finally {
    await ctx.rt?.close();
  }
  return { results, configUsable: ctx.config !== undefined, timedOut };
}
