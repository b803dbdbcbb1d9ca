// An acquire answered 410 grant_ended (its grant ran out unclaimed on a new
// active while the client was stuck on a paused node: nothing is held)
// starts again with a fresh Idempotency-Key and what is left of its wait.
// Found by a tester of the Go client after a SIGSTOP/SIGCONT of the active.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Client, BatonError } from './client.mjs';
import { answeringNode as fakeNode } from './harness.mjs';

const ended = [410, { error: 'grant_ended', message: 'the grant of this Idempotency-Key was released or expired' }];

test('an acquire answered grant_ended starts again with a new key and the wait left', async (t) => {
  const n = await fakeNode(t, [ended, [200, { key: 'k', token: 7, lease: 60, expires_at: '2030-01-01T00:00:00Z' }]]);
  const c = new Client({ addresses: [n.url] });
  const l = await c.acquire('k', { wait: 60 });
  assert.equal(l.token, 7);
  assert.equal(n.seen.length, 2);
  assert.ok(n.seen[0].key && n.seen[1].key && n.seen[0].key !== n.seen[1].key, JSON.stringify(n.seen));
  const w = Number(n.seen[1].wait);
  assert.ok(w > 0 && w <= 60, 'second wait ' + n.seen[1].wait);
});

test('an acquire answered grant_ended again and again fails with it', async (t) => {
  const n = await fakeNode(t, [ended]);
  const c = new Client({ addresses: [n.url] });
  await assert.rejects(c.acquire('k'), (e) => e instanceof BatonError && e.code === 'grant_ended');
  assert.equal(n.seen.length, 11);
});

// As the Go client (errors.Is(err, ErrTimeout)): a grant_ended that comes
// once the wait has run out is a timeout, 408: not granted within the
// wait, nothing held (it was thrown as grant_ended).
test('an acquire answered grant_ended after its wait ran out fails with timeout', async (t) => {
  const n = await fakeNode(t, [ended], 100);
  const c = new Client({ addresses: [n.url] });
  await assert.rejects(c.acquire('k', { wait: 0.05 }), (e) =>
    e instanceof BatonError && e.status === 408 && e.code === 'timeout' && e.cause?.code === 'grant_ended');
  assert.equal(n.seen.length, 1);
});
