// The floor of a relay: a WebSocket server on a Unix socket that, per app connection, opens one
// WebSocket to the cloud and pipes frames both ways unchanged, with `ws` and nothing else (no
// state, limits or protocol knowledge). relay.ts runs it as a process of its own, as the daemon runs.
// Env: SOCKET (path to listen on), WS_URL, BOT_ID, TOKEN. Prints "listening" once it accepts apps.
import { createServer } from 'node:http';
import WebSocket, { WebSocketServer } from 'ws';

function serve(env: NodeJS.ProcessEnv): void {
  const { SOCKET, WS_URL, BOT_ID, TOKEN } = env;
  if (!SOCKET || !WS_URL || !BOT_ID || !TOKEN) throw new Error('forwarder needs SOCKET, WS_URL, BOT_ID and TOKEN in its environment');
  const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false });
  const server = createServer();
  server.on('upgrade', (req, socket, head: Buffer) => {
    const url = new URL(WS_URL);
    url.searchParams.set('botId', BOT_ID);
    const cloud = new WebSocket(url, { headers: { Authorization: `Bearer ${TOKEN}` }, perMessageDeflate: false });
    cloud.on('error', () => socket.destroy());
    // The app is let in once the cloud is open: nothing to hold meanwhile.
    cloud.on('open', () =>
      wss.handleUpgrade(req, socket, head, (app) => {
        cloud.on('message', (data, isBinary) => app.send(data, { binary: isBinary }));
        app.on('message', (data, isBinary) => cloud.send(data, { binary: isBinary }));
        cloud.on('close', () => app.close());
        app.on('close', () => cloud.close());
        app.on('error', () => cloud.terminate());
      }),
    );
  });
  server.listen(SOCKET, () => console.log('listening'));
  process.on('SIGTERM', () => process.exit(0));
}

serve(process.env);
