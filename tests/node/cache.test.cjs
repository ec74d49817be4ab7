'use strict';

/*
 * Cube's REAL CubeStoreCacheDriver (@cubejs-backend/cubestore-driver) and QueryCache
 * (@cubejs-backend/query-orchestrator), pinned in package.json, pointed at cubequeue over
 * Cube Store's WebSocket + flatbuffers protocol. Scenarios after Cube's
 * packages/cubejs-query-orchestrator/test/unit/QueryCache.abstract.ts (withLock
 * exclusivity, release and cancel) plus the driver's set/get/remove with TTL and
 * keysStartingWith. TTLs are checked by moving the server's --test-clock
 * (`SYS CLOCK ADVANCE`), not by sleeping.
 *
 * TEST-ONLY: `@cubejs-backend/native`'s parseCubestoreResultMessage is replaced by a
 * stand-in that decodes HttpResultSet with the driver's own generated flatbuffers code
 * (native-standin.cjs, loaded by helpers.cjs before the driver). Only that function is
 * stubbed; the native binary is not installed (npm install --ignore-scripts).
 */

const {
  startServer, useServerEnv, advanceServerClock, recordingLogger, callsOf,
  withServerLog,
} = require('./helpers.cjs');

const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const { after, before, describe, it } = require('node:test');

const { CubeStoreDriver, CubeStoreCacheDriver } = require('@cubejs-backend/cubestore-driver');
const { QueryCache } = require('@cubejs-backend/query-orchestrator');
const { createCancelablePromise, pausePromise } = require('@cubejs-backend/shared');

const TEST_TIMEOUT = 30 * 1000;
const randomKey = () => crypto.randomBytes(16).toString('hex');

describe('Cube cache drivers on cubequeue (cacheAndQueueDriver: cubestore)', () => {
  let server;
  let driver;
  let cacheDriver;
  let cache;
  const logger = recordingLogger();

  const onServerFailure = withServerLog(() => server);

  before(async () => {
    server = await startServer();
    useServerEnv(server);
    driver = new CubeStoreDriver({});
    await driver.query('CACHE TRUNCATE', []);
    cacheDriver = new CubeStoreCacheDriver(async () => driver);
    cache = new QueryCache(
      randomKey(),
      () => {
        throw new Error('driverFactory is not used by these tests');
      },
      logger,
      { cacheAndQueueDriver: 'cubestore', cubeStoreDriverFactory: async () => driver },
    );
  });

  after(async () => {
    if (cache) {
      await cache.cleanup();
    }
    if (driver) {
      await driver.release();
    }
    if (server) {
      await server.stop();
    }
  });

  it('testConnection sends SELECT 1 and the server advertises sendable parameters', { timeout: TEST_TIMEOUT }, onServerFailure(async () => {
    await cacheDriver.testConnection();
    assert.equal(await driver.hasCapability('sendableParameters'), true);
  }));

  it('pre-aggregation statements get a clear error, and the socket stays usable', { timeout: TEST_TIMEOUT }, onServerFailure(async () => {
    // what Cube sends when Cube Store is also its pre-aggregation store
    await assert.rejects(
      driver.getTablesQuery('dev_pre_aggregations'),
      (e) => e.constructor.name === 'QueryError' && /not pre-aggregations/.test(e.message)
    );
    await assert.rejects(
      driver.createSchemaIfNotExists('dev_pre_aggregations'),
      /not pre-aggregations/
    );
    await assert.rejects(
      driver.query('CREATE TABLE dev_pre_aggregations.orders_main (id int, amount decimal)', []),
      /not pre-aggregations/
    );
    await cacheDriver.testConnection();
  }));

  it('withLock', { timeout: TEST_TIMEOUT }, onServerFailure(async () => {
    const RANDOM_KEY_CACHE = randomKey();

    const testLock = async () => {
      let started = 0;
      let finished = 0;

      const doLock = (sleepMs) => cache.withLock(
        RANDOM_KEY_CACHE,
        60 * 10,
        async () => {
          started++;
          await pausePromise(sleepMs);
          finished++;
        },
      );

      const locks = [doLock(600)];
      await pausePromise(100);
      locks.push(doLock(600));
      locks.push(doLock(600));

      const results = await Promise.all(locks);
      assert.deepEqual(results, [true, false, false]);
      assert.equal(started, 1);
      assert.equal(finished, 1);
    };

    await testLock();
    // the lock was released after the callback: it can be taken again at once
    await testLock();
  }));

  it('withLock + cancel (test free of lock + cancel inheritance)', { timeout: TEST_TIMEOUT }, onServerFailure(async () => {
    const RANDOM_KEY_CACHE = randomKey();

    const lockPromise = cache.withLock(
      RANDOM_KEY_CACHE,
      60 * 10,
      () => createCancelablePromise(async (tkn) => {
        // withLock.cancel must cancel the callback too, or this hangs for an hour
        await tkn.with(pausePromise(60 * 60 * 1000));
      }),
    );

    await pausePromise(100);
    await lockPromise.cancel(true);
    await lockPromise;

    let callbackWasExecuted = false;
    const statusOfResolve = await cache.withLock(
      RANDOM_KEY_CACHE,
      60 * 10,
      async () => {
        callbackWasExecuted = true;
      },
    );

    assert.equal(statusOfResolve, true);
    assert.equal(callbackWasExecuted, true);
  }));

  it('withLock: SET NX with the TTL, REMOVE on release; an unreleased lock expires with its TTL', { timeout: TEST_TIMEOUT }, onServerFailure(async (t) => {
    const query = t.mock.method(CubeStoreDriver.prototype, 'query');
    const key = `lock:${randomKey()}`;

    // freeAfter=false keeps the lock until its 2 s TTL runs out
    assert.equal(await cacheDriver.withLock(key, async () => null, 2, false), true);
    assert.equal(await cacheDriver.withLock(key, async () => null, 2, false), false);
    await advanceServerClock(driver, 1500);
    assert.equal(await cacheDriver.withLock(key, async () => null, 2, false), false);
    await advanceServerClock(driver, 1000);
    let ran = false;
    assert.equal(await cacheDriver.withLock(key, async () => { ran = true; }, 60, true), true);
    assert.equal(ran, true);
    // released: free again
    assert.equal(await cacheDriver.get(key), null);
    assert.equal(await cacheDriver.withLock(key, async () => null, 60, true), true);

    const calls = callsOf(query).filter(({ values }) => values.includes(key));
    assert.deepEqual(calls.slice(0, 2).map(({ sql, values }) => [sql, values]), [
      ['CACHE SET NX TTL ? ? ?', [2, key, '1']],
      ['CACHE SET NX TTL ? ? ?', [2, key, '1']],
    ]);
    assert.ok(calls.some(({ sql, values }) => sql === 'CACHE REMOVE ?' && values[0] === key));
  }));

  it('set / get / remove with TTL', { timeout: TEST_TIMEOUT }, onServerFailure(async (t) => {
    const query = t.mock.method(CubeStoreDriver.prototype, 'query');
    const key = `${randomKey()}#SQL_QUERY_RESULT:${randomKey()}`;
    // quotes, backslashes, newlines and non-ASCII survive the round trip
    const value = { time: 1700000000000, result: [{ a: 'it\'s "quoted" \\ back\nslash', n: 42, u: 'ünï' }], renewalKey: null };

    assert.equal(await cacheDriver.get(key), null);
    const { key: setKey, bytes } = await cacheDriver.set(key, value, 2);
    assert.equal(setKey, key);
    assert.equal(bytes, Buffer.byteLength(JSON.stringify(value)));
    assert.deepEqual(await cacheDriver.get(key), value);

    await advanceServerClock(driver, 1500);
    assert.deepEqual(await cacheDriver.get(key), value, 'still there before the TTL');
    await advanceServerClock(driver, 1000);
    assert.equal(await cacheDriver.get(key), null, 'gone after the TTL');

    // a SET replaces value and TTL
    await cacheDriver.set(key, 'first', 1);
    await cacheDriver.set(key, ['second'], 600);
    await advanceServerClock(driver, 5000);
    assert.deepEqual(await cacheDriver.get(key), ['second']);

    await cacheDriver.remove(key);
    assert.equal(await cacheDriver.get(key), null);
    await cacheDriver.remove(key); // removing a missing key is fine

    // GET/SET/REMOVE went out with typed (sendable) parameters
    const calls = callsOf(query);
    const set = calls.find(({ sql }) => sql === 'CACHE SET TTL ? ? ?');
    assert.deepEqual(set.values, [2, key, JSON.stringify(value)]);
    for (const callIndex of query.mock.calls.keys()) {
      const [sql, , options] = query.mock.calls[callIndex].arguments;
      if (/^CACHE (GET|SET TTL|REMOVE) /.test(sql)) {
        assert.equal(options && options.sendParameters, true, sql);
      }
    }
  }));

  it('keysStartingWith lists the keys under one prefix, in insertion order', { timeout: TEST_TIMEOUT }, onServerFailure(async () => {
    const p = `SQL_PRE_AGGREGATIONS_TABLES_TOUCH_${randomKey()}`;
    await cacheDriver.set(`${p}:b_table`, 1, 600);
    await cacheDriver.set(`${p}:a_table`, 2, 600);
    await cacheDriver.set(`${p}:short`, 3, 1);
    await cacheDriver.set(`${p}:nested:c`, 4, 600); // another prefix
    await cacheDriver.set(`${p}x:d`, 5, 600); // another prefix

    assert.deepEqual(await cacheDriver.keysStartingWith(`${p}:`), [`${p}:b_table`, `${p}:a_table`, `${p}:short`]);
    assert.deepEqual(await cacheDriver.keysStartingWith(`${p}:nested:`), [`${p}:nested:c`]);
    assert.deepEqual(await cacheDriver.keysStartingWith(`${randomKey()}:`), []);

    await advanceServerClock(driver, 1500);
    assert.deepEqual(await cacheDriver.keysStartingWith(`${p}:`), [`${p}:b_table`, `${p}:a_table`], 'expired keys are left out');

    await cacheDriver.remove(`${p}:b_table`);
    assert.deepEqual(await cacheDriver.keysStartingWith(`${p}:`), [`${p}:a_table`]);
  }));

  it('QueryCache.cacheQueryResult: a cold key is fetched and stored once, then served from the cache', { timeout: TEST_TIMEOUT }, onServerFailure(async (t) => {
    const fetches = [];
    t.mock.method(cache, 'queryWithRetryAndRelease', async (query) => {
      fetches.push(query);
      return [{ answer: '42' }];
    });
    const cacheKey = [`SELECT ${randomKey()}`, []];
    logger.clear();

    const options = { renewalThreshold: 600, renewalKey: 'rk', waitForRenew: true, requestId: 'req-1', dataSource: 'default' };
    const first = await cache.cacheQueryResult('SELECT 1', [], cacheKey, 3600, options);
    assert.deepEqual(first, [{ answer: '42' }]);
    assert.ok(logger.messages().includes('Missing cache for'));
    assert.ok(logger.messages().includes('Renewed'));

    const second = await cache.cacheQueryResult('SELECT 1', [], cacheKey, 3600, { ...options, requestId: 'req-2' });
    assert.deepEqual(second, [{ answer: '42' }]);
    assert.ok(logger.messages().includes('Using cache for'));
    assert.deepEqual(fetches, ['SELECT 1'], 'fetched once');

    // the entry really is in the server's cache, under the QueryCache key, with its TTL
    const entry = await cacheDriver.get(cache.queryCacheKey(cacheKey));
    assert.deepEqual(entry.result, [{ answer: '42' }]);
    await advanceServerClock(driver, 3601 * 1000);
    assert.equal(await cacheDriver.get(cache.queryCacheKey(cacheKey)), null);
  }));

  it('a listing larger than one WebSocket frame piece reaches the driver whole (a fragmented message)', { timeout: 120 * 1000 }, onServerFailure(async () => {
    // over 2,048 rows and 1 MiB: the server streams the listing and sends it in pieces
    const n = 2100;
    const payload = (i) => JSON.stringify({ i, pad: 'x'.repeat(600) });
    for (let start = 0; start < n; start += 100) {
      const batch = [];
      for (let i = start; i < Math.min(n, start + 100); i += 1) {
        batch.push(driver.query('QUEUE ADD PRIORITY 0 ? ?', [`biglist:k${i}`, payload(i)]));
      }
      await Promise.all(batch);
    }
    const rows = await driver.query('QUEUE PENDING WITH_PAYLOAD "biglist"', []);
    assert.equal(rows.length, n);
    assert.deepEqual(rows.map((r) => r.id).sort(), Array.from({ length: n }, (_, i) => `k${i}`).sort());
    for (const r of rows) {
      assert.equal(r.payload, payload(Number(r.id.slice(1))));
    }
    await driver.query('QUEUE PURGE "biglist"', []);
  }));
});
