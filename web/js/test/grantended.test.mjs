// An acquire answered 410 grant_ended (its grant ran out unclaimed on a new
// active while the client was stuck on a paused node: nothing is held)
// starts again with a fresh Idempotency-Key and what is left of its wait.
// Found by a tester of the Go client after a SIGSTOP/SIGCONT of the active.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Client, BatonError } from './client.mjs';
import { listenProxy } from './harness.mjs';

/** A fake node answering POSTs with answers[i] (the last one repeated). */
async function fakeNode(t, answers) {
  const seen = [];
  const { url } = await listenProxy(t, async (req, res) => {
    for await (const _ of req); // eslint-disable-line no-unused-vars
    const u = new URL(req.url, 'http://x');
    seen.push({ key: req.headers['idempotency-key'], wait: u.searchParams.get('wait') });
    const [status, body] = answers[Math.min(seen.length, answers.length) - 1];
    const h = { 'content-type': 'application/json' };
    if (status === 200) h['lock-token'] = String(body.token);
    res.writeHead(status, h);
    res.end(JSON.stringify(body));
  });
  return { url, seen };
}

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
