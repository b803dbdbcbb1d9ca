// keepAlive after a renewal to a shorter lease (Lock.renew(lease)): the
// keep-alive slept on the schedule of the lease it last renewed (half of
// 30 s) and the 2 s lease ran out under it, the lock lost and taken back
// by the node (breaker report of 2026-12-05; Redisson's watchdog lost
// locks the same way). A renewal wakes it: it renews at half the new
// lease.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from './client.mjs';
import { startNode } from './harness.mjs';

test('a keep-alive follows a renewal to a shorter lease', async (t) => {
  const n = await startNode(t);
  const c = new Client({ addresses: [n.url] });
  t.after(() => c.close());
  const l = await c.acquire('shorter', { lease: 30 });
  const stop = l.keepAlive();
  await l.renew(2);
  await new Promise((r) => setTimeout(r, 5000)); // two and a half of the new leases
  assert.ok(!l.lost.aborted, 'lost: ' + l.lost.reason?.message);
  const s = await c.status('shorter');
  assert.equal(s.holders?.[0]?.token ?? s.token, l.token, JSON.stringify(s));
  assert.equal(l.lease, 2);
  stop();
  await l.release();
});
