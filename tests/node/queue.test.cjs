'use strict';

/*
 * Cube's REAL QueryQueue (@cubejs-backend/query-orchestrator, pinned in package.json) with
 * cacheAndQueueDriver 'cubestore' and a plain CubeStoreDriver pointed at cubequeue over
 * Cube Store's WebSocket + flatbuffers protocol. The scenarios follow Cube's
 * packages/cubejs-query-orchestrator/test/unit/QueryQueue.abstract.ts as run by
 * test/integration/cubestore/QueryQueueCubestore.test.ts (concurrency 1,
 * continueWaitTimeout 1 s, executionTimeout 2 s, orphanedTimeout 2 s), adapted to the
 * 1.7.43 API, plus assertions on the SQL the driver sends.
 *
 * TEST-ONLY: `@cubejs-backend/native`'s parseCubestoreResultMessage is replaced by a
 * stand-in that decodes HttpResultSet with the driver's own generated flatbuffers code
 * (native-standin.cjs, loaded by helpers.cjs before the driver). Only that function is
 * stubbed; the native binary is not installed (npm install --ignore-scripts).
 */

const {
  startServer, useServerEnv, advanceServerClock, recordingLogger, sqlOf, callsOf, sleep,
  withServerLog,
} = require('./helpers.cjs');

const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const { Readable } = require('node:stream');
const { after, afterEach, before, beforeEach, describe, it } = require('node:test');

const { CubeStoreDriver, CubestoreQueueDriverConnection } = require('@cubejs-backend/cubestore-driver');
const { QueryQueue, ContinueWaitError } = require('@cubejs-backend/query-orchestrator');

const TEST_TIMEOUT = 30 * 1000;
const delayFn = (result, delay) => new Promise((resolve) => { setTimeout(() => resolve(result), delay); });

describe('Cube QueryQueue on cubequeue (cacheAndQueueDriver: cubestore)', () => {
  let server;
  let driver;
  let queue;

  const logger = recordingLogger();
  let delayCount = 0;
  let streamCount = 0;
  let cancelledQuery;
  const processMessagePromises = [];
  const processCancelPromises = [];

  const tenantPrefix = crypto.randomBytes(6).toString('hex');

  async function awaitProcessing() {
    // processQuery can call reconcileQueue, which can dispatch again
    while (await queue.shutdown() || processMessagePromises.length || processCancelPromises.length) {
      await Promise.all(processMessagePromises.splice(0).concat(processCancelPromises.splice(0)));
    }
  }

  /**
   * executeInQueue, retried on ContinueWaitError the way Cube's API client does. Used where
   * Cube's test only tolerates a wait under continueWaitTimeout (1 s) by luck of timing.
   */
  async function executeRetrying(...args) {
    for (let attempt = 1; ; attempt++) {
      try {
        return await queue.executeInQueue(...args);
      } catch (e) {
        if (!(e instanceof ContinueWaitError) || attempt >= 5) {
          throw e;
        }
      }
    }
  }

  /** Resolves once `message` has been logged `count` times (since the test began). */
  async function waitForLog(message, count, timeoutMs = 2000) {
    const deadline = Date.now() + timeoutMs;
    while (logger.messages().filter((m) => m === message).length < count) {
      if (Date.now() > deadline) {
        throw new Error(`"${message}" was not logged ${count} time(s) within ${timeoutMs} ms: ${logger.messages().join(', ')}`);
      }
      await sleep(5);
    }
  }

  const onServerFailure = withServerLog(() => server);

  before(async () => {
    server = await startServer();
    useServerEnv(server);
    driver = new CubeStoreDriver({});
    await driver.query('QUEUE TRUNCATE', []);

    queue = new QueryQueue(`${tenantPrefix}#test_query_queue`, {
      cacheAndQueueDriver: 'cubestore',
      cubeStoreDriverFactory: async () => driver,
      queryHandlers: {
        foo: async (query) => `${query[0]} bar`,
        delay: async (query, setCancelHandler) => {
          const result = query.result + delayCount;
          delayCount += 1;
          await setCancelHandler(result);
          return delayFn(result, query.delay);
        },
      },
      streamHandler: async (query, stream) => {
        streamCount++;
        await sleep(250);
        return new Promise((resolve, reject) => {
          const readable = Readable.from([]);
          readable.once('end', () => resolve(null));
          readable.once('close', () => resolve(null));
          readable.once('error', (err) => reject(err));
          readable.pipe(stream);
        });
      },
      sendProcessMessageFn: async (queryKeyHash, queueId, retrieved) => {
        processMessagePromises.push(queue.executeQuery(queryKeyHash, queueId, retrieved));
      },
      sendCancelMessageFn: async (query, queueId) => {
        processCancelPromises.push(queue.processCancel(query, queueId));
      },
      cancelHandlers: {
        delay: async (query) => {
          cancelledQuery = query.queryKey;
        },
      },
      continueWaitTimeout: 1,
      executionTimeout: 2,
      orphanedTimeout: 2,
      concurrency: 1,
      logger,
    });
  });

  after(async () => {
    if (queue) {
      await awaitProcessing();
    }
    // clients left waiting by the orphaned scenario time out within continueWaitTimeout
    await sleep(1200);
    if (driver) {
      await driver.release();
    }
    if (server) {
      const exit = await server.stop();
      if (process.env.CUBEQUEUE_NODE_DEBUG) {
        console.log(`cubequeue exited ${JSON.stringify(exit)}\n${server.log()}`);
      }
    }
  });

  beforeEach(() => {
    logger.clear();
    delayCount = 0;
    streamCount = 0;
  });

  afterEach(async () => {
    await awaitProcessing();
  });

  it('the server advertises every capability the driver negotiates', { timeout: TEST_TIMEOUT }, onServerFailure(async () => {
    await driver.testConnection();
    for (const capability of ['queueExclusive', 'queueExternalId', 'sendableParameters', 'queueAddAndRetrieve']) {
      assert.equal(await driver.hasCapability(capability), true, capability);
    }
  }));

  it('gutter', { timeout: TEST_TIMEOUT }, onServerFailure(async (t) => {
    const query = t.mock.method(CubeStoreDriver.prototype, 'query');
    const key = ['select * from', []];
    const result = await queue.executeInQueue('foo', key, key);
    assert.equal(result, 'select * from bar');

    const sql = sqlOf(query);
    const first = (prefix) => sql.findIndex((s) => s.startsWith(prefix));
    // the round trip of Cube's queue protocol, in order
    assert.ok(first('QUEUE RESULT ?') >= 0, sql.join('\n'));
    assert.ok(first('QUEUE ADD PRIORITY') > first('QUEUE RESULT ?'), sql.join('\n'));
    assert.ok(first('QUEUE RETRIEVE CONCURRENCY') > first('QUEUE ADD PRIORITY'), sql.join('\n'));
    assert.ok(first('QUEUE ACK') > first('QUEUE RETRIEVE CONCURRENCY'), sql.join('\n'));
    assert.ok(first('QUEUE RESULT_BLOCKING') > first('QUEUE ADD PRIORITY'), sql.join('\n'));
    assert.ok(!sql.some((s) => s.startsWith('QUEUE ADD_AND_RETRIEVE')), 'no fast track unless enabled');
    // the result travels as a typed (sendable) parameter, by queue id
    const ack = query.mock.calls.find((call) => call.arguments[0] === 'QUEUE ACK ? ?');
    assert.equal(ack.arguments[2].sendParameters, true);
    assert.ok(Number.isInteger(ack.arguments[1][0]) && ack.arguments[1][0] > 0, JSON.stringify(ack.arguments[1]));
    assert.deepEqual(JSON.parse(ack.arguments[1][1]), { result: 'select * from bar' });
  }));

  it('instant double wait resolve', { timeout: TEST_TIMEOUT }, onServerFailure(async () => {
    const results = await Promise.all([
      executeRetrying('delay', 'instant', { delay: 400, result: '2' }),
      executeRetrying('delay', 'instant', { delay: 400, result: '2' }),
    ]);
    assert.deepEqual(results, ['20', '20']);
    assert.equal(delayCount, 1, 'the same key is executed once');
  }));

  it('priority', { timeout: TEST_TIMEOUT }, onServerFailure(async () => {
    const result = await Promise.all([
      executeRetrying('delay', '11', { delay: 600, result: '1' }, 1),
      executeRetrying('delay', '12', { delay: 100, result: '2' }, 0),
      executeRetrying('delay', '13', { delay: 100, result: '3' }, 10),
    ]);
    // the second digit is the execution counter: 13 (priority 10) is never executed last
    assert.ok(parseInt(result.find((f) => f[0] === '3'), 10) % 10 < 2, JSON.stringify(result));
    assert.equal(delayCount, 3);
  }));

  it('timeout - continue wait', { timeout: TEST_TIMEOUT }, onServerFailure(async () => {
    const query = ['select * from 2', []];
    let errorString = '';
    let continueWaits = 0;

    for (let i = 0; i < 5; i++) {
      try {
        await queue.executeInQueue('delay', query, { delay: 3000, result: '1' });
      } catch (e) {
        if (e instanceof ContinueWaitError) {
          continueWaits++;
          // eslint-disable-next-line no-continue
          continue;
        }
        errorString = e.toString();
        break;
      }
    }

    assert.match(errorString, /timeout/);
    assert.ok(continueWaits >= 1, 'the long poll timed out at least once before the execution timeout');
    assert.equal(delayCount, 1, 'waiting again never re-executes');
  }));

  it('execution timeout with cancel', { timeout: TEST_TIMEOUT }, onServerFailure(async () => {
    const query = ['select * from 3', []];
    cancelledQuery = null;

    // executionTimeout is 2s, 5s is enough
    await queue.executeInQueue('delay', query, { delay: 5 * 1000, result: '1', isJob: true });
    await awaitProcessing();

    const messages = logger.messages();
    assert.equal(messages.length, 5, messages.join(', '));
    assert.deepEqual([...messages].slice(0, 3).sort(), ['Added to queue', 'Performing query', 'Waiting for query']);
    assert.equal(messages[3], 'Error while querying');
    // the queue found the query def (with the merged cancelHandler) by its key
    assert.equal(messages[4], 'Cancelling query due to timeout');
    assert.deepEqual(cancelledQuery, query);
  }));

  it('stage reporting', { timeout: TEST_TIMEOUT }, onServerFailure(async () => {
    const resultPromise = queue.executeInQueue('delay', '1', { delay: 400, result: '1' }, 0, {
      stageQueryKey: '1',
      requestId: '9f056234-aa57-4702-ab30-145221da6a46-span-1',
      spanId: 'span-id',
    });
    // Cube's test sleeps 50 ms; wait for the handler to start instead, so a loaded
    // machine cannot turn the check into "#1 in queue"
    await waitForLog('Performing query', 1);
    assert.equal((await queue.getQueryStage('1')).stage, 'Executing query');
    assert.equal(await resultPromise, '10');
    assert.equal(await queue.getQueryStage('1'), undefined);
  }));

  it('priority stage reporting', { timeout: TEST_TIMEOUT }, onServerFailure(async () => {
    const resultPromise1 = queue.executeInQueue('delay', '31', { delay: 400, result: '1' }, 20, {
      stageQueryKey: '12',
      requestId: '4274691a-5f4c-480e-89c4-d2b9d989891c-span-1',
      spanId: 'span-id',
    });
    await delayFn(null, 50);
    const resultPromise2 = queue.executeInQueue('delay', '32', { delay: 200, result: '1' }, 10, {
      stageQueryKey: '12',
      requestId: '000bce99-b987-4649-ae5e-1178532929f5-span-1',
      spanId: 'span-id',
    });
    await delayFn(null, 50);
    await waitForLog('Added to queue', 2);
    await waitForLog('Performing query', 1);

    assert.equal((await queue.getQueryStage('12', 10)).stage, '#1 in queue');
    assert.equal((await queue.getQueryStage('12', 20)).stage, 'Executing query');
    await resultPromise1;
    await resultPromise2;
    assert.equal(await queue.getQueryStage('12'), undefined);
  }));

  it('negative priority', { timeout: TEST_TIMEOUT }, onServerFailure(async () => {
    const results = [];

    const first = executeRetrying('delay', '31', { delay: 400, result: '4' }, -10);

    await delayFn(null, 200);

    await Promise.all([
      executeRetrying('delay', '32', { delay: 100, result: '3' }, -9).then((r) => {
        results.push(['32', r]);
      }),
      executeRetrying('delay', '33', { delay: 100, result: '2' }, -8).then((r) => {
        results.push(['33', r]);
      }),
      executeRetrying('delay', '34', { delay: 100, result: '1' }, -7).then((r) => {
        results.push(['34', r]);
      }),
    ]);

    // Cube asserts the arrival order; the second digit (the execution counter) says the same
    // and does not depend on when each client happens to be polling
    assert.deepEqual(Object.fromEntries(results), { 34: '11', 33: '22', 32: '33' });
    assert.equal(await first, '40');
  }));

  it('sequence', { timeout: TEST_TIMEOUT }, onServerFailure(async () => {
    const p1 = executeRetrying('delay', '111', { delay: 50, result: '1' }, 0);
    const p2 = delayFn(null, 50).then(() => executeRetrying('delay', '112', { delay: 50, result: '2' }, 0));
    const p3 = delayFn(null, 75).then(() => executeRetrying('delay', '113', { delay: 50, result: '3' }, 0));
    const p4 = delayFn(null, 100).then(() => executeRetrying('delay', '114', { delay: 50, result: '4' }, 0));

    const result = await Promise.all([p1, p2, p3, p4]);
    assert.deepEqual(result, ['10', '21', '32', '43']);
  }));

  it('orphaned', { timeout: TEST_TIMEOUT }, onServerFailure(async () => {
    // recover if a previous test broke something
    for (let i = 1; i <= 4; i++) {
      await queue.executeInQueue('delay', `11${i}`, { delay: 50, result: `${i}` }, 0);
    }

    cancelledQuery = null;
    delayCount = 0;

    let result = queue.executeInQueue('delay', '111', { delay: 800, result: '1' }, 0);
    delayFn(null, 50).then(() => queue.executeInQueue('delay', '112', { delay: 800, result: '2' }, 0)).catch((e) => e);
    delayFn(null, 75).then(() => queue.executeInQueue('delay', '113', { delay: 800, result: '3' }, 0)).catch((e) => e);
    // orphaned timeout should be applied: nobody waits for 114 once its client gave up
    delayFn(null, 100).then(() => queue.executeInQueue('delay', '114', { delay: 900, result: '4' }, 0)).catch((e) => e);

    assert.equal(await result, '10');
    await queue.executeInQueue('delay', '112', { delay: 800, result: '2' }, 0);

    result = await queue.executeInQueue('delay', '113', { delay: 900, result: '3' }, 0);
    assert.equal(result, '32');

    await delayFn(null, 500);
    assert.equal(cancelledQuery, '114');
    assert.ok(logger.messages().includes('Removing orphaned query'));
    // 114 was removed, so it runs again from scratch
    assert.equal(await queue.executeInQueue('delay', '114', { delay: 50, result: '4' }, 0), '43');
  }));

  it('orphaned with custom ttl (server test clock instead of a 2.5 s sleep)', { timeout: TEST_TIMEOUT }, onServerFailure(async () => {
    const connection = await queue.queueDriver.createConnection();

    try {
      const priority = 10;
      const time = new Date().getTime();

      assert.deepEqual(await connection.getOrphanedQueries(), []);

      await connection.addToQueue(['1', []], 'delay', { isJob: true, orphanedTimeout: time }, priority, {
        queueId: 1,
        stageQueryKey: '1',
        requestId: '1',
        orphanedTimeout: 2,
      });

      assert.deepEqual(await connection.getOrphanedQueries(), []);

      await connection.addToQueue(['2', []], 'delay', { isJob: true, orphanedTimeout: time }, priority, {
        queueId: 2,
        stageQueryKey: '2',
        requestId: '2',
        orphanedTimeout: 60,
      });

      await advanceServerClock(driver, 2500);

      const orphaned = await connection.getOrphanedQueries();
      assert.equal(orphaned.length, 1, JSON.stringify(orphaned));
      assert.equal(orphaned[0][0], connection.redisHash(['1', []]));
      assert.ok(Number.isInteger(orphaned[0][1]) && orphaned[0][1] > 0, JSON.stringify(orphaned));

      // 60 s of its own: still there after 59 s more, orphaned after 61 s
      await advanceServerClock(driver, 59 * 1000 - 2500);
      assert.deepEqual((await connection.getOrphanedQueries()).map(([hash]) => hash), [connection.redisHash(['1', []])]);
      await advanceServerClock(driver, 2000);
      assert.deepEqual(
        (await connection.getOrphanedQueries()).map(([hash]) => hash),
        [connection.redisHash(['1', []]), connection.redisHash(['2', []])]
      );
      // QUEUE CANCEL by path hands back the payloads
      const [def1] = await connection.getQueryAndRemove(connection.redisHash(['1', []]), null);
      const [def2] = await connection.getQueryAndRemove(connection.redisHash(['2', []]), null);
      assert.deepEqual(def1 && def1.queryKey, ['1', []]);
      assert.deepEqual(def2 && def2.queryKey, ['2', []]);
      assert.deepEqual(await connection.getOrphanedQueries(), []);
    } finally {
      await connection.getQueryAndRemove(connection.redisHash(['1', []]), null);
      await connection.getQueryAndRemove(connection.redisHash(['2', []]), null);
      queue.queueDriver.release(connection);
    }
  }));

  it('stalled: an active query without heartbeats is cancelled, its late ACK is refused (server test clock)', { timeout: TEST_TIMEOUT }, onServerFailure(async () => {
    cancelledQuery = null;
    // isJob: returns once the query is queued and dispatched
    await queue.executeInQueue('delay', 'stalled', { delay: 800, result: '5', isJob: true }, 0);
    await waitForLog('Performing query', 1);

    // heartBeatTimeout is 4 x heartBeatInterval (30 s) = 120 s; the heartbeat timer never
    // fires in 800 ms of real time, so the server sees a stalled item
    await advanceServerClock(driver, 121 * 1000);
    await queue.reconcileQueue();
    await awaitProcessing();

    assert.equal(cancelledQuery, 'stalled');
    const messages = logger.messages();
    assert.ok(messages.includes('Removing orphaned query'), messages.join(', '));
    // the handler finished after the item was cancelled: QUEUE ACK answers success = false
    assert.ok(messages.includes('Orphaned execution result'), messages.join(', '));
    const connection = await queue.queueDriver.createConnection();
    try {
      assert.deepEqual(await connection.getActiveQueries(), []);
      assert.equal(await connection.getResult('stalled'), null, 'a refused ACK stores no result');
    } finally {
      queue.queueDriver.release(connection);
    }
  }));

  it('stream handler (persistent key: QUEUE ADD EXCLUSIVE bound to x-process-id)', { timeout: TEST_TIMEOUT }, onServerFailure(async (t) => {
    const query = t.mock.method(CubeStoreDriver.prototype, 'query');
    const key = ['select * from table', []];
    key.persistent = true;
    const stream = await queue.executeInQueue('stream', key, { aliasNameToMember: {} }, 0);
    await awaitProcessing();

    assert.ok(stream, 'executeInQueue returns the stream');
    // eslint-disable-next-line no-restricted-syntax, no-unused-vars
    for await (const chunk of stream) {
      // empty
    }

    assert.equal(streamCount, 1);
    assert.ok(sqlOf(query).some((s) => s.startsWith('QUEUE ADD EXCLUSIVE PRIORITY')), sqlOf(query).join('\n'));
    const messages = logger.messages();
    assert.equal(messages[messages.length - 1], 'Performing query completed');
    assert.ok(!messages.includes('Orphaned execution result'));
  }));

  it('removed before reconciled', { timeout: TEST_TIMEOUT }, onServerFailure(async () => {
    const query = ['select * from', []];
    const key = queue.redisHash(query);
    await queue.processQuery(key, null);
    assert.deepEqual(logger.messages(), ['Skip processing']);
    const result = await queue.executeInQueue('foo', key, query);
    assert.equal(result, 'select * from bar');
  }));

  describe('with CUBEJS_QUEUE_EXTERNAL_ID enabled', () => {
    before(() => {
      process.env.CUBEJS_QUEUE_EXTERNAL_ID = 'true';
    });

    after(() => {
      delete process.env.CUBEJS_QUEUE_EXTERNAL_ID;
    });

    it('useExternalId should return true', { timeout: TEST_TIMEOUT }, onServerFailure(async () => {
      const connection = await queue.queueDriver.createConnection();
      try {
        assert.equal(await connection.useExternalId(), true);
      } finally {
        queue.queueDriver.release(connection);
      }
    }));

    it('no-cache queries should not loop with concurrent clients', { timeout: TEST_TIMEOUT }, onServerFailure(async (t) => {
      const driverQuery = t.mock.method(CubeStoreDriver.prototype, 'query');
      const query = ['select * from no_cache_test', []];

      // delay=1500ms > continueWaitTimeout=1s, so both get ContinueWaitError
      const clientA = queue
        .executeInQueue('delay', query, { delay: 1500, result: '1' }, 0, {
          stageQueryKey: query, requestId: '70b0b0a6-60ff-43ee-95ca-b5a3d864879f-span-1', spanId: 'span-A',
        })
        .catch((e) => e);
      const clientB = queue
        .executeInQueue('delay', query, { delay: 1500, result: '1' }, 0, {
          stageQueryKey: query, requestId: '8030e1f2-5e14-4241-9481-46e34d478131-span-1', spanId: 'span-B',
        })
        .catch((e) => e);

      const [errA, errB] = await Promise.all([clientA, clientB]);
      assert.ok(errA instanceof ContinueWaitError, String(errA));
      assert.ok(errB instanceof ContinueWaitError, String(errB));

      await awaitProcessing();

      // Both clients retry (new span suffix, same UUID prefix) and find the result.
      const [resultA, resultB] = await Promise.all([
        queue.executeInQueue('delay', query, { delay: 1500, result: '1' }, 0, {
          stageQueryKey: query, requestId: '70b0b0a6-60ff-43ee-95ca-b5a3d864879f-span-2', spanId: 'span-A2',
        }),
        queue.executeInQueue('delay', query, { delay: 1500, result: '1' }, 0, {
          stageQueryKey: query, requestId: '8030e1f2-5e14-4241-9481-46e34d478131-span-2', spanId: 'span-B2',
        }),
      ]);

      assert.equal(resultA, '10');
      assert.equal(resultB, '10');
      // executed exactly once, not re-queued on retry
      assert.equal(delayCount, 1);

      const calls = callsOf(driverQuery);
      const dump = JSON.stringify(calls.map(({ sql, values }) => [sql, values.slice(0, 2)]));
      const uuids = ['70b0b0a6-60ff-43ee-95ca-b5a3d864879f', '8030e1f2-5e14-4241-9481-46e34d478131'];
      // the request UUID (span suffix removed) travels as the external id
      const adds = calls.filter(({ sql }) => sql === 'QUEUE ADD PRIORITY ? EXTERNAL_ID ? ? ?');
      assert.ok(adds.length >= 2, dump);
      assert.ok(adds.every(({ values }) => uuids.includes(values[1])), dump);
      const reads = calls.filter(({ sql }) => sql === 'QUEUE RESULT EXTERNAL_ID ? ?');
      assert.deepEqual([...new Set(reads.map(({ values }) => values[0]))].sort(), uuids, dump);
    }));

    it('single client long polling loop should not re-execute query', { timeout: TEST_TIMEOUT }, onServerFailure(async () => {
      const query = ['select * from long_poll_loop_test', []];
      const requestUuid = 'a1b2c3d4-e5f6-7890-abcd-ef1234567890';
      let spanCounter = 1;
      let continueWaits = 0;

      // The orchestrator's long polling loop: same request UUID, a new span each retry.
      let result = null;
      const deadline = Date.now() + 10000;

      while (Date.now() < deadline) {
        try {
          result = await queue.executeInQueue('delay', query, { delay: 1500, result: '1' }, 0, {
            stageQueryKey: query,
            requestId: `${requestUuid}-span-${spanCounter++}`,
            spanId: `span-${spanCounter}`,
          });
          break;
        } catch (e) {
          if (e instanceof ContinueWaitError) {
            continueWaits++;
            // eslint-disable-next-line no-continue
            continue;
          }
          throw e;
        }
      }

      assert.equal(result, '10');
      assert.ok(continueWaits >= 1);
      assert.equal(delayCount, 1);

      // Cube Store supports read-many via external_id: the result is still there
      for (let i = 0; i < 2; i++) {
        const again = await queue.executeInQueue('delay', query, { delay: 1500, result: '1' }, 0, {
          stageQueryKey: query,
          requestId: `${requestUuid}-span-${spanCounter++}`,
          spanId: `span-${spanCounter}`,
        });
        assert.equal(again, '10');
      }
      assert.equal(delayCount, 1);
    }));
  });

  describe('with CUBEJS_QUEUE_FAST_TRACK enabled (priority >= 10)', () => {
    const INTERACTIVE = 10;

    before(() => {
      process.env.CUBEJS_QUEUE_FAST_TRACK = 'true';
    });

    after(() => {
      delete process.env.CUBEJS_QUEUE_FAST_TRACK;
    });

    it('an idle queue claims the query on add: ADD_AND_RETRIEVE and no RETRIEVE', { timeout: TEST_TIMEOUT }, onServerFailure(async (t) => {
      const retrieveForProcessing = t.mock.method(CubestoreQueueDriverConnection.prototype, 'retrieveForProcessing');
      const driverQuery = t.mock.method(CubeStoreDriver.prototype, 'query');

      const key = ['select * from fast_track', []];
      const result = await queue.executeInQueue('foo', key, key, INTERACTIVE);
      await awaitProcessing();

      assert.equal(result, 'select * from fast_track bar');
      const sql = sqlOf(driverQuery);
      const fastAdds = callsOf(driverQuery).filter(({ sql: s }) => s.startsWith('QUEUE ADD_AND_RETRIEVE'));
      assert.equal(fastAdds.length, 1, sql.join('\n'));
      assert.equal(fastAdds[0].sql, 'QUEUE ADD_AND_RETRIEVE PRIORITY ? ? ? ?');
      // priority, path, payload, and the concurrency budget last
      assert.equal(fastAdds[0].values[0], INTERACTIVE);
      assert.equal(fastAdds[0].values[3], 1);
      assert.ok(!sql.some((s) => s.startsWith('QUEUE RETRIEVE')), sql.join('\n'));
      assert.ok(!sql.some((s) => s.startsWith('QUEUE ADD PRIORITY')), sql.join('\n'));
      // the claim came with the insert, there was nothing left to retrieve
      assert.equal(retrieveForProcessing.mock.callCount(), 0);
      // the acknowledgement of the claimed item is accepted
      assert.ok(!logger.messages().includes('Orphaned execution result'), logger.messages().join(', '));
      const added = logger.calls.find(([message]) => message === 'Added to queue');
      assert.equal(added[1].fastTrack, true);
    }));

    it('below Interactive the driver keeps to plain ADD', { timeout: TEST_TIMEOUT }, onServerFailure(async (t) => {
      const driverQuery = t.mock.method(CubeStoreDriver.prototype, 'query');
      const key = ['select * from slow_track', []];
      assert.equal(await queue.executeInQueue('foo', key, key, 1), 'select * from slow_track bar');
      const sql = sqlOf(driverQuery);
      assert.ok(!sql.some((s) => s.startsWith('QUEUE ADD_AND_RETRIEVE')), sql.join('\n'));
      assert.ok(sql.some((s) => s.startsWith('QUEUE RETRIEVE CONCURRENCY')), sql.join('\n'));
    }));

    it('concurrent clients execute the query once', { timeout: TEST_TIMEOUT }, onServerFailure(async (t) => {
      const driverQuery = t.mock.method(CubeStoreDriver.prototype, 'query');
      const results = await Promise.all([
        queue.executeInQueue('delay', 'fast_track_concurrent', { delay: 400, result: '2' }, INTERACTIVE),
        queue.executeInQueue('delay', 'fast_track_concurrent', { delay: 400, result: '2' }, INTERACTIVE),
      ]);

      assert.deepEqual(results, ['20', '20']);
      assert.equal(delayCount, 1);
      assert.equal(logger.messages().filter((m) => m === 'Performing query').length, 1);
      assert.equal(sqlOf(driverQuery).filter((s) => s.startsWith('QUEUE ADD_AND_RETRIEVE')).length, 2);
    }));

    it('a claim is not given out while the concurrency budget is taken', { timeout: TEST_TIMEOUT }, onServerFailure(async () => {
      const connection = await queue.queueDriver.createConnection();
      const first = ['select * from budget_1', []];
      const second = ['select * from budget_2', []];
      const addAndRetrieve = (queryKey, queueId) => connection.addToQueue(
        queryKey,
        'delay',
        { isJob: true, orphanedTimeout: undefined },
        INTERACTIVE,
        { queueId, stageQueryKey: `${queueId}`, requestId: `${queueId}` }
      );

      try {
        // concurrency is 1, the first query takes the only slot
        const [added1, id1, , , claim1] = await addAndRetrieve(first, 1);
        assert.equal(added1, 1);
        assert.ok(claim1, 'the first item is claimed');
        assert.deepEqual(claim1.def.queryKey, first);
        assert.deepEqual(claim1.active, [connection.redisHash(first)]);
        assert.equal(claim1.queueSize, 0);

        // an active item is never claimed twice
        const [added1again, id1again, , , claim1again] = await addAndRetrieve(first, 1);
        assert.equal(added1again, 0);
        assert.equal(id1again, id1);
        assert.equal(claim1again, null);

        const [added2, , pending2, , claim2] = await addAndRetrieve(second, 2);
        assert.equal(added2, 1);
        assert.equal(pending2, 1);
        assert.equal(claim2, null);

        // a claimed item goes straight to active and never becomes pending; the one which
        // was not claimed is left for reconcile to pick up by priority
        const active = await connection.getActiveQueries();
        const pending = await connection.getToProcessQueries();
        assert.deepEqual(active.map(([hash]) => hash), [connection.redisHash(first)]);
        assert.equal(active[0][1], id1);
        assert.deepEqual(pending.map(([hash]) => hash), [connection.redisHash(second)]);
        assert.ok(Number.isInteger(pending[0][1]) && pending[0][1] > 0);
      } finally {
        await connection.getQueryAndRemove(connection.redisHash(first), null);
        await connection.getQueryAndRemove(connection.redisHash(second), null);
        queue.queueDriver.release(connection);
      }
    }));
  });
});
