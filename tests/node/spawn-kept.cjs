'use strict';
/**
 * A child process whose output is kept (its last `logLimit` characters) and which dies with
 * the test process: the cubequeue server of tests/node/helpers.cjs and the servers of
 * tests/node/cube-api/harness.cjs. No side effects on load.
 */

const { spawn } = require('child_process');

function spawnKept(cmd, args, options, logLimit) {
  const child = spawn(cmd, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const keep = (chunk) => {
    output += chunk.toString();
    if (output.length > logLimit) {
      output = output.slice(-logLimit);
    }
  };
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  // Never leave the child behind when the test process ends early.
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);
  let exited = null;
  const exitPromise = new Promise((resolve) => {
    child.once('exit', (code, signal) => {
      exited = { code, signal };
      process.removeListener('exit', killOnExit);
      resolve(exited);
    });
  });
  return {
    child,
    log: () => output,
    exited: () => exited,
    /** `signal`, then SIGKILL after 10 s; resolves to how the child exited. */
    async stop(signal = 'SIGTERM') {
      if (!exited) {
        child.kill(signal);
        const killTimer = setTimeout(() => child.kill('SIGKILL'), 10000);
        await exitPromise;
        clearTimeout(killTimer);
      }
      return exited;
    },
  };
}

module.exports = { spawnKept };
