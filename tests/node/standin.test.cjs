'use strict';

/*
 * Checks the TEST-ONLY stand-in for `@cubejs-backend/native`'s parseCubestoreResultMessage
 * (native-standin.cjs) on messages built with the driver's own generated flatbuffers code.
 * The stand-in exists only because the native addon's binary is not installed
 * (`npm install --ignore-scripts`); it is not part of cubequeue. No server needed.
 */

const { standIn } = require('./helpers.cjs');

const assert = require('node:assert/strict');
const { describe, it } = require('node:test');

const { codegen, flatbuffers, native } = standIn;

/** One HttpMessage with an HttpResultSet; a cell of `undefined` is an absent string. */
function resultSetMessage(columns, rows, { rowWithoutValues = false } = {}) {
  const b = new flatbuffers.Builder(256);
  const rowOffsets = rows.map((values) => {
    if (rowWithoutValues) {
      codegen.HttpRow.startHttpRow(b);
      return codegen.HttpRow.endHttpRow(b);
    }
    const cells = values.map((v) => {
      const s = v === undefined ? 0 : b.createString(v);
      codegen.HttpColumnValue.startHttpColumnValue(b);
      if (s) {
        codegen.HttpColumnValue.addStringValue(b, s);
      }
      return codegen.HttpColumnValue.endHttpColumnValue(b);
    });
    return codegen.HttpRow.createHttpRow(b, codegen.HttpRow.createValuesVector(b, cells));
  });
  const colsVec = columns === null
    ? 0
    : codegen.HttpResultSet.createColumnsVector(b, columns.map((c) => b.createString(c)));
  const rowsVec = codegen.HttpResultSet.createRowsVector(b, rowOffsets);
  codegen.HttpResultSet.startHttpResultSet(b);
  if (colsVec) {
    codegen.HttpResultSet.addColumns(b, colsVec);
  }
  codegen.HttpResultSet.addRows(b, rowsVec);
  const rs = codegen.HttpResultSet.endHttpResultSet(b);
  const conn = b.createString('conn-1');
  b.finish(codegen.HttpMessage.createHttpMessage(b, 7, codegen.HttpCommand.HttpResultSet, rs, conn));
  return Buffer.from(b.asUint8Array());
}

describe('test-only stand-in for @cubejs-backend/native parseCubestoreResultMessage', () => {
  it('is the function the driver calls', () => {
    // The driver resolves @cubejs-backend/native to the same module instance.
    assert.equal(native.parseCubestoreResultMessage.isTestStandIn, true);
    // Everything else of the native module stays real, so any other use fails loudly.
    assert.throws(() => native.getCubestoreResult({}), /Unable to load @cubejs-backend\/native/);
  });

  it('decodes rows as objects of strings and nulls, wrapped like the real decoder', async () => {
    const msg = resultSetMessage(['id', 'added', 'pending'], [['1', 'true', '0'], ['2', undefined, '5']]);
    const rows = await native.parseCubestoreResultMessage(msg);
    assert.ok(rows instanceof native.ResultWrapper);
    assert.equal(rows.length, 2);
    assert.deepEqual(rows[0], { id: '1', added: 'true', pending: '0' });
    assert.deepEqual(rows[1], { id: '2', added: null, pending: '5' });
    assert.deepEqual(rows.map((r) => r.id), ['1', '2']);
  });

  it('pads short rows with null and drops extra cells', async () => {
    const rows = await native.parseCubestoreResultMessage(
      resultSetMessage(['a', 'b'], [['x'], ['p', 'q', 'r']])
    );
    assert.deepEqual([...rows], [{ a: 'x', b: null }, { a: 'p', b: 'q' }]);
  });

  it('gives zero rows for a zero-column frame', async () => {
    const rows = await native.parseCubestoreResultMessage(resultSetMessage(null, [['ignored']]));
    assert.equal(rows.length, 0);
  });

  it('fails like the native decoder on an empty column name and on a row without values', async () => {
    await assert.rejects(
      native.parseCubestoreResultMessage(resultSetMessage(['ok', ''], [['1', '2']])),
      /Column name is not defined/
    );
    await assert.rejects(
      native.parseCubestoreResultMessage(resultSetMessage(['a'], [['1']], { rowWithoutValues: true })),
      /Null row/
    );
  });

  it('refuses an Arrow HttpQueryResult, which cubequeue must never send', async () => {
    const b = new flatbuffers.Builder(64);
    const data = codegen.HttpQueryResultArrow.createDataVector(b, [1, 2, 3]);
    const arrow = codegen.HttpQueryResultArrow.createHttpQueryResultArrow(b, data, false);
    const qr = codegen.HttpQueryResult.createHttpQueryResult(
      b, codegen.HttpQueryResultData.HttpQueryResultArrow, arrow
    );
    b.finish(codegen.HttpMessage.createHttpMessage(b, 1, codegen.HttpCommand.HttpQueryResult, qr, 0));
    await assert.rejects(
      native.parseCubestoreResultMessage(Buffer.from(b.asUint8Array())),
      /decodes only the legacy HttpResultSet/
    );
  });
});
