import { lookup } from 'node:dns/promises';
import type { IncomingMessage } from 'node:http';
import { connect as tcpConnect, isIP, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import WebSocket from 'ws';
import { WS_FAILURE_FIXES, WsMessage, type WsFailure } from '../protocol/codes.js';
import { messageOf } from '../protocol/errors.js';
import { parseWsFailure } from '../protocol/wire.js';
import { NETWORK_FIX } from '../cloud/network.js';
import type { Clock } from '../clock.js';
import type { Outcome } from './check.js';

/** A refusal may follow an accepted handshake as a text frame or a close reason: wait this long for one. */
const WS_GRACE_MS = 250;
const MAX_ERROR_BODY = 4096;

/** The host (brackets stripped from IPv6) and port a URL connects to. */
export function endpointOf(url: URL): { host: string; port: number } {
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  const port = url.port ? Number(url.port) : url.protocol === 'https:' || url.protocol === 'wss:' ? 443 : 80;
  return { host, port };
}

function errorCode(err: unknown): string {
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' ? code : messageOf(err);
}

export async function checkDns(url: URL): Promise<Outcome> {
  const { host } = endpointOf(url);
  if (isIP(host)) return { status: 'ok', detail: `${host} (IP address)` };
  try {
    const addresses = await lookup(host, { all: true });
    return { status: 'ok', detail: `${host} → ${addresses.map((a) => a.address).join(', ')}` };
  } catch (err) {
    const code = errorCode(err);
    const fix =
      code === 'ENOTFOUND'
        ? `the name does not exist: check the host in baseUrl (${host})`
        : 'no DNS answer: check the network and the name servers in /etc/resolv.conf';
    return { status: 'fail', detail: `${host}: ${code}`, fix };
  }
}

/** Settles once with the first outcome; the socket is destroyed and the abort listener removed. */
function settleOnce(socket: Socket, signal: AbortSignal, onTimeout: () => Outcome, resolve: (o: Outcome) => void) {
  const finish = (outcome: Outcome) => {
    signal.removeEventListener('abort', onAbort);
    socket.destroy();
    resolve(outcome);
  };
  const onAbort = () => finish(onTimeout());
  signal.addEventListener('abort', onAbort, { once: true });
  return finish;
}

function tcpFix(code: string, where: string): string {
  switch (code) {
    case 'ECONNREFUSED':
      return `nothing accepts connections at ${where}: check the port in baseUrl and that the service runs`;
    case 'ENETUNREACH':
    case 'EHOSTUNREACH':
      return 'no route to the service: check the network link and the default gateway';
    default:
      return NETWORK_FIX;
  }
}

export function checkTcp(url: URL, signal: AbortSignal, clock: Clock): Promise<Outcome> {
  const { host, port } = endpointOf(url);
  const where = `${host}:${port}`;
  const started = clock.monoNow();
  return new Promise((resolve) => {
    const socket = tcpConnect({ host, port });
    const finish = settleOnce(
      socket,
      signal,
      () => ({ status: 'fail', detail: `${where}: no answer (timed out)`, fix: NETWORK_FIX }),
      resolve,
    );
    socket.once('connect', () => {
      const ms = Math.round(clock.monoNow() - started);
      finish({ status: 'ok', detail: `${where} (${socket.remoteAddress}) connected in ${ms} ms` });
    });
    socket.once('error', (err) => {
      const code = errorCode(err);
      finish({ status: 'fail', detail: `${where}: ${code}`, fix: tcpFix(code, where) });
    });
  });
}

function tlsFix(code: string, host: string): string {
  switch (code) {
    case 'CERT_HAS_EXPIRED':
    case 'CERT_NOT_YET_VALID':
      return 'if the device clock is wrong (see clock), fix it; otherwise the service certificate is out of date: tell the service operator';
    case 'ERR_TLS_CERT_ALTNAME_INVALID':
      return `the certificate is not issued for ${host}: check the host in baseUrl`;
    case 'UNABLE_TO_VERIFY_LEAF_SIGNATURE':
    case 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY':
    case 'SELF_SIGNED_CERT_IN_CHAIN':
    case 'DEPTH_ZERO_SELF_SIGNED_CERT':
      return (
        'the certificate chain is not trusted: a proxy may intercept TLS, or CA certificates are missing ' +
        '(install ca-certificates, or name the CA with NODE_EXTRA_CA_CERTS)'
      );
    default:
      return `check that baseUrl points at the token service over https; ${NETWORK_FIX}`;
  }
}

const DAY_MS = 86_400_000;

/** A TLS handshake that verifies the certificate for the host, as the agent's client does. */
export function checkTls(url: URL, signal: AbortSignal, clock: Clock): Promise<Outcome> {
  if (url.protocol !== 'https:') return Promise.resolve({ status: 'ok', detail: 'plain http on loopback' });
  const { host, port } = endpointOf(url);
  return new Promise((resolve) => {
    const socket = tlsConnect({ host, port, ...(!isIP(host) && { servername: host }) });
    const finish = settleOnce(
      socket,
      signal,
      () => ({ status: 'fail', detail: `${host}:${port}: no TLS handshake (timed out)`, fix: NETWORK_FIX }),
      resolve,
    );
    socket.once('secureConnect', () => {
      const cert = socket.getPeerCertificate();
      const until = Date.parse(cert.valid_to);
      const days = Math.floor((until - clock.wallNow()) / DAY_MS);
      const subject = cert.subject?.CN ?? host;
      finish({
        status: 'ok',
        detail: `${socket.getProtocol() ?? 'TLS'}, certificate for ${subject} valid until ${cert.valid_to} (${days} days left)`,
      });
    });
    socket.once('error', (err) => {
      const code = errorCode(err);
      finish({ status: 'fail', detail: `${host}:${port}: ${code}`, fix: tlsFix(code, host) });
    });
  });
}

function refused(failure: WsFailure): Outcome {
  return { status: 'fail', detail: `refused: ${failure}`, fix: WS_FAILURE_FIXES[failure] };
}

/**
 * Opens `wsUrl?botId=…` with the token, waits briefly for a refusal that rides after the handshake,
 * then closes with 1000. Only call this when no daemon runs: a second socket would displace its own.
 */
export function checkWsHandshake(wsUrl: string, botId: string, token: string, signal: AbortSignal, clock: Clock): Promise<Outcome> {
  const url = new URL(wsUrl);
  url.searchParams.set('botId', botId);
  const started = clock.monoNow();
  return new Promise((resolve) => {
    const ws = new WebSocket(url, { headers: { Authorization: `Bearer ${token}` }, perMessageDeflate: false, followRedirects: false });
    let accepted: Outcome | undefined;
    let grace: NodeJS.Timeout | undefined;
    let settled = false;
    const finish = (outcome: Outcome) => {
      if (settled) return;
      settled = true;
      clearTimeout(grace);
      signal.removeEventListener('abort', onAbort);
      ws.terminate();
      resolve(outcome);
    };
    const onAbort = () => {
      if (accepted) finish(accepted);
      else finish({ status: 'fail', detail: `${wsUrl}: no handshake (timed out)`, fix: NETWORK_FIX });
    };
    signal.addEventListener('abort', onAbort, { once: true });
    ws.on('unexpected-response', (_req, res: IncomingMessage) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        if (body.length < MAX_ERROR_BODY) body += chunk;
      });
      res.on('end', () => {
        const failure = parseWsFailure(body) ?? (res.statusCode === 401 ? WsMessage.UNAUTHORIZED : undefined);
        finish(
          failure
            ? refused(failure)
            : {
                status: 'fail',
                detail: `handshake refused with HTTP ${res.statusCode}`,
                fix: 'check that wsUrl points at the service WebSocket endpoint',
              },
        );
      });
      res.on('error', () => finish({ status: 'fail', detail: 'handshake answer broken off', fix: NETWORK_FIX }));
    });
    ws.on('open', () => {
      const ms = Math.round(clock.monoNow() - started);
      grace = setTimeout(() => {
        accepted = { status: 'ok', detail: `${wsUrl} accepted bot ${botId} in ${ms} ms; closed with 1000` };
        ws.close(1000);
      }, WS_GRACE_MS);
    });
    ws.on('message', (data, isBinary) => {
      const failure = isBinary ? undefined : parseWsFailure(data.toString());
      if (failure) finish(refused(failure));
    });
    ws.on('close', (code, reason) => {
      const failure = parseWsFailure(reason.toString('utf8'));
      if (failure) finish(refused(failure));
      else if (accepted) finish(accepted);
      else
        finish({
          status: 'fail',
          detail: `closed by the service right after the handshake (${code}${reason.length ? ` ${reason.toString('utf8')}` : ''})`,
          fix: 'run botlink doctor again; if it persists, ask the service operator',
        });
    });
    ws.on('error', (err) => finish({ status: 'fail', detail: `${wsUrl}: ${errorCode(err)}`, fix: `check wsUrl; ${NETWORK_FIX}` }));
  });
}
