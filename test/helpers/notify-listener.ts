import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { requireTool } from '../../scripts/lib/tools.js';
import type { Harness } from './harness.js';
import { waitFor } from './wait-for.js';

const LISTENER = `
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
print("LISTENING", flush=True)
while True:
    data = s.recv(4096)
    print(data.decode().replace("\\n", " | "), flush=True)
`;

/**
 * systemd's notify socket, stood in for by python3 (node has no unix datagram sockets): bound at
 * `<dir>/notify.sock`, each datagram one line of received() with its own lines joined by " | ";
 * resolves once it is bound, and is killed after the test.
 */
export async function notifyListener(dir: string, cleanups: Harness['cleanups']): Promise<{ path: string; received: () => string }> {
  const path = join(dir, 'notify.sock');
  const listener = spawn(requireTool('python3'), ['-u', '-c', LISTENER, path], { stdio: ['ignore', 'pipe', 'inherit'] });
  cleanups.push(() => void listener.kill('SIGKILL'));
  let received = '';
  listener.stdout.on('data', (b: Buffer) => (received += b.toString()));
  await waitFor(() => received.includes('LISTENING'), 15_000, 'the notify socket listener');
  return { path, received: () => received };
}
