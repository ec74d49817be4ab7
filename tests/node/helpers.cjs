'use strict';

/*
 * Test-only helpers for the tests that run Cube's own npm packages against cubequeue:
 * start the real server as a child process on free ports, point Cube's CubeStoreDriver at
 * it, record what the driver sends, and move the server's test clock.
 *
 * Requiring this module also installs the TEST-ONLY stand-in for
 * `@cubejs-backend/native`'s parseCubestoreResultMessage (see native-standin.cjs); it has
 * to be loaded before the driver, so every test file requires this module first.
 */

const standIn = require('./native-standin.cjs');

const { spawnKept } = require('./spawn-kept.cjs');
const fs = require('fs');
const http = require('http');
const net = require('net');
const path = require('path');

const ROOT = path.resolve(__dirname, '..', '..');
const PYTHON = path.join(ROOT, '.venv', 'bin', 'python');
const START_TIMEOUT_MS = 30000;
const LOG_LIMIT = 64 * 1024;

/** A free loopback port: bind port 0, read it back, release it. */
function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

function httpGet(port, urlPath) {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path: urlPath, timeout: 1000 }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
  });
}

const sleep = (ms) => new Promise((resolve) => { setTimeout(resolve, ms); });

/**
 * Starts `python -m cubequeue.server --port P --http-port H --test-clock` on free ports
 * and waits until GET /healthz answers 200. The server's output is kept (the last 64 KiB)
 * for failure messages.
 */
async function startServer(extraArgs = []) {
  if (!fs.existsSync(PYTHON)) {
    throw new Error(`${PYTHON} not found: run \`make install\` in ${ROOT} first`);
  }
  const port = await freePort();
  const httpPort = await freePort();
  const env = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!k.startsWith('CUBEQUEUE_') && !k.startsWith('CUBESTORE_')) {
      env[k] = v;
    }
  }
  const args = [
    '-m', 'cubequeue.server',
    '--host', '127.0.0.1', '--port', String(port), '--http-port', String(httpPort),
    '--test-clock', ...extraArgs,
    // extra server flags for a manual run, e.g. CUBEQUEUE_NODE_SERVER_ARGS='--cubestore-version 1.6.0'
    ...(process.env.CUBEQUEUE_NODE_SERVER_ARGS || '').split(/\s+/).filter(Boolean),
  ];
  const proc = spawnKept(PYTHON, args, { cwd: ROOT, env }, LOG_LIMIT);

  const server = {
    host: '127.0.0.1',
    port,
    httpPort,
    child: proc.child,
    log: proc.log,
    stop: () => proc.stop(),
  };

  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    if (proc.exited()) {
      throw new Error(`cubequeue exited (${JSON.stringify(proc.exited())}) before serving:\n${proc.log()}`);
    }
    try {
      if (await httpGet(httpPort, '/healthz') === 200) {
        return server;
      }
    } catch (e) {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await server.stop();
      throw new Error(`cubequeue did not answer /healthz within ${START_TIMEOUT_MS} ms:\n${proc.log()}`);
    }
    await sleep(100);
  }
}

/**
 * Points Cube's driver at the server the way Cube's integration tests do: through
 * CUBEJS_CUBESTORE_HOST/PORT, with a plain `new CubeStoreDriver({})`.
 */
function useServerEnv(server) {
  process.env.CUBEJS_CUBESTORE_HOST = server.host;
  process.env.CUBEJS_CUBESTORE_PORT = String(server.httpPort);
}

/** `SYS CLOCK ADVANCE <ms>` through the driver: moves the server's clock, not ours. */
async function advanceServerClock(driver, ms) {
  const rows = await driver.query(`SYS CLOCK ADVANCE ${Math.trunc(ms)}`, []);
  return rows.length ? { ...rows[0] } : null;
}

/**
 * A logger that records every call like Cube's `jest.fn` logger. Set CUBEQUEUE_NODE_DEBUG=1
 * to also print the calls.
 */
function recordingLogger() {
  const calls = [];
  const logger = (message, event) => {
    calls.push([message, event]);
    if (process.env.CUBEQUEUE_NODE_DEBUG) {
      console.log(`${new Date().toISOString()} ${message} ${JSON.stringify(event)}`);
    }
  };
  logger.calls = calls;
  logger.messages = () => calls.map(([message]) => message);
  logger.clear = () => { calls.length = 0; };
  return logger;
}

/**
 * The SQL texts (with their `?` placeholders, before the driver inlines or sends the
 * values) of the calls recorded by `t.mock.method(CubeStoreDriver.prototype, 'query')`.
 */
function sqlOf(queryMock) {
  return queryMock.mock.calls.map((call) => call.arguments[0]);
}

/** The recorded calls as `{ sql, values }`. */
function callsOf(queryMock) {
  return queryMock.mock.calls.map((call) => ({ sql: call.arguments[0], values: call.arguments[1] || [] }));
}

/** Wrap a test body so a failure carries the tail of the server's output. */
function withServerLog(getServer) {
  return (fn) => async (t) => {
    try {
      await fn(t);
    } catch (e) {
      const server = getServer();
      if (server) {
        e.message += `\n--- cubequeue output (tail) ---\n${server.log().slice(-4000)}`;
      }
      throw e;
    }
  };
}

module.exports = {
  standIn,
  withServerLog,
  ROOT,
  freePort,
  startServer,
  useServerEnv,
  advanceServerClock,
  recordingLogger,
  sqlOf,
  callsOf,
  sleep,
};
