'use strict';

/*
 * The result-formatting stand-in of native-standin.cjs on its own (no servers): what it
 * answers for what the Cube API test asks, and that it refuses, loudly, what it does not
 * implement. The end-to-end shape is checked against a real Cube API in scenarios.cjs.
 */

const {
  calls, codegen, flatbuffers, native, timeValue, transformData,
} = require('./native-standin.cjs');

const assert = require('node:assert/strict');
const { describe, it } = require('node:test');

const ANNOTATION = {
  'orders.count': { type: 'number' },
  'orders.status': { type: 'string' },
  'orders.created_at.day': { type: 'time' },
  'orders.created_at': { type: 'time' },
};
const ALIASES = {
  orders__count: 'orders.count',
  orders__status: 'orders.status',
  orders__created_at_day: 'orders.created_at.day',
};
const QUERY = {
  measures: ['orders.count'],
  dimensions: ['orders.status'],
  timeDimensions: [{ dimension: 'orders.created_at', granularity: 'day' }],
};
// as ResultWrapper.getRawData sends a driver's rows: JSON of {members, columns}
const RAW = native.rowsToColumnarBuffer([
  { orders__status: 'new', orders__created_at_day: '2026-01-02 00:00:00', orders__count: 2 },
  { orders__status: null, orders__created_at_day: '2026-01-03T04:05:06.789', orders__count: '1' },
]);

const request = (extra = {}) => ({
  aliasToMemberNameMap: ALIASES,
  annotation: ANNOTATION,
  query: QUERY,
  queryType: 'regularQuery',
  ...extra,
});

describe('the result-formatting stand-in', () => {
  it('names each column by its member, adds the bare time dimension, formats times, numbers as text', () => {
    assert.deepEqual(transformData(request(), RAW), [
      {
        'orders.status': 'new',
        'orders.created_at.day': '2026-01-02T00:00:00.000',
        'orders.count': '2',
        'orders.created_at': '2026-01-02T00:00:00.000',
      },
      {
        'orders.status': null,
        'orders.created_at.day': '2026-01-03T04:05:06.789',
        'orders.count': '1',
        'orders.created_at': '2026-01-03T04:05:06.789',
      },
    ]);
  });

  it('answers the compact format as members and a dataset in the same order', () => {
    assert.deepEqual(transformData(request({ resType: 'compact' }), RAW), {
      members: ['orders.status', 'orders.created_at.day', 'orders.count', 'orders.created_at'],
      dataset: [
        ['new', '2026-01-02T00:00:00.000', '2', '2026-01-02T00:00:00.000'],
        [null, '2026-01-03T04:05:06.789', '1', '2026-01-03T04:05:06.789'],
      ],
    });
  });

  it('reads a Cube Store result through the reference parseCubestoreResultMessage hands out', async () => {
    const b = new flatbuffers.Builder(128);
    const cell = b.createString('5');
    codegen.HttpColumnValue.startHttpColumnValue(b);
    codegen.HttpColumnValue.addStringValue(b, cell);
    const value = codegen.HttpColumnValue.endHttpColumnValue(b);
    const row = codegen.HttpRow.createHttpRow(b, codegen.HttpRow.createValuesVector(b, [value]));
    const columns = codegen.HttpResultSet.createColumnsVector(b, [b.createString('orders__count')]);
    const rows = codegen.HttpResultSet.createRowsVector(b, [row]);
    codegen.HttpResultSet.startHttpResultSet(b);
    codegen.HttpResultSet.addColumns(b, columns);
    codegen.HttpResultSet.addRows(b, rows);
    const resultSet = codegen.HttpResultSet.endHttpResultSet(b);
    b.finish(codegen.HttpMessage.createHttpMessage(b, 1, codegen.HttpCommand.HttpResultSet, resultSet, 0));

    const before = calls.getCubestoreResult;
    const wrapper = await native.parseCubestoreResultMessage(Buffer.from(b.asUint8Array()));
    assert.equal(wrapper.isNative, true);
    assert.deepEqual([...wrapper], [{ orders__count: '5' }]);
    assert.equal(calls.getCubestoreResult, before + 1);
    wrapper.setTransformData(request({ query: { measures: ['orders.count'] } }));
    wrapper.setRootResultObject({
      query: { measures: ['orders.count'] }, annotation: { measures: {} }, slowQuery: false,
    });
    const body = JSON.parse(Buffer.from(await wrapper.getFinalResult()).toString('utf8'));
    assert.deepEqual(body, {
      query: { measures: ['orders.count'] },
      annotation: { measures: {} },
      slowQuery: false,
      data: [{ 'orders.count': '5' }],
    });
  });

  it('formats the timestamp texts Cube\'s Rust parses, and leaves any other text alone', () => {
    assert.equal(timeValue('2026-01-02T03:04:05+02:00'), '2026-01-02T03:04:05.000');
    assert.equal(timeValue('2026-01-02T03:04:05.5Z'), '2026-01-02T03:04:05.500');
    assert.equal(timeValue('2026-01-02 03:04:05.123456'), '2026-01-02T03:04:05.123');
    assert.equal(timeValue('2026-01-02T03:04:05'), '2026-01-02T03:04:05.000');
    assert.equal(timeValue('2026-01-02'), '2026-01-02');
  });

  for (const [what, td, message] of [
    ['the columnar format', request({ resType: 'columnar' }), /columnar response format/],
    ['a compare date range query', request({ queryType: 'compareDateRangeQuery' }), /queryType/],
    ['a custom granularity',
      request({ query: { ...QUERY, timeDimensions: [{ dimension: 'orders.created_at', granularity: 'fiscal' }] } }),
      /granularity fiscal/],
    ['a member type it does not know',
      request({ annotation: { ...ANNOTATION, 'orders.count': { type: 'boolean' } } }), /member type boolean/],
  ]) {
    it(`refuses ${what}`, () => {
      assert.throws(() => transformData(td, RAW), message);
    });
  }

  it('fails as Cube does on a column that names no member, or a hidden member', () => {
    assert.throws(() => transformData(request({ aliasToMemberNameMap: {} }), RAW),
      /Member name not found for alias: 'orders__status'/);
    const { 'orders.status': _, ...hidden } = ANNOTATION;
    assert.throws(() => transformData(request({ annotation: hidden }), RAW),
      /You requested hidden member: 'orders.status'/);
  });
});
