'use strict';

/*
 * Test-only processes for the Cube API test: cubequeue (the real server, on free loopback
 * ports) and a throwaway PostgreSQL cluster (Debian's `postgresql`, in a temp dir, on a
 * free loopback port, with pg_stat_statements so the test can count how often Cube's data
 * SQL really ran). Both are killed when the test process exits.
 */

const { execFileSync } = require('child_process');
const fs = require('fs');
const http = require('http');
const net = require('net');
const os = require('os');
const path = require('path');

const { spawnKept: spawnKeptWithLimit } = require('../spawn-kept.cjs');

const ROOT = path.resolve(__dirname, '..', '..', '..');
const PYTHON = path.join(ROOT, '.venv', 'bin', 'python');
const START_TIMEOUT_MS = 60000;
const LOG_LIMIT = 256 * 1024;

const sleep = (ms) => new Promise((resolve) => { setTimeout(resolve, ms); });

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

function spawnKept(cmd, args, options) {
  return spawnKeptWithLimit(cmd, args, options, LOG_LIMIT);
}

async function waitFor(what, proc, probe) {
  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    if (proc.exited()) {
      throw new Error(`${what} exited (${JSON.stringify(proc.exited())}):\n${proc.log()}`);
    }
    try {
      if (await probe()) {
        return;
      }
    } catch (e) {
      // not up yet
    }
    if (Date.now() > deadline) {
      await proc.stop();
      throw new Error(`${what} did not start within ${START_TIMEOUT_MS} ms:\n${proc.log()}`);
    }
    await sleep(100);
  }
}

function httpStatus(port, urlPath) {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path: urlPath, timeout: 1000 }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
  });
}

/** cubequeue as `python -m cubequeue.server` on free ports, with `extraArgs`. */
async function startCubequeue(extraArgs = []) {
  if (!fs.existsSync(PYTHON)) {
    throw new Error(`${PYTHON} not found: run \`make install\` in ${ROOT} first`);
  }
  const port = await freePort();
  const httpPort = await freePort();
  const env = Object.fromEntries(Object.entries(process.env)
    .filter(([k]) => !k.startsWith('CUBEQUEUE_') && !k.startsWith('CUBESTORE_')));
  const proc = spawnKept(PYTHON, [
    '-m', 'cubequeue.server', '--host', '127.0.0.1', '--port', String(port),
    '--http-port', String(httpPort), '--log-level', 'info', ...extraArgs,
  ], { cwd: ROOT, env });
  await waitFor('cubequeue', proc, async () => (await httpStatus(httpPort, '/healthz')) === 200);
  return { ...proc, host: '127.0.0.1', port, httpPort };
}

function pgBinDir() {
  const base = '/usr/lib/postgresql';
  const versions = fs.existsSync(base) ? fs.readdirSync(base).sort((a, b) => Number(b) - Number(a)) : [];
  for (const v of versions) {
    const dir = path.join(base, v, 'bin');
    if (fs.existsSync(path.join(dir, 'initdb'))) {
      return dir;
    }
  }
  throw new Error('PostgreSQL server binaries not found under /usr/lib/postgresql: '
    + 'install Debian\'s `postgresql` (make system-deps does)');
}

/** PostgreSQL refuses to run as root: as root, the cluster belongs to the `postgres` user. */
function runAs() {
  if (process.getuid() !== 0) {
    return {};
  }
  const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
  const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim());
  return { uid, gid };
}

/** A fresh cluster in a temp dir, listening on 127.0.0.1 only, trust auth for `cube`. */
async function startPostgres() {
  const bin = pgBinDir();
  const owner = runAs();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cubequeue-cube-api-pg-'));
  if (owner.uid !== undefined) {
    fs.chownSync(dir, owner.uid, owner.gid);
  }
  const data = path.join(dir, 'data');
  execFileSync(path.join(bin, 'initdb'), ['-D', data, '-U', 'cube', '--auth=trust', '-E', 'UTF8',
    '--no-sync', '--no-instructions'], { ...owner, stdio: 'pipe' });
  const port = await freePort();
  const proc = spawnKept(path.join(bin, 'postgres'), [
    '-D', data, '-p', String(port), '-k', dir, '-c', 'listen_addresses=127.0.0.1',
    '-c', 'shared_preload_libraries=pg_stat_statements', '-c', 'fsync=off',
    '-c', 'pg_stat_statements.track=all',
  ], { ...owner });
  const { Client } = require('pg');
  const config = { host: '127.0.0.1', port, user: 'cube', database: 'postgres' };
  await waitFor('postgres', proc, async () => {
    const c = new Client(config);
    await c.connect();
    await c.end();
    return true;
  });
  const query = async (sql, values = []) => {
    const c = new Client(config);
    await c.connect();
    try {
      return (await c.query(sql, values)).rows;
    } finally {
      await c.end();
    }
  };
  return {
    ...proc,
    host: '127.0.0.1',
    port,
    user: 'cube',
    database: 'postgres',
    query,
    async stop() {
      // fast shutdown: Cube 0.35 keeps a pooled client open after releaseConnections(), so
      // its pool logs one "terminating connection" line; a smart shutdown would wait for it
      await proc.stop('SIGINT');
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

module.exports = { ROOT, freePort, sleep, startCubequeue, startPostgres };
