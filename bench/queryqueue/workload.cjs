'use strict';

/*
 * One load process of the Cube QueryQueue benchmark (driven by bench/cube_queue.py).
 *
 * Cube's own QueryQueue, unmodified, calls `executeInQueue` from `callers` concurrent loops
 * with a query handler that returns at once, so what is measured is the queue's round
 * trips and the server's work per query, the path every Cube API request takes:
 *
 *   - line "0.35": @cubejs-backend/query-orchestrator 0.35.81 from this package, with
 *     cacheAndQueueDriver "redis" (RedisQueueDriver over a RedisPool, node-redis, Cube's
 *     defaults) or "cubestore" (CubeStoreQueueDriver over Cube Store's WebSocket);
 *   - line "1.7": 1.7.43 from tests/node (the version the node tests run), "cubestore" only.
 *     Its WebSocket replies go through tests/node/native-standin.cjs (the native decoder's
 *     binary is not installed). The fast track is Cube's own switch: CUBEJS_QUEUE_FAST_TRACK
 *     plus the driver's `queueAddAndRetrieve` capability (advertised version >= 1.7.25)
 *     and a priority >= Interactive (10); every query here has priority 10.
 *
 * Protocol on stdio, one JSON object per line: the process connects and warms up (its
 * warm-up queries are finished, executed and answered, before it says so), prints
 * {"event":"ready"}, waits for "go" on stdin, runs for `seconds`, lets its queries in
 * flight finish and prints {"event":"done", wall_s, cpu_s, queries}; on "report" it prints
 * every query it submitted, executed and got answered, with the latencies, and it exits
 * when stdin closes. Only executions inside the window are recorded, so the driver's
 * exactly-once check covers every query of every process of the run (any process may
 * execute any query: they share one queue, as several Cube API instances do).
 *
 * Config: one JSON argument {line, driver, host, port, concurrency, callers, seconds,
 * warmup, prefix, tag}.
 */

const path = require('path');
const readline = require('readline');
const { createRequire } = require('module');

const ROOT = path.resolve(__dirname, '..', '..');
const PRIORITY = 10; // QueuePriority.Interactive: the fast track's threshold in 1.7

const cfg = JSON.parse(process.argv[2]);

function loadLine(line) {
  if (line === '0.35') {
    const { QueryQueue, ContinueWaitError, RedisPool } = require('@cubejs-backend/query-orchestrator');
    const { CubeStoreDriver } = require('@cubejs-backend/cubestore-driver');
    return { QueryQueue, ContinueWaitError, RedisPool, CubeStoreDriver };
  }
  if (line === '1.7') {
    // the stand-in patches the one @cubejs-backend/native instance the 1.7 driver resolves
    require(path.join(ROOT, 'tests', 'node', 'native-standin.cjs'));
    const req = createRequire(path.join(ROOT, 'tests', 'node', 'package.json'));
    const { QueryQueue, ContinueWaitError } = req('@cubejs-backend/query-orchestrator');
    const { CubeStoreDriver } = req('@cubejs-backend/cubestore-driver');
    return { QueryQueue, ContinueWaitError, RedisPool: null, CubeStoreDriver };
  }
  throw new Error(`unknown line ${line}`);
}

function emit(obj) {
  process.stdout.write(`${JSON.stringify(obj)}\n`);
}

async function main() {
  const lib = loadLine(cfg.line);
  const executed = [];
  let recording = false;
  let cleanup;
  const options = {
    concurrency: cfg.concurrency,
    queryHandlers: {
      // returns at once: the figures are the queue's cost, not a data source's
      bench: async (query) => {
        if (recording) {
          executed.push(query.id);
        }
        return { id: query.id };
      },
    },
    logger: () => undefined, // Cube logs every queue event; not the queue's cost
  };
  if (cfg.driver === 'redis') {
    if (!lib.RedisPool) {
      throw new Error(`line ${cfg.line} is run against cubestore only`);
    }
    process.env.CUBEJS_REDIS_URL = `redis://${cfg.host}:${cfg.port}`;
    const redisPool = new lib.RedisPool();
    options.cacheAndQueueDriver = 'redis';
    options.redisPool = redisPool;
    cleanup = () => redisPool.cleanup();
  } else if (cfg.driver === 'cubestore') {
    const driver = new lib.CubeStoreDriver({ host: cfg.host, port: String(cfg.port) });
    options.cacheAndQueueDriver = 'cubestore';
    options.cubeStoreDriverFactory = async () => driver;
    cleanup = () => driver.release();
  } else {
    throw new Error(`unknown driver ${cfg.driver}`);
  }
  const queue = new lib.QueryQueue(cfg.prefix, options);

  let seq = 0;
  const newQuery = () => {
    seq += 1;
    const id = `${cfg.tag}:${seq}`;
    return { id, key: [`SELECT ${id}`, []], query: { id } };
  };

  let retries = 0;
  const errors = [];
  /** executeInQueue until answered; ContinueWaitError means "ask again", as Cube's API does. */
  async function run(q) {
    for (;;) {
      try {
        return await queue.executeInQueue('bench', q.key, q.query, PRIORITY, {});
      } catch (e) {
        if (!(e instanceof lib.ContinueWaitError)) {
          throw e;
        }
        retries += 1;
      }
    }
  }

  // warm-up: every caller's connection path is opened and has served a query
  await Promise.all(Array.from({ length: Math.max(1, cfg.warmup) }, () => run(newQuery())));
  emit({ event: 'ready' });

  const rl = readline.createInterface({ input: process.stdin });
  const lines = rl[Symbol.asyncIterator]();
  const first = await lines.next();
  if (first.done || first.value.trim() !== 'go') {
    throw new Error(`expected "go" on stdin, got ${JSON.stringify(first.value)}`);
  }

  const submitted = [];
  const answered = [];
  const latencies = [];
  recording = true;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const deadline = t0 + cfg.seconds * 1000;

  async function caller() {
    while (performance.now() < deadline) {
      const q = newQuery();
      submitted.push(q.id);
      const start = performance.now();
      try {
        const result = await run(q);
        latencies.push(performance.now() - start);
        answered.push([q.id, !!result && result.id === q.id]);
      } catch (e) {
        if (errors.length < 5) {
          errors.push(String(e && e.stack ? e.stack : e).slice(0, 300));
        }
      }
    }
  }
  await Promise.all(Array.from({ length: cfg.callers }, caller));
  const wall = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  emit({ event: 'done', wall_s: wall, cpu_s: (cpu.user + cpu.system) / 1e6, queries: submitted.length });

  // "report" comes once every process is done: by then every query of the run has been
  // answered, so every execution this process ran for another process is recorded too
  const next = await lines.next();
  if (next.done || next.value.trim() !== 'report') {
    throw new Error(`expected "report" on stdin, got ${JSON.stringify(next.value)}`);
  }
  await queue.shutdown();
  recording = false;
  emit({ event: 'report', submitted, executed, answered, latencies_ms: latencies, retries, errors });

  await lines.next(); // stdin closed by the driver
  await cleanup();
  process.exit(0);
}

main().catch((e) => {
  emit({ event: 'error', error: String(e && e.stack ? e.stack : e).slice(0, 2000) });
  process.exit(1);
});
