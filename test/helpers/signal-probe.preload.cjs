// Preloaded into a botlink command (NODE_OPTIONS=--require, see signal-probe.ts): as soon as the command
// has written a line holding SIGNAL_AT to stdout, the process sends itself SIGNAL, before the command's
// next statement runs, as the quickest reader of that line could. A command whose handler is in place
// before it announces itself handles it; one that installs it after the line dies of it (exit code null).
'use strict';
const fs = require('node:fs');

const marker = process.env.SIGNAL_AT;
const signal = process.env.SIGNAL || 'SIGTERM';
let raised = false;

function seen(chunk) {
  if (raised || !marker || !String(chunk).includes(marker)) return;
  raised = true;
  process.kill(process.pid, signal);
}

// process.stdout.write: serve's and watch's lines; fs.writeSync on fd 1: pino's, the demo's.
const write = process.stdout.write;
process.stdout.write = function (chunk, ...rest) {
  const done = write.call(this, chunk, ...rest);
  seen(chunk);
  return done;
};
const writeSync = fs.writeSync;
fs.writeSync = function (fd, data, ...rest) {
  const written = writeSync.call(this, fd, data, ...rest);
  if (fd === 1) seen(data);
  return written;
};
