// A lock granted after a wait in the queue longer than its lease stays
// held: the node runs the lease from the grant, but the Lock counted it
// from the acquire's send, so its lease watch fired at once and `lost`
// aborted ("the lease ran out before a renewal succeeded") although the
// node held the lock for the client, with or without keepAlive(). The
// client side of etcd-io/etcd#9921 ("Lock response when lease has
// expired") and #11456.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Client, BatonError } from './client.mjs';
import { startNode, sleep, listenProxy } from './harness.mjs';

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

// A grant answered after more than half its lease is renewed at once; a
// renewal answered not_held means the grant ended before its answer came
// (a proxy held the answer back): acquire rejects with grant_ended, as
// the Go client's ErrGrantEnded. It returned a Lock already lost.
test('a late grant whose immediate renewal is refused rejects with grant_ended', async (t) => {
  const patched = [];
  const { url } = await listenProxy(t, async (req, res) => {
    for await (const _ of req); // eslint-disable-line no-unused-vars
    if (req.method === 'POST') await sleep(50); // the answer comes after the 10 ms lease
    else patched.push(req.method);
    const [status, body] = req.method === 'POST'
      ? [200, { key: 'k', token: 7, lease: 0.01, expires_at: '2030-01-01T00:00:00Z' }]
      : [404, { error: 'not_held', message: 'nobody holds it' }];
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  });
  const c = new Client({ addresses: [url] });
  t.after(() => c.close());
  await assert.rejects(c.acquire('k', { lease: 0.01 }), (e) => e instanceof BatonError && e.status === 410 && e.code === 'grant_ended');
  assert.equal(patched[0], 'PATCH', 'no renewal was asked: ' + patched);
});
