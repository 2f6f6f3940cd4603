import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** What the scripted server does with one request; `res` is already given the request's parsed body. */
export type Script = (req: IncomingMessage, res: ServerResponse, body: string) => void;

/** One request as the scripted server received it. */
export interface ScriptedRequest {
  method: string;
  url: string;
  body: string;
  headers: IncomingMessage['headers'];
}

/** A plain node:http server on 127.0.0.1:0 whose answers a test scripts one by one. */
export async function startScriptedServer(script: Script): Promise<{ url: string; requests: ScriptedRequest[]; close(): Promise<void> }> {
  const requests: ScriptedRequest[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      requests.push({ method: req.method ?? '', url: req.url ?? '', body, headers: req.headers });
      script(req, res, body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export function json(res: ServerResponse, value: unknown, status = 200): void {
  const body = JSON.stringify(value);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

/**
 * Sends 200 and its headers at once, then one byte of a `totalBytes` body every `everyMs`: undici's
 * body timeout restarts on every byte, so only a total deadline ends the call. `sent.bytes` counts the body sent.
 */
export function trickleBody(everyMs: number, totalBytes: number, sent: { bytes: number }): Script {
  return (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(totalBytes) });
    res.flushHeaders();
    const timer = setInterval(() => {
      if (sent.bytes >= totalBytes) return clearInterval(timer);
      sent.bytes++;
      res.write(' ');
    }, everyMs);
    res.on('close', () => clearInterval(timer));
  };
}
