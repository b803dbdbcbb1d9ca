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
// (a proxy held the answer back): nothing is held, and acquire starts
// again with a new Idempotency-Key for what is left of the wait, as after
// a 410 grant_ended and as the Go client does
// (TestAcquireWhoseLateGrantEndedStartsAgain). It rejected with
// grant_ended at once.
function lateGrantProxy(t, posts, patched) {
  return listenProxy(t, async (req, res) => {
    for await (const _ of req); // eslint-disable-line no-unused-vars
    if (req.method === 'POST') posts.push({ key: req.headers['idempotency-key'], wait: new URL(req.url, 'http://x').searchParams.get('wait') });
    else patched.push(req.method);
    if (posts.length === 1 && req.method === 'POST') await sleep(50); // the answer comes after the 10 ms lease
    const [status, body] = req.method !== 'POST'
      ? [404, { error: 'not_held', message: 'nobody holds it' }]
      : posts.length === 1
        ? [200, { key: 'k', token: 7, lease: 0.01, expires_at: '2030-01-01T00:00:00Z' }]
        : [200, { key: 'k', token: 8, lease: 60, expires_at: '2030-01-01T00:00:00Z' }];
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  });
}

test('a late grant whose immediate renewal is refused starts the acquire again', async (t) => {
  const posts = [], patched = [];
  const { url } = await lateGrantProxy(t, posts, patched);
  const c = new Client({ addresses: [url] });
  t.after(() => c.close());
  const l = await c.acquire('k', { lease: 0.01, wait: 60 });
  assert.equal(l.token, 8, 'not the second acquire\'s grant');
  assert.deepEqual(patched, ['PATCH'], 'one renewal of the late grant');
  assert.equal(posts.length, 2);
  assert.ok(posts[0].key && posts[1].key && posts[0].key !== posts[1].key, 'Idempotency-Keys ' + JSON.stringify(posts));
  assert.equal(posts[0].wait, '60');
  assert.ok(Number(posts[1].wait) > 0 && Number(posts[1].wait) < 60, 'second wait ' + posts[1].wait + ': not what was left');
});

test('a late grant ended when the wait is spent rejects with timeout', async (t) => {
  const posts = [], patched = [];
  const { url } = await lateGrantProxy(t, posts, patched);
  const c = new Client({ addresses: [url] });
  t.after(() => c.close());
  // The grant is answered 50 ms after the send: past the 40 ms wait.
  await assert.rejects(c.acquire('k', { lease: 0.01, wait: 0.04 }), (e) => e instanceof BatonError && e.status === 408 && e.code === 'timeout' && e.cause?.code === 'grant_ended' &&
    /ended before read/.test(e.message));
  assert.deepEqual(patched, ['PATCH'], 'one renewal of the late grant');
  assert.equal(posts.length, 1, 'no new acquire past the wait');
});
