'use strict';

/*
 * A real Cube API of the 1.7 line against cubequeue: an unmodified `@cubejs-backend/server`
 * 1.7.43 with `@cubejs-backend/postgres-driver` 1.7.43, keeping its cache and queue in
 * cubequeue over Cube Store's WebSocket protocol (CUBEJS_CACHE_AND_QUEUE_DRIVER=cubestore,
 * CUBEJS_CUBESTORE_HOST/PORT), over a PostgreSQL data source started here (Debian's
 * postgresql, temp dir, free loopback port) and the one-cube model in ./model. The servers
 * are started by the 0.35 test's harness (../cube-api/harness.cjs, whose node-postgres
 * comes from that folder's node_modules; `make node-deps` installs both). Each test file
 * runs these scenarios over one kind of cubequeue store: durable (--data-dir) or
 * PostgreSQL (--store postgresql://…, a second database of the same throwaway cluster).
 *
 * Stood in (native-standin.cjs): exactly the @cubejs-backend/native functions this path
 * reaches, whose binary cannot be installed here. Switched off by configuration: the
 * Tesseract planner (CUBEJS_TESSERACT_SQL_PLANNER=false) and the SQL API
 * (CUBEJS_PG_SQL_PORT=false, no CUBEJS_SQL_PORT). Everything between the API gateway and
 * cubequeue is Cube's own code.
 *
 * Shown, first as Cube runs by default and then again by a second API server with
 * CUBEJS_QUEUE_FAST_TRACK=true: the first /load goes through cubequeue's queue
 * (system.queue_log has the item) and the second is a cache hit (the data SQL ran once in
 * PostgreSQL, per pg_stat_statements); concurrent identical requests run the data query
 * once; after a row is added and the refresh interval passes, /load answers the new data
 * (the refresh key's SQL, in Cube Store's dialect, is answered from cubequeue's clock,
 * which this test freezes with --test-clock and SYS CLOCK FREEZE and moves with SYS CLOCK
 * ADVANCE; then it waits for real, polling, for Cube's renewal timers, which run on
 * Node's clock); Cube never logs "Error while querying". A time dimension with a
 * granularity comes back in the default, compact and multi-query responses. With the fast
 * track, Cube logs every interactive query's "Added to queue" as fastTrack, cubequeue's
 * /metrics count as many QUEUE ADD_AND_RETRIEVE, and, while a slot was free (it always is
 * here) and nothing was renewed in the background, no QUEUE ADD and no QUEUE RETRIEVE.
 */

const standIn = require('./native-standin.cjs'); // before any Cube package

const assert = require('node:assert/strict');
const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');
const { after, before, test } = require('node:test');

const { freePort, sleep, startCubequeue, startPostgres } = require('../cube-api/harness.cjs');

const SECRET = 'cubequeue-cube-api-17-test-secret';
const MODEL_DIR = path.join(__dirname, 'model');
const DEADLINE_MS = 45000;
const REFRESH_EVERY_MS = 2000; // the model's refreshKey.every
const STORE_DATABASE = 'cubequeue_store';
const INTERACTIVE_PRIORITY = 10; // QueuePriority.Interactive of @cubejs-backend/base-driver

const COUNT_QUERY = { measures: ['orders.count'] };
const BY_DAY_QUERY = {
  measures: ['orders.count', 'orders.amount'],
  dimensions: ['orders.status'],
  timeDimensions: [{ dimension: 'orders.created_at', granularity: 'day' }],
  order: { 'orders.created_at': 'asc', 'orders.status': 'asc' },
};
// The seed's rows by day: Cube's own formatting of a `time` member and of numbers (text).
const BY_DAY_ROWS = [
  ['new', '2026-01-01T00:00:00.000', '1', '10'],
  ['new', '2026-01-02T00:00:00.000', '1', '20'],
  ['shipped', '2026-01-02T00:00:00.000', '1', '30'],
];

let cubequeue;
let postgres;
let dataDir;
let cube = null;
let cubePort;
let cubeLog = [];

function token() {
  const jwt = require('jsonwebtoken');
  return jwt.sign({}, SECRET, { expiresIn: '1h' });
}

async function load(query, params = '') {
  const url = `http://127.0.0.1:${cubePort}/cubejs-api/v1/load?query=${encodeURIComponent(JSON.stringify(query))}${params}`;
  for (;;) {
    const res = await fetch(url, { headers: { Authorization: token() } });
    const body = await res.json();
    if (res.status === 200 && body.error === 'Continue wait') {
      continue;
    }
    assert.equal(res.status, 200, JSON.stringify(body));
    return body;
  }
}

async function cubequeueRows(sql) {
  const { Client } = require('pg');
  const c = new Client({ host: cubequeue.host, port: cubequeue.port, user: 'cube', database: 'cube' });
  await c.connect();
  try {
    return (await c.query(sql)).rows;
  } finally {
    await c.end();
  }
}

/** Until a dialect statement is served (a PostgreSQL store attaches after /healthz is up). */
async function waitServing() {
  const deadline = Date.now() + DEADLINE_MS;
  for (;;) {
    try {
      await cubequeueRows("CACHE GET 'readiness:probe'");
      return;
    } catch (e) {
      if (Date.now() > deadline) {
        throw new Error(`cubequeue never served: ${e.message}\n${cubequeue.log()}`);
      }
      await sleep(100);
    }
  }
}

/**
 * GET /metrics on a connection of its own (no keep-alive): cubequeue's HTTP port closes the
 * connection after each plain HTTP response without saying `Connection: close`, so a
 * reused connection (fetch's default) can fail with "other side closed".
 */
function scrapeMetrics() {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: cubequeue.host, port: cubequeue.httpPort, path: '/metrics',
      agent: false, timeout: 10000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => { body += chunk; });
      res.on('end', () => (res.statusCode === 200 ? resolve(body)
        : reject(new Error(`GET /metrics: ${res.statusCode} ${body}`))));
    });
    req.on('timeout', () => req.destroy(new Error('GET /metrics timed out')));
    req.on('error', reject);
  });
}

/** cubequeue_commands_total by command, outcome "ok" only; the others are failures. */
async function commandCounts() {
  const text = await scrapeMetrics();
  const ok = {};
  const failed = [];
  for (const line of text.split('\n')) {
    const m = /^cubequeue_commands_total\{command="([^"]*)",outcome="([^"]*)"\} (\S+)$/.exec(line);
    if (m && m[2] === 'ok') {
      ok[m[1]] = Number(m[3]);
    } else if (m) {
      failed.push(line);
    }
  }
  return { ok, failed };
}

const delta = (now, then, command) => (now.ok[command] || 0) - (then.ok[command] || 0);

/** Forget what PostgreSQL counted so far (pg_stat_statements), so a scenario counts its own. */
async function resetDataQueryCalls() {
  await postgres.query('SELECT pg_stat_statements_reset()');
}

/** How often PostgreSQL ran one of Cube's data queries (on the model's table) since the reset. */
async function dataQueryCalls() {
  const rows = await postgres.query(
    `SELECT coalesce(sum(s.calls), 0)::int AS calls
       FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
      WHERE d.datname = $1 AND s.query LIKE '%FROM%public.orders AS "orders"%'`,
    [postgres.database],
  );
  return rows[0].calls;
}

/** Query errors Cube logged, and any native call that was neither stood in nor switched off. */
function errorsInCubeLog() {
  return cubeLog.filter(([msg, params]) => /Error while querying|Error querying db/.test(msg)
    || /Unable to load @cubejs-backend\/native|test stand-in for @cubejs-backend\/native/
      .test(JSON.stringify(params ?? null)));
}

function failWithLogs(e) {
  const tail = cubeLog.slice(-40).map(([m, p]) => `${m} ${JSON.stringify(p).slice(0, 400)}`).join('\n');
  e.message += `\n--- Cube log (tail) ---\n${tail}\n--- cubequeue (tail) ---\n${cubequeue.log().slice(-4000)}`;
  throw e;
}

/** A scenario whose failure shows the logs of both servers. */
function scenario(name, body) {
  test(name, async () => {
    try {
      await body();
    } catch (e) {
      failWithLogs(e);
    }
  });
}

/** A Cube API server (a new one for each phase), its cache and queue in cubequeue. */
async function startCube({ fastTrack }) {
  cubePort = await freePort();
  cubeLog = [];
  Object.assign(process.env, {
    PORT: String(cubePort),
    NODE_ENV: 'production',
    CUBEJS_DEV_MODE: 'false',
    CUBEJS_TELEMETRY: 'false',
    CUBEJS_API_SECRET: SECRET,
    CUBEJS_DB_TYPE: 'postgres',
    CUBEJS_DB_HOST: postgres.host,
    CUBEJS_DB_PORT: String(postgres.port),
    CUBEJS_DB_NAME: postgres.database,
    CUBEJS_DB_USER: postgres.user,
    CUBEJS_DB_PASS: '',
    CUBEJS_CACHE_AND_QUEUE_DRIVER: 'cubestore',
    CUBEJS_CUBESTORE_HOST: cubequeue.host,
    CUBEJS_CUBESTORE_PORT: String(cubequeue.httpPort),
    CUBEJS_SCHEMA_PATH: path.relative(process.cwd(), MODEL_DIR) || '.',
    // what the native stand-in does not cover is switched off
    CUBEJS_TESSERACT_SQL_PLANNER: 'false',
    CUBEJS_PG_SQL_PORT: 'false',
    CUBEJS_QUEUE_FAST_TRACK: String(fastTrack),
  });
  delete process.env.CUBEJS_SQL_PORT;
  const { CubejsServer } = require('@cubejs-backend/server');
  cube = new CubejsServer({
    schemaPath: path.relative(process.cwd(), MODEL_DIR),
    logger: (msg, params) => {
      cubeLog.push([msg, params]);
      if (process.env.CUBEQUEUE_NODE_DEBUG) {
        console.log(`cube: ${msg} ${JSON.stringify(params).slice(0, 600)}`);
      }
    },
  });
  await cube.listen();
}

async function stopCube() {
  if (cube) {
    // CubejsServer.close() calls http.Server#close unbound (Node rejects it) and shuts the
    // SQL API down natively (never started here): these are the two steps left to take.
    await new Promise((resolve) => { cube.server.close(resolve); });
    await cube.core.releaseConnections();
    cube = null;
  }
}

// --- the scenarios, run once per phase -------------------------------------------------------

function throughTheQueueThenTheCache(query, expected) {
  scenario('the first /load goes through cubequeue\'s queue, the second is a cache hit', async () => {
    await resetDataQueryCalls();
    const logBefore = await cubequeueRows('SELECT count(*)::int AS n FROM system.queue_log');
    const first = await load(query);
    assert.deepEqual(first.data, expected);
    assert.equal(await dataQueryCalls(), 1);
    const logged = await cubequeueRows(
      `SELECT path, reason FROM system.queue_log ORDER BY id OFFSET ${logBefore[0].n}`);
    assert.ok(logged.some((r) => r.path.startsWith('SQL_QUERY_') && r.reason === 'acked'),
      `no acked SQL_QUERY_ item in system.queue_log: ${JSON.stringify(logged)}`);
    const second = await load(query);
    assert.deepEqual(second.data, first.data);
    assert.equal(await dataQueryCalls(), 1, 'the second /load ran the data SQL again');
    assert.deepEqual(errorsInCubeLog(), []);
  });
}

function concurrentRequestsRunOnce(query, expected) {
  scenario('concurrent identical requests run the data query once', async () => {
    // The data query must still be running when the last of the six requests reaches Cube's
    // queue (a busy machine serves them one after another): the table reads through a view
    // that takes a second.
    await postgres.query('ALTER TABLE public.orders RENAME TO orders_data');
    await postgres.query(
      'CREATE VIEW public.orders AS SELECT o.* FROM public.orders_data o, pg_sleep(1) AS slow');
    try {
      await resetDataQueryCalls();
      const answers = await Promise.all(Array.from({ length: 6 }, () => load(query)));
      for (const answer of answers) {
        assert.deepEqual(answer.data, expected);
      }
      assert.equal(await dataQueryCalls(), 1);
      assert.deepEqual(errorsInCubeLog(), []);
    } finally {
      await postgres.query('DROP VIEW public.orders');
      await postgres.query('ALTER TABLE public.orders_data RENAME TO orders');
    }
  });
}

function newRowsAfterTheRefreshInterval(id) {
  scenario('after a row is added and the refresh interval passes, /load answers the new data', async () => {
    const count = async () => (await load(COUNT_QUERY)).data[0]['orders.count'];
    const before = await count();
    await resetDataQueryCalls();
    await postgres.query(
      "INSERT INTO public.orders (id, status, amount, created_at) VALUES ($1, 'new', 40, '2026-02-01')",
      [id]);
    // The refresh key has not moved: Cube keeps answering from its cache.
    assert.equal(await count(), before);
    await cubequeueRows(`SYS CLOCK ADVANCE ${REFRESH_EVERY_MS}`);
    const wanted = String(Number(before) + 1);
    const deadline = Date.now() + DEADLINE_MS;
    let now;
    for (;;) {
      now = await count();
      if (now === wanted || Date.now() > deadline) {
        break;
      }
      await sleep(250);
    }
    assert.equal(now, wanted);
    assert.equal(await dataQueryCalls(), 1, 'the data SQL ran once for the new refresh key value');
    assert.deepEqual(errorsInCubeLog(), []);
  });
}

/**
 * The scenarios over `store` ('durable' or 'postgresql'): a cubequeue of that store, a
 * PostgreSQL data source, and two Cube API servers one after the other, the second with
 * the fast track.
 */
function cubeApiScenarios(store) {
  let atPhaseStart;

  before(async () => {
    postgres = await startPostgres();
    await postgres.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
    await postgres.query(fs.readFileSync(path.join(__dirname, 'seed.sql'), 'utf8'));
    let storeArgs;
    if (store === 'durable') {
      dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cubequeue-cube-api-17-'));
      storeArgs = ['--data-dir', dataDir];
    } else {
      await postgres.query(`CREATE DATABASE ${STORE_DATABASE}`);
      storeArgs = ['--store',
        `postgresql://${postgres.user}@${postgres.host}:${postgres.port}/${STORE_DATABASE}`];
    }
    cubequeue = await startCubequeue(['--test-clock', ...storeArgs,
      ...(process.env.CUBEQUEUE_NODE_SERVER_ARGS || '').split(/\s+/).filter(Boolean)]);
    await waitServing();
    await cubequeueRows('SYS CLOCK FREEZE');
    await startCube({ fastTrack: false });
    atPhaseStart = await commandCounts();
  });

  after(async () => {
    await stopCube();
    await cubequeue?.stop();
    await postgres?.stop();
    if (dataDir) {
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });

  throughTheQueueThenTheCache(COUNT_QUERY, [{ 'orders.count': '3' }]);

  scenario('a time dimension with a granularity in the default, compact and multi responses', async () => {
    const members = ['orders.status', 'orders.created_at.day', 'orders.count', 'orders.amount'];
    // Cube adds the time dimension's bare name (it was asked for with a granularity only)
    const rows = BY_DAY_ROWS.map((r) => [...r, r[1]]);
    const named = rows.map((r) => Object.fromEntries(r.map((v, i) => [[...members, 'orders.created_at'][i], v])));

    const vanilla = await load(BY_DAY_QUERY);
    assert.deepEqual(vanilla.data, named);
    assert.deepEqual(vanilla.annotation.timeDimensions['orders.created_at.day'].granularity,
      { name: 'day', title: 'day', interval: '1 day' });
    assert.deepEqual(vanilla.query.timeDimensions, BY_DAY_QUERY.timeDimensions);

    const compact = await load({ ...BY_DAY_QUERY, responseFormat: 'compact' });
    assert.deepEqual(compact.data, { members: [...members, 'orders.created_at'], dataset: rows });

    const multi = await load(BY_DAY_QUERY, '&queryType=multi');
    assert.equal(multi.queryType, 'regularQuery');
    assert.equal(multi.results.length, 1);
    assert.deepEqual(multi.results[0].data, named);
    assert.equal(multi.pivotQuery.queryType, 'regularQuery');
    assert.ok(standIn.calls.getFinalQueryResult >= 2 && standIn.calls.getFinalQueryResultMulti >= 1);
    assert.deepEqual(errorsInCubeLog(), []);
  });

  concurrentRequestsRunOnce({ measures: ['orders.amount'] }, [{ 'orders.amount': '60' }]);

  newRowsAfterTheRefreshInterval(4);

  scenario('without the fast track, items go in by QUEUE ADD and out by QUEUE RETRIEVE', async () => {
    const now = await commandCounts();
    assert.deepEqual(now.failed, []);
    assert.ok(delta(now, atPhaseStart, 'QUEUE ADD') > 0, JSON.stringify(now.ok));
    assert.ok(delta(now, atPhaseStart, 'QUEUE RETRIEVE') > 0, JSON.stringify(now.ok));
    assert.equal(delta(now, atPhaseStart, 'QUEUE ADD_AND_RETRIEVE'), 0);
    // the refresh key's SQL (Cube Store's dialect) was answered by cubequeue
    assert.ok(delta(now, atPhaseStart, 'SELECT') > 0, JSON.stringify(now.ok));
    assert.doesNotMatch(cubequeue.log(), /\bERROR\b/);
  });

  scenario('a second Cube API server, with CUBEJS_QUEUE_FAST_TRACK=true', async () => {
    await stopCube();
    await startCube({ fastTrack: true });
    atPhaseStart = await commandCounts();
  });

  throughTheQueueThenTheCache(
    { measures: ['orders.amount'], dimensions: ['orders.status'], order: { 'orders.status': 'asc' } },
    [{ 'orders.status': 'new', 'orders.amount': '70' }, { 'orders.status': 'shipped', 'orders.amount': '30' }],
  );

  concurrentRequestsRunOnce(
    { measures: ['orders.count'], dimensions: ['orders.status'], order: { 'orders.status': 'asc' } },
    [{ 'orders.status': 'new', 'orders.count': '3' }, { 'orders.status': 'shipped', 'orders.count': '1' }],
  );

  scenario('with the fast track, the queries went in by QUEUE ADD_AND_RETRIEVE, no RETRIEVE needed', async () => {
    // Up to here every query was interactive (a /load waits for it), the clock stood still
    // (no renewal in the background), and a queue slot was always free.
    const now = await commandCounts();
    assert.deepEqual(now.failed, []);
    const added = cubeLog.filter(([msg]) => msg === 'Added to queue').map(([, p]) => p);
    assert.ok(added.length >= 2, `Cube added ${added.length} queries to its queue`);
    assert.deepEqual(added.filter((p) => p.fastTrack !== true), [],
      'a query was added to the queue without being claimed by ADD_AND_RETRIEVE');
    assert.ok(delta(now, atPhaseStart, 'QUEUE ADD_AND_RETRIEVE') >= added.length, JSON.stringify(now.ok));
    assert.equal(delta(now, atPhaseStart, 'QUEUE ADD'), 0, JSON.stringify(now.ok));
    assert.equal(delta(now, atPhaseStart, 'QUEUE RETRIEVE'), 0, JSON.stringify(now.ok));
  });

  newRowsAfterTheRefreshInterval(5);

  scenario('with the fast track, every interactive query was claimed by ADD_AND_RETRIEVE', async () => {
    // Cube renews a stale result in the background at a priority below Interactive, which
    // its driver never fast-tracks (CubeStoreQueueDriver.useFastTrack): those go in by
    // QUEUE ADD and out by QUEUE RETRIEVE, as without the fast track.
    const now = await commandCounts();
    assert.deepEqual(now.failed, []);
    const added = cubeLog.filter(([msg]) => msg === 'Added to queue').map(([, p]) => p);
    const interactive = added.filter((p) => p.priority >= INTERACTIVE_PRIORITY);
    assert.ok(interactive.length >= 2, JSON.stringify(added.map((p) => [p.priority, p.fastTrack])));
    assert.deepEqual(interactive.filter((p) => p.fastTrack !== true), []);
    // every stand-in was needed: each one was called
    assert.deepEqual(Object.entries(standIn.calls).filter(([, n]) => n === 0), []);
    assert.ok(delta(now, atPhaseStart, 'QUEUE ADD_AND_RETRIEVE') >= interactive.length,
      JSON.stringify(now.ok));
    assert.deepEqual(errorsInCubeLog(), []);
    assert.doesNotMatch(cubequeue.log(), /\bERROR\b/);
  });
}

module.exports = { cubeApiScenarios };
