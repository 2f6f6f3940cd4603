import { join } from 'node:path';
import { describeCode } from '../protocol/codes.js';
import { CloudError } from '../cloud/errors.js';
import type { AgentConfig } from '../agent/config/config.js';
import { fixOf, messageOf } from '../protocol/errors.js';
import { fail, failWith, ok, skip, UNMET, type Check, type Outcome } from './check.js';
import { checkDns, checkTcp, checkTls, checkWsHandshake } from './net.js';
import { runningDaemon } from '../agent/store/instance.js';
import { resolveIdentity, type ResolvedIdentity } from '../agent/daemon/provisioning.js';
import { chooseSigningTime, MAX_WALL_DISAGREEMENT_MS } from '../agent/time/signingtime.js';
import { readStatusFile, STATUS_FILE, type StatusDoc } from '../agent/daemon/status.js';
import type { AgentRuntime } from '../agent/daemon/runtime.js';
import { BROKER_WINDOW_MS } from '../protocol/broker.js';
import { brokerTokenOutcome } from './broker.js';
import { storeIdentity } from '../agent/store/token-store.js';

const NO_TIME_FIX = 'enable NTP (timedatectl set-ntp true) or make the token service reachable: either gives the agent a time to sign with';

/** How messages name whoever issues the tokens, and whose Date stands in for the clock. */
function issuerOf(rt: AgentRuntime): string {
  return rt.issuer.mode === 'broker' ? 'the broker' : 'the service';
}

/** A failed cloud call with the fix it carries; without one, suspect the path to the service. */
function cloudFailure(err: unknown, who = ''): Outcome {
  return fail(
    `${who}${messageOf(err)}`,
    fixOf(err) ?? 'check that the service runs and the network path to it (proxy, firewall); run doctor again',
  );
}

function formatOffset(ms: number): string {
  const abs = Math.abs(ms);
  const size = abs < 10_000 ? `${Math.round(abs)} ms` : `${(abs / 1000).toFixed(1)} s`;
  return `${size} ${ms >= 0 ? 'ahead of' : 'behind'}`;
}

/** The daemon's own link, from status.json: a second socket for its botId would displace it. */
function daemonLink(pid: number, status: StatusDoc | undefined, config: AgentConfig): Outcome {
  const why = 'no second socket opened: it would displace the daemon';
  if (status?.pid !== pid) {
    const found = status ? `is from pid ${status.pid}` : 'is missing or unreadable';
    return fail(
      `daemon pid ${pid} runs but ${join(config.runtimeDir, STATUS_FILE)} ${found} (${why})`,
      `check that the daemon uses runtimeDir ${config.runtimeDir}`,
    );
  }
  const { state, since, lastError, fix: linkFix } = status.link;
  const when = new Date(since).toISOString();
  if (state === 'connected') return ok(`daemon pid ${pid} is connected since ${when} (${why})`);
  const fix = linkFix ?? `see botlink status and the log ${config.logFile}`;
  return fail(`daemon pid ${pid}: link ${state} since ${when}${lastError ? `: ${lastError}` : ''} (${why})`, fix);
}

export const clockCheck: Check = {
  name: 'clock',
  needs: ['runtime'],
  async run(ctx) {
    const rt = ctx.rt!;
    const v = await rt.checkTimeSync();
    ctx.verdict = v;
    const said = v.source === 'none' ? `${v.verdict}: ${v.detail}` : `${v.verdict} (${v.source}): ${v.detail}`;
    if (v.verdict === 'synced') return ok(said);
    // DESIGN §4: a clock that is not synced is fine while the issuer's Date header can stand in for it.
    const why = await rt.sampleServerTime().then(
      () => '',
      (err: unknown) => ` (${messageOf(err)})`,
    );
    if (rt.serverTime.now() === undefined) return fail(`${said}; and no server time can be had${why}`, NO_TIME_FIX);
    return ok(`${said}; the agent signs with ${issuerOf(rt)}'s time instead (±${Math.round(rt.serverTime.errorMs()!)} ms)`);
  },
};

export const dnsCheck: Check = {
  name: 'dns',
  needs: ['config'],
  async run(ctx) {
    const outcome = await checkDns(new URL(ctx.config!.baseUrl));
    if (outcome.status !== 'ok') ctx.reachable = false;
    return outcome;
  },
};

export const tcpCheck: Check = {
  name: 'tcp',
  needs: ['config', 'service'],
  async run(ctx, signal) {
    const outcome = await checkTcp(new URL(ctx.config!.baseUrl), signal, ctx.clock);
    ctx.reachable = outcome.status === 'ok';
    return outcome;
  },
};

export const tlsCheck: Check = {
  name: 'tls',
  needs: ['config', 'service'],
  run: (ctx, signal) => checkTls(new URL(ctx.config!.baseUrl), signal, ctx.clock),
};

export const serverTimeCheck: Check = {
  name: 'server time',
  needs: ['runtime', 'issuer'],
  async run(ctx) {
    const rt = ctx.rt!;
    try {
      await rt.sampleServerTime();
    } catch (err) {
      return cloudFailure(err);
    }
    const offset = rt.serverTime.offsetMs();
    const broker = rt.issuer.mode === 'broker';
    if (offset === undefined) {
      const where = broker ? 'brokerUrl points at the broker' : 'baseUrl points at the token service';
      return fail('no usable Date header in the answer', `check that ${where} (a proxy may drop Date)`);
    }
    const window = broker ? `; the broker takes requests within ±${BROKER_WINDOW_MS / 1000} s of its clock` : '';
    const said = `${issuerOf(rt)} clock is ${formatOffset(offset)} the local clock (±${Math.round(rt.serverTime.errorMs()!)} ms)${window}`;
    if (Math.abs(offset) <= MAX_WALL_DISAGREEMENT_MS) return ok(said);
    if (ctx.verdict?.verdict === 'synced') {
      return fail(
        `${said}, yet ${ctx.verdict.source} says the clock is synced`,
        'NTP follows a wrong time: check its servers (timedatectl timesync-status, chronyc sources); meanwhile the agent signs with the service time',
      );
    }
    return ok(`${said}; the clock is not synced, so the agent signs with ${issuerOf(rt)}'s time`);
  },
};

export const getTokenCheck: Check = {
  name: 'getToken',
  needs: ['runtime', 'issuer'],
  async run(ctx) {
    const rt = ctx.rt!;
    let identity: ResolvedIdentity;
    try {
      identity = resolveIdentity(rt);
    } catch (err) {
      return failWith(err, 'set botId, or vendorId and deviceId, in the config');
    }
    ctx.identity = identity;
    if (rt.issuer.mode === 'broker') {
      const cached = identity.kind === 'bot' ? rt.store.pairFor(storeIdentity(rt.config, { kind: 'bot', id: identity.id })) : undefined;
      return brokerTokenOutcome(ctx, identity, cached);
    }
    const at = chooseSigningTime(ctx.verdict ?? (await rt.checkTimeSync()), rt.serverTime, rt.clock);
    if (!at.ok) return fail(at.reason, NO_TIME_FIX);
    const who = `${identity.kind} ${identity.id}`;
    try {
      // Straight through the client: the token is not stored, so the daemon's cache stays as it was.
      const answer = await rt.issuer.api.getToken({ kind: identity.kind, id: identity.id }, at.ms);
      ctx.token = answer.accessToken;
      const signedWith = at.source === 'wall' ? 'the local clock' : "the service's time";
      const unprovisioned =
        identity.kind === 'vendor' ? `; no botId yet for device ${identity.deviceId}: the daemon registers it on start` : '';
      return ok(`${who}: token issued, valid ${answer.expireIn} s, signed with ${signedWith}${unprovisioned}`);
    } catch (err) {
      if (err instanceof CloudError && err.serviceCode !== undefined) {
        const info = describeCode(err.serviceCode);
        return fail(`${who}: refused with code ${err.serviceCode} (${info.msg})`, info.fix);
      }
      return cloudFailure(err, `${who}: `);
    }
  },
};

export const websocketCheck: Check = {
  name: 'websocket',
  needs: ['runtime'],
  async run(ctx, signal) {
    const config = ctx.config!;
    const daemon = await runningDaemon(ctx.rt!.store);
    if (daemon) return daemonLink(daemon.pid, readStatusFile(config.runtimeDir), config);
    if (ctx.reachable === false) return skip(UNMET.service(ctx)!);
    if (ctx.identity?.kind === 'vendor') return skip('no botId yet: run botlink provision, or start the daemon, which provisions itself');
    // Broker mode asks for no token (DESIGN §3.7): with none cached, the key's check above is all there is to pass.
    if (!ctx.token && ctx.identity?.kind === 'bot' && ctx.broker?.answer?.ok === true && ctx.broker.answer.checked.state === 'active') {
      return ok("not tested: no valid token cached here, and doctor asks the broker for none (the hourly tokens are the device's)");
    }
    if (!ctx.identity || !ctx.token) return skip('needs a token (see getToken)');
    return checkWsHandshake(config.wsUrl, ctx.identity.id, ctx.token, signal, ctx.clock);
  },
};
