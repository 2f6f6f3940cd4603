// ws 8.23 takes `closeTimeout` (how long a closing handshake may take; default 30 s); @types/ws 8.18 lacks it.
import 'ws';

declare module 'ws' {
  namespace WebSocket {
    interface ClientOptions {
      closeTimeout?: number | undefined;
    }
  }
}
