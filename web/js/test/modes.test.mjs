// Issue 14 through the JavaScript client: owner, mode and limit reach the
// node (a semaphore, a read/write lock), status shows holders with their
// owners and modes, and bad values come back as 400s naming the field.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Client, BatonError } from '../baton.js';
import { startNode, waitFor } from './harness.mjs';

async function rejectsWith(p, status, code, field) {
  await assert.rejects(p, (e) => {
    assert.ok(e instanceof BatonError, 'not a BatonError: ' + e);
    assert.equal(e.status, status, e.message);
    assert.equal(e.code, code, e.message);
    if (field !== undefined) assert.equal(e.field, field, e.message);
    return true;
  });
}

test('a semaphore of 2: owner, mode and limit are sent and shown', async (t) => {
  const n = await startNode(t);
  const c = new Client({ addresses: [n.url] });
  const a = await c.acquire('quota', { limit: 2, mode: 'shared', owner: 'worker-a', lease: 30 });
  const b = await c.acquire('quota', { mode: 'shared', owner: 'worker-b', lease: 30 });
  const third = c.acquire('quota', { mode: 'shared', owner: 'worker-c', lease: 30 });
  await waitFor('a waiter on quota', 15000, async () => (await c.status('quota')).waiters === 1);
  const s = await c.status('quota');
  assert.equal(s.limit, 2);
  assert.deepEqual(s.holders.map((h) => [h.token, h.owner, h.mode]), [[a.token, 'worker-a', 'shared'], [b.token, 'worker-b', 'shared']]);
  assert.equal(s.holder.token, a.token);
  assert.equal(s.oldest_waiter_owner, 'worker-c');
  await rejectsWith(c.acquire('quota', { limit: 3, mode: 'shared', wait: 0.1 }), 409, 'limit_mismatch', 'limit');
  await b.release();
  const l = await third;
  assert.ok(l.token > b.token);
  await a.release();
  await l.release();
});

test('a read/write lock: a writer waits for the readers and holds alone', async (t) => {
  const n = await startNode(t);
  const c = new Client({ addresses: [n.url] });
  const r1 = await c.acquire('cfg', { mode: 'shared', limit: 8, owner: 'reader' });
  const w = c.acquire('cfg', { mode: 'exclusive', owner: 'writer' });
  await waitFor('a waiter on cfg', 15000, async () => (await c.status('cfg')).waiters === 1);
  await r1.release();
  const wl = await w;
  const s = await c.status('cfg');
  assert.equal(s.holders.length, 1);
  assert.equal(s.holder.mode, 'exclusive');
  assert.equal(s.holder.owner, 'writer');
  await wl.release();
});

test('bad owner, mode and limit are 400s naming the field', async (t) => {
  const n = await startNode(t);
  const c = new Client({ addresses: [n.url] });
  await rejectsWith(c.acquire('k', { limit: 0 }), 400, 'invalid_argument', 'limit');
  await rejectsWith(c.acquire('k', { limit: 1.5 }), 400, 'invalid_argument', 'limit');
  await rejectsWith(c.acquire('k', { limit: 10001 }), 400, 'invalid_argument', 'limit');
  await rejectsWith(c.acquire('k', { mode: 'read' }), 400, 'invalid_argument', 'mode');
  await rejectsWith(c.acquire('k', { owner: 'a\nb' }), 400, 'invalid_argument', 'owner');
  await rejectsWith(c.acquire('k', { owner: 'x'.repeat(129) }), 400, 'invalid_argument', 'owner');
  assert.equal((await c.list()).total, 0);
});
