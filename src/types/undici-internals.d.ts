// The two undici modules the cloud client loads directly (see src/cloud/http.ts).
declare module 'undici/lib/dispatcher/pool.js' {
  import type { Pool } from 'undici';
  const PoolClass: typeof Pool;
  export = PoolClass;
}

declare module 'undici/lib/api/api-request.js' {
  import type { Dispatcher } from 'undici';
  function request(this: Dispatcher, opts: Dispatcher.RequestOptions): Promise<Dispatcher.ResponseData>;
  export = request;
}
