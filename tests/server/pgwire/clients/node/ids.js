// node-postgres passes an id it just read back as a number: it is an id (docs/dialect.md
// §8 rules 5 and 6); prints "OK" on success. Usage: node ids.js <host> <port> <prefix>
'use strict';
const assert = require('node:assert/strict');
const { Client } = require('pg');

const [host, port, prefix] = process.argv.slice(2);

async function main() {
  const c = new Client({ host, port: Number(port), user: 'cube', database: 'cube' });
  await c.connect();
  try {
    const path = `${prefix}:job`;
    let r = await c.query('QUEUE ADD $1 $2', [path, 'p']);
    assert.equal(r.fields[0].dataTypeID, 20); // int8 (node-postgres hands it over as text)
    const id = Number(r.rows[0].id);
    r = await c.query('QUEUE GET $1', [id]); // sent untyped (OID 0), all digits: an id
    assert.deepEqual(r.rows, [{ payload: 'p', extra: null }]);
    r = await c.query('QUEUE RETRIEVE $1', [path]);
    assert.equal(Number(r.rows[0].id), id);
    r = await c.query('QUEUE ACK $1 $2', [Number(r.rows[0].id), 'done']);
    assert.equal(r.rows[0].success, true);
    r = await c.query('QUEUE RESULT $1', [id]);
    assert.equal(r.rows.length, 1);
    assert.equal(r.fields[2].dataTypeID, 20);
    process.stdout.write('OK\n');
  } finally {
    await c.end();
  }
}

main().catch((err) => {
  process.stderr.write(`${err.stack}\n`);
  process.exit(1);
});
