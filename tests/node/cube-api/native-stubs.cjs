'use strict';

/*
 * TEST-ONLY stand-ins for the parts of `@cubejs-backend/native` 0.35.81 that an unmodified
 * Cube API server touches on this test's path. The package's Rust binary is downloaded by
 * a postinstall script from GitHub, and the test installs with `npm ci --ignore-scripts`
 * (no network to GitHub), so every native call would throw "Unable to load
 * @cubejs-backend/native". Exactly these are replaced, on the one module instance the Cube
 * packages resolve, before any of them is loaded:
 *
 *   - `setupLogger`: the native logger bridge, called while the API server starts; a
 *     no-op (Cube's own JS logger still gets every message).
 *   - `NativeInstance.prototype.newJinjaEngine`: the Jinja engine of YAML models, created
 *     by every schema compile (`YamlCompiler.initFromPythonContext`) even for a model
 *     without YAML. The test's model is JavaScript, so no template is ever rendered; the
 *     stand-in engine throws if one is, so a test that needs it fails loudly.
 * Without either stand-in the test fails with "Unable to load @cubejs-backend/native"
 * (checked).
 *
 * Nothing else is stubbed: the API gateway, the schema compiler, the query orchestrator,
 * the cubestore driver (it decodes Cube Store's flatbuffers replies in JavaScript in the
 * 0.35 line, so the 1.x `parseCubestoreResultMessage` stand-in of ../native-standin.cjs is
 * not needed) and the postgres driver are the real npm code. Any other native call still
 * fails with the real error.
 */

const native = require('@cubejs-backend/native');

native.setupLogger = () => undefined;

native.NativeInstance.prototype.newJinjaEngine = function newJinjaEngine() {
  const refuse = () => {
    throw new Error('Jinja templates need @cubejs-backend/native (stubbed in this test)');
  };
  return { loadTemplate: refuse, renderTemplate: refuse };
};

module.exports = { stubbed: ['setupLogger', 'NativeInstance.prototype.newJinjaEngine'] };
