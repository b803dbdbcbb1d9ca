// Waits and leases of more than 2^31 ms (24.8 days) that the node accepts
// (wait_max 0: no cap; lease_max up to 100 years). Timers hold at most
// 2^31-1 ms: a longer one fired after 1 ms (Node: TimeoutOverflowWarning),
// and AbortSignal.timeout refused one over 2^32-1 ms. An acquire with
// wait: 3e6 (35 days) had each attempt cut at once and failed
// "unavailable" although its node answered; with wait: 1e7 it threw a
// RangeError (not a BatonError); a Lock of a 3e6 s lease aborted `lost`
// at once although the node held it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Client, BatonError } from './client.mjs';
import { startNode, sleep, waitFor } from './harness.mjs';

test('an acquire waiting more than 2^31 ms waits, and is granted', async (t) => {
  const n = await startNode(t);
  const c = new Client({ addresses: [n.url], retryFor: 0 });
  t.after(() => c.close());
  for (const wait of [3e6, 1e7]) {
    const h = await c.acquire('k', { lease: 60 });
    const waiter = c.acquire('k', { lease: 60, wait });
    waiter.catch(() => {});
    await waitFor('the waiter queued', 5000, async () => (await c.status('k')).waiters === 1);
    await h.release();
    const l = await waiter;
    assert.notEqual(l.token, h.token, 'wait ' + wait);
    await l.release();
  }
});

test('a wait of Infinity is refused naming wait', async (t) => {
  const n = await startNode(t);
  const c = new Client({ addresses: [n.url], retryFor: 0 });
  t.after(() => c.close());
  await assert.rejects(c.acquire('k', { wait: Infinity }), (e) => e instanceof BatonError && e.code === 'invalid_argument' && e.field === 'wait');
});

test('a lock of a lease over 2^31 ms is not lost at once', async (t) => {
  const n = await startNode(t, { args: ['--lease-max', '100000h'] });
  const c = new Client({ addresses: [n.url] });
  t.after(() => c.close());
  const l = await c.acquire('k', { lease: 3e6 });
  const stop = l.keepAlive();
  await sleep(100); // an overflowed timer fires after 1 ms
  assert.ok(!l.lost.aborted, 'lost: ' + l.lost.reason?.message);
  await l.renew();
  await sleep(100);
  assert.ok(!l.lost.aborted, 'lost after a renewal: ' + l.lost.reason?.message);
  stop();
  await l.release();
});
