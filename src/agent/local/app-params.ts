import type { ConnParams } from '../link/params.js';

/** The app's query parameters for the cloud connection (DESIGN §3.5): all of them but botId, which is the device's. */
export function appParams(requestUrl: string | undefined): ConnParams {
  const query = new URL(requestUrl ?? '/', 'http://botlink.invalid').searchParams;
  return [...query].filter(([name]) => name !== 'botId');
}
