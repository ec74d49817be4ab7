'use strict';

/*
 * TEST-ONLY stand-in for ONE function of `@cubejs-backend/native`: parseCubestoreResultMessage.
 *
 * Cube's WebSocketConnection hands every non-error reply from Cube Store to
 * `parseCubestoreResultMessage` of `@cubejs-backend/native`, a Rust addon whose prebuilt
 * binary is downloaded by a postinstall script from GitHub. We install with
 * `--ignore-scripts` (CI cannot reach GitHub), so the binary is absent and the real
 * function would throw "Unable to load @cubejs-backend/native".
 *
 * Cube's own transport tests (packages/cubejs-cubestore-driver/test/websocket-connection.test.ts)
 * stub exactly this step with `jest.mock('@cubejs-backend/native', ...)`. We do the same,
 * but instead of a canned answer we really decode the legacy `HttpResultSet` with the
 * driver's OWN generated flatbuffers code (`dist/codegen` of @cubejs-backend/cubestore-driver),
 * following the rules of Cube's native decoder
 * (rust/cube/cubeorchestrator/src/query_message_parser.rs, `parse_legacy`):
 *   - a column with an empty name fails with "Column name is not defined";
 *   - a row without its values vector fails with "Null row";
 *   - an absent string_value is SQL NULL (JS null); every present cell stays a string;
 *   - extra cells beyond the columns are dropped, short rows are padded with null;
 *   - no columns at all gives an empty result (zero rows).
 * The rows are wrapped in the real JS `ResultWrapper` class of @cubejs-backend/native,
 * which is what the real function returns.
 *
 * Everything else of @cubejs-backend/native stays the real module: the queue and cache
 * path of cubestore-driver 1.7.43 and query-orchestrator 1.7.43 call no other function of
 * it (checked: `native_1.parseCubestoreResultMessage` in WebSocketConnection.js is the only
 * use; logging and getEnv come from @cubejs-backend/shared, which is pure JS). Any other
 * native call therefore still fails loudly with the real "Unable to load" error.
 *
 * `HttpQueryResult` (Arrow IPC) is NOT decoded: cubequeue always answers the legacy
 * `HttpResultSet`, even though the 1.7.43 driver asks for Arrow once the advertised
 * version is >= 1.6.66. Getting an Arrow reply is therefore a test failure here.
 *
 * Injection: require this module before the driver (each test file does, and
 * `node --require ./native-standin.cjs` works too). It replaces the export on the one
 * module instance that cubestore-driver resolves, so the driver's
 * `(0, native_1.parseCubestoreResultMessage)(msg)` calls the stand-in.
 */

const path = require('path');

const { cubestoreResultDecoder } = require('./cubestore-result-decoder.cjs');

const driverDir = path.dirname(require.resolve('@cubejs-backend/cubestore-driver/package.json'));
const resolveFromDriver = (id) => require.resolve(id, { paths: [driverDir] });

// The exact module instances the driver itself uses.
const native = require(resolveFromDriver('@cubejs-backend/native'));
const { decodeCubestoreResultMessage, codegen, flatbuffers } = cubestoreResultDecoder(driverDir);

async function parseCubestoreResultMessage(message) {
  return new native.ResultWrapper(decodeCubestoreResultMessage(message));
}
parseCubestoreResultMessage.isTestStandIn = true;

native.parseCubestoreResultMessage = parseCubestoreResultMessage;

module.exports = {
  parseCubestoreResultMessage,
  decodeCubestoreResultMessage,
  native,
  codegen,
  flatbuffers,
};
