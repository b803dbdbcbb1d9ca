// An acquire answered 409 superseded: a repeat under its own
// Idempotency-Key took over its place. Every attempt of one acquire sends
// that key, so the repeat was one of this acquire's own earlier attempts,
// given up unanswered (a node paused past the probe's bound: the attempt
// was cut off and repeated, and when the node ran again the cut-off copy
// reached the queue after the live one). The place is still there, kept
// for a repeat: the acquire repeats under the same key instead of failing
// with a place it still had (breaker T, 2026-12-06: a 20 s pause of a
// single node ended an acquire with 110 s of its wait left).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Client, BatonError } from './client.mjs';
import { answeringNode as fakeNode } from './harness.mjs';

const superseded = [409, { error: 'superseded', message: 'a repeat of this request with the same Idempotency-Key took over its place' }];
const granted = [200, { key: 'k', token: 7, lease: 60, expires_at: '2030-01-01T00:00:00Z' }];

test('an acquire answered superseded repeats under the same key and gets its grant', async (t) => {
  const n = await fakeNode(t, [superseded, superseded, granted]);
  const c = new Client({ addresses: [n.url] });
  const l = await c.acquire('k', { wait: 60 });
  assert.equal(l.token, 7);
  assert.equal(n.seen.length, 3);
  assert.ok(n.seen[0].key && n.seen.every((s) => s.key === n.seen[0].key), JSON.stringify(n.seen));
  await c.close();
});

test('an acquire answered superseded again and again fails with it', async (t) => {
  const n = await fakeNode(t, [superseded]);
  const c = new Client({ addresses: [n.url] });
  await assert.rejects(c.acquire('k'), (e) => e instanceof BatonError && e.status === 409 && e.code === 'superseded');
  assert.equal(n.seen.length, 11);
  await c.close();
});
