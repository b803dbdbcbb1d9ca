// The client under test: BATON_JS_TRANSPORT=fetch (the default) is
// baton.js over the runtime's fetch; BATON_JS_TRANSPORT=http2 is
// baton-node.js, the same client over node:http2 (h2c). go test ./web runs
// every test file once with each; both must hold every SPEC section 4
// behaviour.
import * as fetchModule from '../baton.js';
import * as nodeModule from '../baton-node.js';

export const TRANSPORT = process.env.BATON_JS_TRANSPORT || 'fetch';
if (TRANSPORT !== 'fetch' && TRANSPORT !== 'http2') {
  throw new Error('BATON_JS_TRANSPORT must be fetch or http2, not ' + JSON.stringify(TRANSPORT));
}
const m = TRANSPORT === 'http2' ? nodeModule : fetchModule;
export const { Client, BatonError, Lock } = m;
