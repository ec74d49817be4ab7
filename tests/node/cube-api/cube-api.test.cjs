'use strict';

/*
 * A real Cube API against cubequeue: an unmodified `@cubejs-backend/server` 0.35.81 with
 * `@cubejs-backend/postgres-driver` 0.35.81, keeping its cache and queue in cubequeue
 * (CUBEJS_CACHE_AND_QUEUE_DRIVER=cubestore, CUBEJS_CUBESTORE_HOST/PORT), over a PostgreSQL
 * data source started here (Debian's postgresql, temp dir, free loopback port) and the
 * one-cube model in ./model.
 *
 * Stubbed (see native-stubs.cjs): `setupLogger` and `NativeInstance.newJinjaEngine` of
 * @cubejs-backend/native, whose binary cannot be installed here. Nothing else.
 *
 * Shown: the first /load goes through cubequeue's queue (system.queue_log has the item),
 * the second is a cache hit (the data SQL ran once in PostgreSQL, per pg_stat_statements);
 * concurrent identical requests run the data query once; after a row is added and the
 * refresh interval passes, /load answers the new data; Cube never logs "Error while
 * querying" (its refresh-key SQL, in Cube Store's dialect, is answered by cubequeue).
 * The refresh keys are answered from cubequeue's clock, which this test freezes
 * (--test-clock, SYS CLOCK FREEZE) so that no key changes between two requests by
 * accident; "the refresh interval passes" is SYS CLOCK ADVANCE past it, and then the test
 * waits for real (polling, generous deadline) for Cube's own renewal timers, which run on
 * Node's clock.
 */

require('./native-stubs.cjs');

const assert = require('node:assert/strict');
const path = require('node:path');
const { after, before, test } = require('node:test');

const { freePort, sleep, startCubequeue, startPostgres } = require('./harness.cjs');

const SECRET = 'cubequeue-cube-api-test-secret';
const MODEL_DIR = path.join(__dirname, 'model');
const DATA_SQL_MARK = 'orders__count';
const DEADLINE_MS = 45000;
const REFRESH_EVERY_MS = 2000; // the model's refreshKey.every

let cubequeue;
let postgres;
let cube;
let cubePort;
const cubeLog = [];

function token() {
  const jwt = require('jsonwebtoken');
  return jwt.sign({}, SECRET, { expiresIn: '1h' });
}

async function load(query) {
  const url = `http://127.0.0.1:${cubePort}/cubejs-api/v1/load?query=${encodeURIComponent(JSON.stringify(query))}`;
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

const COUNT_QUERY = { measures: ['orders.count'] };

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

/** How often PostgreSQL ran Cube's data SQL for a measure (its alias, `orders__count`). */
async function dataQueryCalls(mark = DATA_SQL_MARK) {
  const rows = await postgres.query(
    'SELECT coalesce(sum(calls), 0)::int AS calls FROM pg_stat_statements WHERE query LIKE $1',
    [`%${mark}%`],
  );
  return rows[0].calls;
}

function errorsInCubeLog() {
  return cubeLog.filter(([msg]) => /Error while querying|Error querying db/.test(msg));
}

function failWithLogs(e) {
  const tail = cubeLog.slice(-40).map(([m, p]) => `${m} ${JSON.stringify(p).slice(0, 400)}`).join('\n');
  e.message += `\n--- Cube log (tail) ---\n${tail}\n--- cubequeue (tail) ---\n${cubequeue.log().slice(-4000)}`;
  throw e;
}

before(async () => {
  postgres = await startPostgres();
  await postgres.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
  const fs = require('node:fs');
  await postgres.query(fs.readFileSync(path.join(__dirname, 'seed.sql'), 'utf8'));
  cubequeue = await startCubequeue(['--test-clock',
    ...(process.env.CUBEQUEUE_NODE_SERVER_ARGS || '').split(/\s+/).filter(Boolean)]);
  await cubequeueRows('SYS CLOCK FREEZE');
  cubePort = await freePort();
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
  });
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
});

after(async () => {
  if (cube) {
    // CubejsServer.close() of 0.35 calls http.Server#close unbound, which Node 20 rejects
    // ("reading 'closeIdleConnections'"); these are the two steps it means to take.
    await new Promise((resolve) => { cube.server.close(resolve); });
    await cube.core.releaseConnections();
  }
  await cubequeue?.stop();
  await postgres?.stop();
});

test('the first /load goes through cubequeue\'s queue, the second is a cache hit', async () => {
  try {
    const first = await load(COUNT_QUERY);
    assert.deepEqual(first.data, [{ 'orders.count': '3' }]);
    assert.equal(await dataQueryCalls(), 1);
    const logged = await cubequeueRows('SELECT path, reason FROM system.queue_log ORDER BY id');
    assert.ok(logged.some((r) => r.path.startsWith('SQL_QUERY_') && r.reason === 'acked'),
      `no acked SQL_QUERY_ item in system.queue_log: ${JSON.stringify(logged)}`);
    const second = await load(COUNT_QUERY);
    assert.deepEqual(second.data, first.data);
    assert.equal(await dataQueryCalls(), 1, 'the second /load ran the data SQL again');
    assert.deepEqual(errorsInCubeLog(), []);
  } catch (e) {
    failWithLogs(e);
  }
});

test('concurrent identical requests run the data query once', async () => {
  // The data query must still be running when the last of the six requests reaches Cube's
  // queue, or a request that comes after the answer was handed out (a busy machine runs
  // Cube's request handlers one after another) rightly runs it again: for this test the
  // table reads through a view that takes a second.
  await postgres.query('ALTER TABLE public.orders RENAME TO orders_data');
  await postgres.query(
    'CREATE VIEW public.orders AS SELECT o.* FROM public.orders_data o, pg_sleep(1) AS slow');
  try {
    const query = { measures: ['orders.amount'] };
    const answers = await Promise.all(Array.from({ length: 6 }, () => load(query)));
    for (const answer of answers) {
      assert.deepEqual(answer.data, [{ 'orders.amount': '60' }]);
    }
    assert.equal(await dataQueryCalls('orders__amount'), 1);
    assert.deepEqual(errorsInCubeLog(), []);
  } catch (e) {
    failWithLogs(e);
  } finally {
    await postgres.query('DROP VIEW public.orders');
    await postgres.query('ALTER TABLE public.orders_data RENAME TO orders');
  }
});

test('after a row is added and the refresh interval passes, /load answers the new data', async () => {
  try {
    assert.deepEqual((await load(COUNT_QUERY)).data, [{ 'orders.count': '3' }]);
    await postgres.query("INSERT INTO public.orders (id, status, amount) VALUES (4, 'new', 40)");
    // The refresh key has not moved: Cube keeps answering from its cache.
    assert.deepEqual((await load(COUNT_QUERY)).data, [{ 'orders.count': '3' }]);
    await cubequeueRows(`SYS CLOCK ADVANCE ${REFRESH_EVERY_MS}`);
    const deadline = Date.now() + DEADLINE_MS;
    let data;
    for (;;) {
      data = (await load(COUNT_QUERY)).data;
      if (data[0]['orders.count'] === '4' || Date.now() > deadline) {
        break;
      }
      await sleep(250);
    }
    assert.deepEqual(data, [{ 'orders.count': '4' }]);
    assert.equal(await dataQueryCalls(), 2, 'the data SQL ran once per refresh key value');
    assert.deepEqual(errorsInCubeLog(), []);
    assert.doesNotMatch(cubequeue.log(), /\bERROR\b/);
    // Every statement Cube sent was answered: no error outcome in cubequeue's metrics.
    const metrics = await (await fetch(`http://127.0.0.1:${cubequeue.httpPort}/metrics`)).text();
    const failed = metrics.split('\n')
      .filter((l) => l.startsWith('cubequeue_commands_total{') && !/outcome="ok"/.test(l));
    assert.match(metrics, /^cubequeue_commands_total\{.*outcome="ok"/m);
    assert.deepEqual(failed, []);
  } catch (e) {
    failWithLogs(e);
  }
});
