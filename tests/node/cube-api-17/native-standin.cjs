'use strict';

/*
 * TEST-ONLY stand-ins for the functions of `@cubejs-backend/native` 1.7.43 that an unmodified
 * Cube API server of the 1.7 line reaches on this test's path. The package's Rust binary
 * (index.node) is downloaded from GitHub by a postinstall script, which cannot run here
 * (`npm ci --ignore-scripts`), and every call into it would throw "Unable to load
 * @cubejs-backend/native". The package's JavaScript (dist/js) is real and stays: its exports
 * are replaced on the one module instance every Cube package resolves, before any of them is
 * loaded, and Cube's code calls them as `(0, native_1.name)(...)`, i.e. through these exports;
 * ResultWrapper (the real class) calls getCubestoreResult and getFinalQueryResult(Multi)
 * the same way.
 *
 * Replaced, read from the installed packages' dist:
 *   - `setupLogger`: called by the API gateway's SqlServer constructor at start; a no-op
 *     (Cube's JS logger still gets every message; the SQL API itself is switched off).
 *   - `NativeInstance.prototype.newJinjaEngine`: created by every schema compile, even for
 *     a JavaScript model; the engine refuses to render, so a Jinja model fails loudly.
 *   - `parseCubestoreResultMessage` / `getCubestoreResult`: every Cube Store reply, each QUEUE
 *     and CACHE command included. The message is decoded by ../cubestore-result-decoder.cjs
 *     (shared with ../native-standin.cjs: the rules of Cube's Rust decoder,
 *     `query_message_parser.rs`, on the cubestore-driver's own flatbuffers code) into an
 *     opaque reference, as the real function returns a boxed Rust result;
 *     `getCubestoreResult(ref)` turns it into rows of strings and nulls, as the real one does.
 *   - `getFinalQueryResult` / `getFinalQueryResultMulti`: every /load response, called by
 *     ResultWrapper.getFinalResult / ResultMultiWrapper.getFinalResult. They do what Cube's
 *     Rust does (cubeorchestrator's query_result_transform.rs: TransformedData::transform,
 *     RequestResultData and RequestResultDataMulti serialised) for what this test asks:
 *     regular queries of measures, dimensions and time dimensions with a standard
 *     granularity, in the default and the compact response format. Anything else (compare
 *     date range, blending, the columnar format, a member type or value this does not know,
 *     an alias with no member) throws a "stand-in" error, so a test that needs more fails
 *     loudly instead of passing on a guess.
 *
 * Not replaced, and switched off by the test's configuration instead: the Tesseract planner
 * (`buildSqlAndParams`, CUBEJS_TESSERACT_SQL_PLANNER=false), the SQL API (`registerInterface`
 * and the rest, CUBEJS_PG_SQL_PORT=false and no CUBEJS_SQL_PORT), native transpilation
 * (`transpileJs`, off by default) and Python (`pythonLoadConfig`, no cube.py). Any call to
 * them still throws the real "Unable to load @cubejs-backend/native".
 */

const path = require('node:path');

const serverDir = path.dirname(require.resolve('@cubejs-backend/server/package.json'));
const driverDir = path.dirname(require.resolve('@cubejs-backend/cubestore-driver/package.json',
  { paths: [serverDir] }));
const native = require(require.resolve('@cubejs-backend/native', { paths: [driverDir] }));
const { cubestoreResultDecoder } = require('../cubestore-result-decoder.cjs');

const { decodeCubestoreResultMessage, codegen, flatbuffers } = cubestoreResultDecoder(driverDir);

/** Loud refusal: the stand-in was asked for something this test does not need. */
function refuse(what) {
  throw new Error(`test stand-in for @cubejs-backend/native: ${what} is not implemented `
    + '(tests/node/cube-api-17/native-standin.cjs)');
}

// --- start-up and model compile -----------------------------------------------------------

const calls = {
  setupLogger: 0,
  newJinjaEngine: 0,
  parseCubestoreResultMessage: 0,
  getCubestoreResult: 0,
  getFinalQueryResult: 0,
  getFinalQueryResultMulti: 0,
};

native.setupLogger = () => {
  calls.setupLogger += 1;
};

native.NativeInstance.prototype.newJinjaEngine = function newJinjaEngine() {
  calls.newJinjaEngine += 1;
  const render = () => refuse('Jinja templates (newJinjaEngine)');
  return { loadTemplate: render, renderTemplate: render };
};

// --- Cube Store replies ----------------------------------------------------------------------

/** What the real parseCubestoreResultMessage boxes: a Rust QueryResult, opaque to JS. */
class CubestoreResultRef {
  #rows;

  constructor(rows) {
    this.#rows = rows;
  }

  static rowsOf(ref) {
    if (!(ref instanceof CubestoreResultRef)) {
      refuse('getCubestoreResult of anything but a parseCubestoreResultMessage result');
    }
    return ref.#rows;
  }
}

native.parseCubestoreResultMessage = async (message) => {
  calls.parseCubestoreResultMessage += 1;
  return new native.ResultWrapper(new CubestoreResultRef(decodeCubestoreResultMessage(message)));
};

native.getCubestoreResult = (ref) => {
  calls.getCubestoreResult += 1;
  // a fresh array of fresh rows, as the real function builds new JS objects on each call
  return CubestoreResultRef.rowsOf(ref).map((row) => ({ ...row }));
};

// --- /load responses -------------------------------------------------------------------------

// query_result_transform.rs: GRANULARITY_LEVELS (custom granularities are not supported there)
const GRANULARITY_LEVELS = {
  second: 1, minute: 2, hour: 3, day: 4, week: 5, month: 6, quarter: 7, year: 8,
};
const MEMBER_TYPES = new Set(['number', 'string', 'time']);

/**
 * The raw rows as QueryResult columns: a Cube Store reference (its cells are strings or
 * nulls) or the Buffer of `{members, columns}` JSON that ResultWrapper.getRawData builds
 * from a driver's rows (rowsToColumnarBuffer).
 */
function rawColumns(raw) {
  if (raw instanceof CubestoreResultRef) {
    const rows = CubestoreResultRef.rowsOf(raw);
    const members = rows.length ? Object.keys(rows[0]) : [];
    return { members, columns: members.map((m) => rows.map((r) => r[m])), rowCount: rows.length };
  }
  if (!Buffer.isBuffer(raw)) {
    refuse(`raw data of type ${typeof raw} (neither a Cube Store result nor a columnar Buffer)`);
  }
  const { members, columns } = JSON.parse(raw.toString('utf8'));
  if (!Array.isArray(members) || !Array.isArray(columns) || members.length !== columns.length) {
    refuse('raw data JSON without matching members and columns');
  }
  const rowCount = columns.length ? columns[0].length : 0;
  if (columns.some((c) => !Array.isArray(c) || c.length !== rowCount)) {
    refuse('raw data JSON with columns of different lengths');
  }
  return { members, columns, rowCount };
}

/**
 * DBResponsePrimitive's JSON: null, booleans and strings as they are, numbers as their text
 * (the legacy Cube Store result carried every value as a string, and the Rust serialiser
 * keeps that shape).
 */
function primitive(value) {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') {
    return value;
  }
  if (typeof value === 'number' && Number.isFinite(value)) {
    return String(value);
  }
  return refuse(`a cell of type ${typeof value} (${JSON.stringify(value)})`);
}

const pad = (n, width = 2) => String(n).padStart(width, '0');

/**
 * transform_value for `time` members: a timestamp text Cube's Rust can parse becomes
 * `YYYY-MM-DDTHH:MM:SS.mmm`; any other text is left as it is (as the Rust does).
 */
function timeValue(text) {
  let m = /^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})$/i.exec(text);
  if (m && text[10].toUpperCase() === 'T') {
    // RFC 3339: formatted in its own offset, as chrono's DateTime<FixedOffset> does
    return `${m[1]}-${m[2]}-${m[3]}T${m[4]}:${m[5]}:${m[6]}.${((m[7] || '') + '000').slice(0, 3)}`;
  }
  m = /^(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?$/.exec(text)
    || /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})()$/.exec(text);
  if (m) {
    return `${m[1]}-${m[2]}-${m[3]}T${m[4]}:${m[5]}:${m[6]}.${((m[7] || '') + '000').slice(0, 3)}`;
  }
  return text;
}

function transformValue(value, type) {
  const v = primitive(value);
  return typeof v === 'string' && type === 'time' ? timeValue(v) : v;
}

function memberName(m) {
  if (typeof m !== 'string') {
    refuse('member expressions');
  }
  return m;
}

function checkRequest(td) {
  const queryType = td.queryType ?? 'regularQuery';
  if (queryType !== 'regularQuery') {
    refuse(`queryType ${queryType}`);
  }
  const resType = td.resType ?? 'default';
  if (resType !== 'default' && resType !== 'compact') {
    refuse(`the ${resType} response format`);
  }
  for (const t of td.query.timeDimensions || []) {
    if (t.compareDateRange) {
      refuse('compareDateRange');
    }
    if (t.granularity !== undefined && t.granularity !== null
      && !(t.granularity in GRANULARITY_LEVELS)) {
      refuse(`the granularity ${t.granularity}`);
    }
  }
  for (const [member, item] of Object.entries(td.annotation)) {
    if (!MEMBER_TYPES.has(item.type)) {
      refuse(`member type ${item.type} (${member})`);
    }
  }
  return resType;
}

function ensureAnnotated(member, annotation) {
  if (!(member in annotation)) {
    throw new Error(`You requested hidden member: '${member}'. Please make it visible using `
      + '`public: true`. Please note primaryKey fields are `public: false` by default: '
      + 'https://docs.cube.dev/reference/data-modeling/joins#setting-a-primary-key.');
  }
}

/**
 * get_members: each column's member in the columns' order; then, for a time dimension
 * asked for only with a granularity, its bare name, taken from its finest granularity.
 */
function getMembers(td, raw) {
  const membersToAlias = new Map();
  if (!raw.members.length) {
    for (const m of [...(td.query.measures || []), ...(td.query.dimensions || [])]) {
      ensureAnnotated(memberName(m), td.annotation);
    }
    for (const t of td.query.timeDimensions || []) {
      if (t.granularity) {
        ensureAnnotated(t.dimension, td.annotation);
      }
    }
    return membersToAlias;
  }
  const dimensions = (td.query.dimensions || []).map(memberName);
  const minimal = new Map();
  for (const alias of raw.members) {
    const member = td.aliasToMemberNameMap[alias];
    if (member === undefined) {
      throw new Error(`Member name not found for alias: '${alias}'`);
    }
    ensureAnnotated(member, td.annotation);
    membersToAlias.set(member, alias);
    const path = member.split('.');
    const base = `${path[0]}.${path[1]}`;
    if (path.length === 3 && !dimensions.includes(base)) {
      const level = GRANULARITY_LEVELS[path[2]];
      const known = minimal.get(base);
      if (!known || known.level >= level) {
        minimal.set(base, { level, alias });
      }
    }
  }
  for (const [base, { alias }] of minimal) {
    membersToAlias.set(base, alias);
  }
  return membersToAlias;
}

/** TransformedData::transform for the default (vanilla) and compact formats. */
function transformData(td, rawData) {
  const resType = checkRequest(td);
  const raw = rawColumns(rawData);
  const membersToAlias = getMembers(td, raw);
  const position = new Map(raw.members.map((alias, i) => [alias, i]));
  const typeOf = (member) => td.annotation[member].type;
  const rows = Array.from({ length: raw.rowCount }, (_, r) => r);
  if (resType === 'compact') {
    const members = [...membersToAlias.keys()];
    const dataset = rows.map((r) => members.map(
      (m) => transformValue(raw.columns[position.get(membersToAlias.get(m))][r], typeOf(m)),
    ));
    return { members, dataset };
  }
  const entries = [...membersToAlias];
  return rows.map((r) => Object.fromEntries(entries.map(
    ([m, alias]) => [m, transformValue(raw.columns[position.get(alias)][r], typeOf(m))],
  )));
}

/** Serde's `skip_serializing_if = "Option::is_none"`: absent and null fields are left out. */
function pick(obj, fields) {
  const out = {};
  for (const f of fields) {
    if (obj[f] !== undefined && obj[f] !== null) {
      out[f] = obj[f];
    }
  }
  return out;
}

const NORMALIZED_QUERY_FIELDS = ['measures', 'dimensions', 'timeDimensions', 'segments', 'limit',
  'offset', 'total', 'totalQuery', 'timezone', 'renewQuery', 'ungrouped', 'responseFormat',
  'filters', 'rowLimit', 'order', 'queryType'];
const TIME_DIMENSION_FIELDS = ['dimension', 'dateRange', 'compareDateRange', 'granularity'];
const ANNOTATED_ITEM_FIELDS = ['title', 'shortTitle', 'description', 'type', 'format', 'currency',
  'meta', 'drillMembers', 'drillMembersGrouped', 'granularity'];
const RESULT_FIELDS = ['query', 'lastRefreshTime', 'refreshKeyValues', 'usedPreAggregations',
  'transformedQuery', 'requestId', 'annotation', 'dataSource', 'dbType', 'extDbType', 'external',
  'slowQuery', 'total'];

function normalizedQuery(query) {
  if (query.filters && query.filters.length) {
    refuse('filters in the response query');
  }
  const out = pick(query, NORMALIZED_QUERY_FIELDS);
  if (out.timeDimensions) {
    out.timeDimensions = out.timeDimensions.map((t) => pick(t, TIME_DIMENSION_FIELDS));
  }
  if (out.order) {
    out.order = out.order.map(({ id, desc }) => ({ id, desc }));
  }
  return out;
}

/** RequestResultData as serde writes it: its own fields, in its order, then `data`. */
function resultData(root, data) {
  const out = pick(root, RESULT_FIELDS);
  out.query = normalizedQuery(root.query);
  out.slowQuery = Boolean(root.slowQuery);
  out.annotation = Object.fromEntries(Object.entries(root.annotation).map(
    ([kind, items]) => [kind, Object.fromEntries(Object.entries(items).map(
      ([member, item]) => [member, pick(item, ANNOTATED_ITEM_FIELDS)],
    ))],
  ));
  out.data = data;
  return out;
}

const toArrayBuffer = (json) => {
  const bytes = Buffer.from(JSON.stringify(json), 'utf8');
  return bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length);
};

native.getFinalQueryResult = async (transformDataObj, rawData, resultDataObj) => {
  calls.getFinalQueryResult += 1;
  return toArrayBuffer(resultData(resultDataObj, transformData(transformDataObj, rawData)));
};

native.getFinalQueryResultMulti = async (transformDataArr, rawDataArr, responseDataObj) => {
  calls.getFinalQueryResultMulti += 1;
  const { queryType, results, slowQuery } = responseDataObj;
  if (queryType !== 'regularQuery') {
    refuse(`queryType ${queryType}`);
  }
  if (results.length !== transformDataArr.length || results.length !== rawDataArr.length) {
    throw new Error(`Expected ${results.length} result data entries, got ${rawDataArr.length}`);
  }
  // get_pivot_query of a regular query: the first query, with its queryType
  const pivotQuery = { ...normalizedQuery(results[0].query), queryType };
  return toArrayBuffer({
    queryType,
    results: results.map((r, i) => resultData(r, transformData(transformDataArr[i], rawDataArr[i]))),
    pivotQuery,
    slowQuery: Boolean(slowQuery),
  });
};

module.exports = {
  calls, native, transformData, timeValue, codegen, flatbuffers,
};
