// node-postgres runs Cube's two QueryQueue flows against cubequeue; prints "OK" on success.
// Usage: node flow.js <host> <port> <http-port> <prefix>
'use strict';
const assert = require('node:assert/strict');
const { Client } = require('pg');

const [host, port, httpPort, prefix] = process.argv.slice(2);

async function waiters() {
  const text = await (await fetch(`http://${host}:${httpPort}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith('cubequeue_blocked_waiters '));
  return Number(line.split(' ')[1]);
}

async function until(predicate) {
  for (let i = 0; i < 600; i++) {
    if (await predicate()) return;
    await new Promise((res) => setTimeout(res, 50));
  }
  throw new Error('condition not reached');
}
const config = { host, port: Number(port), user: 'cube', database: 'cube' };
const TIMEOUT_MS = 60000;

async function main() {
  const c = new Client(config);
  const w = new Client(config);
  await c.connect();
  await w.connect();
  try {
    const path = `${prefix}:job`;
    // node-postgres sends every value as text with OID 0: a key is a path (§8 rule 5)
    let r = await c.query('QUEUE RESULT $1', [path]);
    // the tag is 'QUEUE RESULT 0': node-postgres reads command 'QUEUE' and no rowCount
    assert.equal(r.rows.length, 0);
    assert.equal(r.command, 'QUEUE');
    r = await c.query('QUEUE ADD PRIORITY $1 $2 $3', [1, path, '{"a":1}']);
    const id = r.rows[0].id;
    assert.equal(r.rows[0].added, true);
    assert.equal(r.rows[0].pending, '1'); // int8 arrives as a string in node-postgres
    r = await c.query({ name: 'list', text: 'QUEUE LIST $1', values: [prefix] });
    assert.deepEqual(r.rows, [{ id: 'job', queue_id: id, status: 'pending', extra: null }]);
    const blocked = w.query('QUEUE RESULT_BLOCKING $1 $2', [TIMEOUT_MS, path]);
    r = await c.query('QUEUE RETRIEVE EXTENDED CONCURRENCY $1 $2', [2, path]);
    assert.equal(r.rows[0].payload, '{"a":1}');
    assert.equal(r.rows[0].id, id);
    await c.query('QUEUE MERGE_EXTRA $1 $2', [path, '{"stage":"x"}']);
    await c.query('QUEUE HEARTBEAT $1', [path]);
    r = await c.query('QUEUE ACK $1 $2', [path, 'the result']);
    assert.equal(r.rows[0].success, true);
    r = await blocked;
    assert.deepEqual(r.rows, [{ payload: 'the result', type: 'success', id, external_id: null }]);

    // fast track
    const fast = `${prefix}:fast`;
    r = await c.query('QUEUE ADD_AND_RETRIEVE $1 $2 $3', [fast, 'pl', 1]);
    assert.equal(r.rows[0].payload, 'pl');
    await c.query('QUEUE ACK $1 $2', [fast, 'ok']);
    r = await c.query('QUEUE RESULT_BLOCKING $1 $2', [TIMEOUT_MS, fast]);
    assert.equal(r.rows[0].payload, 'ok');

    // list reused by name, simple query without values, a typed system table
    r = await c.query({ name: 'list', text: 'QUEUE LIST $1', values: [prefix] });
    assert.equal(r.rows.length, 0);
    r = await c.query(`QUEUE ADD '${prefix}:s' 'x'; QUEUE LIST '${prefix}'`);
    assert.equal(r.length, 2);
    r = await c.query('SELECT count(*) AS n FROM system.queue WHERE prefix = $1', [prefix]);
    assert.equal(Number(r.rows[0].n), 1);

    // errors keep the connection usable
    await assert.rejects(c.query('QUEUE NOPE'), (e) => e.code === '42601');

    // cancel a blocked RESULT_BLOCKING: node-postgres opens a new connection with
    // a CancelRequest carrying this backend's pid and secret
    const base = await waiters();
    const pending = w.query('QUEUE RESULT_BLOCKING $1 $2', [TIMEOUT_MS, `${prefix}:never`]);
    await until(async () => (await waiters()) > base);
    new Client(config).cancel(w, w._getActiveQuery());
    await assert.rejects(pending, (e) => e.code === '57014');
    r = await w.query('SELECT 1 AS one');
    assert.equal(r.rows[0].one, 1);
  } finally {
    await c.end();
    await w.end();
  }
  console.log('OK');
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
