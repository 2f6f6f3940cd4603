// Preloaded into `botlink run` (NODE_OPTIONS=--require, see daemon-modules.test.ts): on SIGUSR2 the
// process writes which of Node's own modules it has loaded so far, and which files it required, to
// MODULE_PROBE_FILE (written aside and renamed, so a watcher sees it whole).
'use strict';
const fs = require('node:fs');

process.on('SIGUSR2', () => {
  const out = process.env.MODULE_PROBE_FILE;
  const report = {
    builtins: process.moduleLoadList.filter((m) => m.startsWith('NativeModule ')).map((m) => m.slice('NativeModule '.length)),
    files: Object.keys(require.cache),
  };
  fs.writeFileSync(`${out}.tmp`, JSON.stringify(report));
  fs.renameSync(`${out}.tmp`, out);
});
