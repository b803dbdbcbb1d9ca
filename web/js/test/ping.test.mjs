// The http2 transport (baton-node.js) pings a connection that has calls in
// flight: a node that went silent (paused, its host gone, a link cut
// without a reset) breaks the connection after PING_WAIT_MS unanswered, and a
// waiting acquire moves on to the next address under its Idempotency-Key,
// as the Go client's acquires do (SPEC section 4). Without it the acquire
// waited for ever on the silent connection, even for a grant made for it.
// It runs the http2 transport whatever BATON_JS_TRANSPORT says (fetch has
// no ping).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '../baton-node.js';
import { startNode, waitFor, freezableProxy, NET } from './harness.mjs';

test('an acquire waiting on a connection gone silent moves on to the next address', async (t) => {
  const n = await startNode(t, { host: NET + '.22' });
  const holder = new Client({ addresses: [n.url] });
  t.after(() => holder.close());
  const held = await holder.acquire('ping/1', { lease: 60 });
  const proxy = await freezableProxy(t, n);
  const c = new Client({ addresses: [proxy.url, n.url] }); // the first call goes through the proxy
  t.after(() => c.close());
  const waiting = c.acquire('ping/1', { lease: 60 });
  waiting.catch(() => {});
  await waitFor('one waiter', 15000, async () => (await n.get('/locks/ping/1')).waiters === 1);
  proxy.freeze();
  await held.release(); // granted to the waiter: the answer goes nowhere
  const l = await Promise.race([
    waiting,
    new Promise((r) => setTimeout(r, 30000, null).unref()),
  ]);
  assert.ok(l, 'the acquire still waits on the silent connection 30 s on');
  assert.equal((await n.get('/locks/ping/1')).holder?.token, l.token, 'the grant made while the connection was silent');
  await l.release();
});
