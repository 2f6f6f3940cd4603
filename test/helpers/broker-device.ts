/** A device as the broker sees it (DESIGN §3.7): its own Ed25519 key, and requests signed with it. */
import { generateKeyPairSync, type KeyObject, randomBytes } from 'node:crypto';
import { Agent } from 'undici';
import { expect } from 'vitest';
import { keyIdOf, rawPublicKeyOf, signRequest, signRotateProof } from '../../src/protocol/device-sig.js';

export interface BrokerReply {
  status: number;
  json: Record<string, unknown>;
  headers: Headers;
}

export interface SendOptions {
  /** ts to sign with; default now. */
  ts?: number;
  nonce?: string;
  /** The exact body bytes; default JSON of `body`. */
  raw?: string;
  /** Replaces the Authorization header (a malformed one, say). */
  authorization?: string;
  contentType?: string;
  /** Signs for another path than the one sent to. */
  signedPath?: string;
  query?: string;
  /** Sends from this local address (127.0.0.0/8 on loopback), as another source. */
  from?: string;
}

/** One agent per local address the tests send from. */
const agents = new Map<string, Agent>();
function agentFrom(address: string): Agent {
  let agent = agents.get(address);
  if (!agent) {
    // At most the broker's connectionsPerSource (32): undici may otherwise open one more while the last is released.
    agent = new Agent({ localAddress: address, connections: 32 });
    agents.set(address, agent);
  }
  return agent;
}

export class TestDevice {
  readonly key: KeyObject;
  readonly publicKey: string;
  readonly keyId: string;

  constructor(key?: KeyObject) {
    this.key = key ?? generateKeyPairSync('ed25519').privateKey;
    const raw = rawPublicKeyOf(this.key);
    this.publicKey = raw.toString('base64url');
    this.keyId = keyIdOf(raw);
  }

  async send(baseUrl: string, path: string, body: unknown, o: SendOptions = {}): Promise<BrokerReply> {
    const raw = o.raw ?? JSON.stringify(body);
    const ts = String(Math.round(o.ts ?? Date.now()));
    const nonce = o.nonce ?? randomBytes(18).toString('base64url');
    const authorization =
      o.authorization ?? signRequest(this.key, { method: 'POST', path: o.signedPath ?? path, keyId: this.keyId, ts, nonce, body: raw });
    const res = await fetch(`${baseUrl}${path}${o.query ?? ''}`, {
      method: 'POST',
      headers: { 'content-type': o.contentType ?? 'application/json', authorization },
      body: raw,
      ...(o.from !== undefined && { dispatcher: agentFrom(o.from) }),
    } as unknown as RequestInit);
    const text = await res.text();
    return { status: res.status, json: JSON.parse(text) as Record<string, unknown>, headers: res.headers };
  }

  enroll(baseUrl: string, fields: Record<string, unknown>, o?: SendOptions): Promise<BrokerReply> {
    return this.send(baseUrl, '/v1/enroll', { publicKey: this.publicKey, ...fields }, o);
  }

  /** Enrolls, failing the test unless the broker admits the key: the botId it is bound to. */
  async mustEnroll(baseUrl: string, fields: Record<string, unknown>): Promise<string> {
    const reply = await this.enroll(baseUrl, fields);
    expect(reply.status, JSON.stringify(reply.json)).toBe(200);
    return reply.json['botId'] as string;
  }

  token(baseUrl: string, body: Record<string, unknown> = {}, o?: SendOptions): Promise<BrokerReply> {
    return this.send(baseUrl, '/v1/token', body, o);
  }

  /** Rotates to `next`, proving possession of it over this key's keyId and the request's ts. */
  rotate(baseUrl: string, next: TestDevice, o: SendOptions = {}): Promise<BrokerReply> {
    const ts = Math.round(o.ts ?? Date.now());
    const proof = signRotateProof(next.key, this.keyId, String(ts));
    return this.send(baseUrl, '/v1/rotate', { publicKey: next.publicKey, proof }, { ...o, ts });
  }
}
