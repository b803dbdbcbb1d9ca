// baton-node.js's stream capacity. A node takes at most 1000 concurrent
// HTTP/2 streams on one connection (MaxConcurrentStreams), and an acquire
// that waits holds its stream for as long as it waits. The http2
// transport kept exactly two connections per address, so a client with
// more than 2000 acquires waiting had every stream of both taken: its
// next calls (a renewal of a lock it holds, its release, a read, the
// acquires past 2000) were queued by node:http2 until some waiter ended,
// and a lock kept alive by renewals ran out while its renewal waited. The
// Go client keeps streams free for short calls and dials extra
// connections when its are full (api/client.go, shortStreams); the http2
// transport must too. It runs the http2 transport whatever
// BATON_JS_TRANSPORT says (fetch opens a connection per call).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setMaxListeners } from 'node:events';
import { Client } from '../baton-node.js';
import { startNode, waitFor, NET } from './harness.mjs';

/** baton's MaxConcurrentStreams (handlers/server.go). */
const NODE_STREAMS = 1000;

test('a renewal, a read and every acquire go out while more acquires wait than two connections have streams', { timeout: 90000 }, async (t) => {
  const n = await startNode(t, { host: NET + '.45' });
  const holder = new Client({ addresses: [n.url] });
  t.after(() => holder.close());
  const c = new Client({ addresses: [n.url] });
  t.after(() => c.close());
  const held = await holder.acquire('streams/busy', { lease: 60 });
  const mine = await c.acquire('streams/mine', { lease: 60 });
  const stop = new AbortController();
  setMaxListeners(0, stop.signal); // one signal for every waiter
  const waiting = 2 * NODE_STREAMS + 10;
  const waits = Array.from({ length: waiting }, () => c.acquire('streams/busy', { lease: 10, signal: stop.signal }).catch((e) => e));
  t.after(async () => {
    stop.abort();
    await Promise.allSettled(waits);
  });
  await waitFor(`${waiting} waiters on the node`, 30000, async () => (await n.get('/locks/streams/busy')).waiters === waiting);
  const late = (what) => new Promise((r) => setTimeout(r, 15000, what + ' still unanswered after 15 s').unref());
  assert.equal(await Promise.race([mine.renew(60).then(() => 'renewed'), late('the renewal')]), 'renewed');
  assert.equal(await Promise.race([c.status('streams/mine').then((s) => String(s.holder?.token)), late('the read')]), String(mine.token));
  assert.equal(await Promise.race([mine.release().then(() => 'released'), late('the release')]), 'released');
  stop.abort();
  for (const r of await Promise.all(waits)) assert.equal(r?.name, 'AbortError', `an aborted acquire ended with ${r}`);
  await held.release();
  await waitFor('no waiter left', 10000, async () => (await n.get('/locks/streams/busy')).waiters === 0);
});
