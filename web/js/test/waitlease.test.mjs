// A lock granted after a wait in the queue longer than its lease stays
// held: the node runs the lease from the grant, but the Lock counted it
// from the acquire's send, so its lease watch fired at once and `lost`
// aborted ("the lease ran out before a renewal succeeded") although the
// node held the lock for the client, with or without keepAlive(). The
// client side of etcd-io/etcd#9921 ("Lock response when lease has
// expired") and #11456.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from './client.mjs';
import { startNode, sleep } from './harness.mjs';

test('a lock granted after a wait longer than its lease is not lost', async (t) => {
  const n = await startNode(t);
  const c = new Client({ addresses: [n.url] });
  t.after(() => c.close());
  const h = await c.acquire('k', { lease: 60 });
  const LEASE = 2; // seconds: room for a loaded machine
  const waiter = c.acquire('k', { lease: LEASE });
  await sleep(LEASE * 1500); // the waiter waits longer than its lease
  await h.release();
  const l = await waiter;
  const stop = l.keepAlive();
  await sleep(LEASE * 250);
  assert.ok(!l.lost.aborted, 'lost: ' + l.lost.reason?.message);
  assert.equal((await c.status('k')).holder?.token, l.token);
  stop();
  await l.release();
});
