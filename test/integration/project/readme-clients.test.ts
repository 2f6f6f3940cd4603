import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { type CliRun, exec } from '../../../scripts/lib/exec.js';
import { cleanEnv } from '../../../scripts/lib/env.js';
import { type Answer, guideCloud, REPLY } from '../../helpers/guide-cloud.js';
import { DAEMON_SEED, useHarness } from '../../helpers/harness.js';
import { relayRig } from '../../helpers/relay-rig.js';
import { requireTool } from '../../../scripts/lib/tools.js';

const root = fileURLToPath(new URL('../../..', import.meta.url));
const { cleanups, service, device, daemon } = useHarness();

/** The fenced block of README.md whose first lines name `file`: the client exactly as a reader copies it. */
function readmeBlock(lang: 'js', file: string): string {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  for (const [, fenceLang, body] of readme.matchAll(/^```(\w+)\n([\s\S]*?)^```$/gm)) {
    if (fenceLang === lang && body!.split('\n').slice(0, 2).join('\n').includes(`${file}:`)) return body!;
  }
  throw new Error(`README.md has no \`\`\`${lang} block naming ${file}: in its first lines`);
}

function run(cmd: string, args: string[]): Promise<CliRun> {
  return exec(cmd, args, { env: cleanEnv(), timeoutMs: 15_000 });
}

/** A daemon connected to the reference service; its local API's socket. */
async function connectedDaemon(): Promise<string> {
  const svc = await service(DAEMON_SEED);
  const d = device(svc);
  daemon(d);
  await d.waitForLink('connected');
  return join(d.runtimeDir, 'botlink.sock');
}

/** The README's Node client in a file, inside the checkout's node_modules so its `import WebSocket from 'ws'` resolves as in an app's own tree. */
function nodeClient(): string {
  const cache = join(root, 'node_modules', '.cache');
  mkdirSync(cache, { recursive: true });
  const dir = mkdtempSync(join(cache, 'readme-client-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'chat.mjs');
  writeFileSync(file, readmeBlock('js', 'chat.mjs'));
  return file;
}

/** The Python client the README links to, as a reader downloads it. */
function pythonClient(): string {
  return join(root, 'scripts', 'examples', 'chat.py');
}

/** A real link and relay on a Unix socket, before a cloud that sends exactly the guide's fixture frames. */
async function guideRelay(answer: Answer): Promise<string> {
  const cloud = await guideCloud();
  cloud.answer = answer;
  cleanups.push(() => cloud.close());
  const rig = await relayRig({ cloudUrl: cloud.url });
  cleanups.push(() => rig.close());
  rig.link.start();
  await rig.reaches('connected');
  return rig.sock;
}

describe('README\'s app clients against the guide\'s frames (greeting roundId "", AGENT content.content, PONG without content)', () => {
  const clients: [string, () => string[]][] = [
    ['Node', () => [process.execPath, nodeClient()]],
    ['Python', () => [requireTool('python3'), pythonClient()]],
  ];
  it.each(clients)('%s: a completed round prints content.content and exits 0', async (_name, client) => {
    const socket = await guideRelay('complete');
    const [cmd, file] = client();
    const out = await run(cmd!, [file!, socket, 'tell me a story']);
    expect(out.code, out.stderr).toBe(0);
    expect(out.stdout).toBe(`${REPLY}\n`);
  });

  it.each(clients)('%s: EMPTY_CONTENT, a cut and moderation each end at once with exit 1, saying so', async (_name, client) => {
    for (const [answer, says] of [
      ['empty', 'no reply (EMPTY_CONTENT)'],
      ['interrupted', 'the reply was cut: Hey! Hello there, '],
      ['audit-fail', 'no reply (USER_AUDIT_FAIL)'],
    ] as [Answer, string][]) {
      const socket = await guideRelay(answer);
      const [cmd, file] = client();
      const out = await run(cmd!, [file!, socket, 'hi']);
      expect(out.code, `${answer}: ${out.stderr}`).toBe(1);
      expect(out.stderr).toContain(says);
    }
  });
});

// These wait on the reference service speaking the guide's shapes (issue 17): AGENT content.content.
describe("README's app clients, run as they stand against a real daemon", () => {
  it('the Node client (ws over ws+unix://) prints the reply and exits 0', async () => {
    const socket = await connectedDaemon();
    const out = await run(process.execPath, [nodeClient(), socket, 'hello from node']);
    expect(out.code, out.stderr).toBe(0);
    expect(out.stdout).toBe('you said: hello from node\n');
    expect(out.stderr).toContain('link connected');
  });

  it('the Python client (standard library only) prints the reply and exits 0', async () => {
    const socket = await connectedDaemon();
    const out = await run(requireTool('python3'), [pythonClient(), socket, 'hello from python']);
    expect(out.code, out.stderr).toBe(0);
    expect(out.stdout).toBe('you said: hello from python\n');
    expect(out.stderr).toContain('link connected');
  });
});
