'use strict';
/**
 * The decoding half of the test stand-in for `@cubejs-backend/native`'s
 * parseCubestoreResultMessage (see native-standin.cjs for the rules and why it exists),
 * built on the generated flatbuffers code of one installed @cubejs-backend/cubestore-driver:
 * `cubestoreResultDecoder(driverDir)`. Shared by native-standin.cjs (Cube's driver in
 * tests/node) and cube-api-17/native-standin.cjs (a Cube 1.7 API server, with its own
 * node_modules). No side effects on load.
 */

const path = require('path');

function cubestoreResultDecoder(driverDir) {
  const resolveFromDriver = (id) => require.resolve(id, { paths: [driverDir] });
  // The exact module instances the driver itself uses.
  const flatbuffers = require(resolveFromDriver('flatbuffers'));
  const codegen = require(path.join(driverDir, 'dist', 'codegen', 'index.js'));

  const TABLE_FIRST_FIELD = 4; // vtable offset of field 0 (HttpRow.values)

  function decodeResultSet(resultSet) {
    const columns = [];
    const columnCount = resultSet.columnsLength();
    for (let i = 0; i < columnCount; i++) {
      const name = resultSet.columns(i);
      if (!name) {
        throw new Error('Column name is not defined');
      }
      columns.push(name);
    }

    const rows = [];
    if (!columns.length) {
      return rows;
    }

    const rowCount = resultSet.rowsLength();
    for (let r = 0; r < rowCount; r++) {
      const row = resultSet.rows(r, new codegen.HttpRow());
      if (!row || !row.bb.__offset(row.bb_pos, TABLE_FIRST_FIELD)) {
        throw new Error('Null row');
      }
      const obj = {};
      const valueCount = row.valuesLength();
      for (let c = 0; c < columns.length; c++) {
        if (c < valueCount) {
          const value = row.values(c, new codegen.HttpColumnValue()).stringValue();
          obj[columns[c]] = value === null || value === undefined ? null : value;
        } else {
          obj[columns[c]] = null;
        }
      }
      rows.push(obj);
    }
    return rows;
  }

  /**
   * Decodes one HttpMessage holding an HttpResultSet into its rows (objects keyed by column).
   * Error texts follow ParseError's Display in Cube's native decoder.
   */
  function decodeCubestoreResultMessage(message) {
    const bytes = message instanceof Uint8Array ? message : new Uint8Array(message);
    const httpMessage = codegen.HttpMessage.getRootAsHttpMessage(new flatbuffers.ByteBuffer(bytes));
    switch (httpMessage.commandType()) {
      case codegen.HttpCommand.HttpResultSet: {
        const resultSet = httpMessage.command(new codegen.HttpResultSet());
        if (!resultSet) {
          throw new Error('Empty resultSet');
        }
        return decodeResultSet(resultSet);
      }
      case codegen.HttpCommand.HttpError: {
        const error = httpMessage.command(new codegen.HttpError());
        throw new Error(`Error: ${(error && error.error()) || 'Unknown error'}`);
      }
      case codegen.HttpCommand.HttpQueryResult:
        throw new Error(
          'test stand-in for @cubejs-backend/native decodes only the legacy HttpResultSet, ' +
          'but the server answered HttpQueryResult (Arrow); cubequeue must always answer HttpResultSet'
        );
      default:
        throw new Error('Unsupported command');
    }
  }

  return { decodeCubestoreResultMessage, codegen, flatbuffers };
}

module.exports = { cubestoreResultDecoder };
