// Client.close() with an acquire still in flight: close() does not wait
// for it, but what that acquire holds afterwards is still ended: cut off
// after close(), it is settled; granted after close(), its Lock can be
// released. They failed when _settle returned once closed and release
// rejected "closed" (and baton-node closed its transport at close()):
// the lock was held by nobody until its lease (30 s by default) ended.
// Likewise a Lock held at close() is released by a Lock.release after it,
// and a call in flight at close() that must ask again (a 503) still ends
// as it would have (baton.d.ts: Lock.release "still works after
// close()"): over baton-node's HTTP/2 transport they failed "unavailable"
// ("the transport is closed", 5 s and 10 s of retries), not over fetch.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from './client.mjs';
import { listenProxy, waitFor } from './harness.mjs';

/**
 * A fake node: a POST whose wait is 0.001 (a settle) is granted token 9;
 * any other POST is answered with a grant of token 5 after `grantAfter`
 * ms (never when it is 0); a DELETE is recorded in `released`; a PATCH
 * (a renewal) is answered 503 after 100 ms the first time, then renewed.
 */
async function fakeNode(t, grantAfter) {
  const released = [], posts = [];
  let patches = 0;
  const { url } = await listenProxy(t, async (req, res) => {
    for await (const _ of req); // eslint-disable-line no-unused-vars
    const u = new URL(req.url, 'http://x');
    const grant = (token) => {
      res.writeHead(200, { 'content-type': 'application/json', 'lock-token': String(token) });
      res.end(JSON.stringify({ key: 'k', token, lease: 30, expires_at: '2030-01-01T00:00:00Z' }));
    };
    if (req.method === 'DELETE') {
      released.push(Number(req.headers['lock-token']));
      res.writeHead(200, { 'content-type': 'application/json' });
      return res.end(JSON.stringify({ key: 'k', released: true }));
    }
    if (req.method === 'POST') {
      posts.push(u.searchParams.get('wait'));
      if (u.searchParams.get('wait') === '0.001') return grant(9);
      if (grantAfter > 0) setTimeout(() => grant(5), grantAfter);
      return; // else parked
    }
    if (req.method === 'PATCH') {
      if (patches++ === 0) return setTimeout(() => res.writeHead(503, { 'content-type': 'application/json' }).end('{"error":"unavailable","message":"no active yet"}'), 100);
      res.writeHead(200, { 'content-type': 'application/json' });
      return res.end(JSON.stringify({ key: 'k', token: 5, lease: 40, expires_at: '2030-01-01T00:00:00Z' }));
    }
    res.writeHead(404).end();
  });
  return { url, released, posts };
}

test('an acquire cut off after close() is still settled', async (t) => {
  const n = await fakeNode(t, 0);
  const c = new Client({ addresses: [n.url] });
  const ac = new AbortController();
  const acquiring = c.acquire('k', { wait: 30, signal: ac.signal });
  while (n.posts.length === 0) await new Promise((r) => setTimeout(r, 10));
  await c.close(); // resolves at once: an acquire is not waited for
  ac.abort(new Error('gave up')); // the function's own deadline, say
  await assert.rejects(acquiring, /gave up/);
  await waitFor('the settle', 15000, async () => n.released.length > 0);
  assert.deepEqual(n.released, [9], 'the grant the node made for the cut-off acquire was never settled: held by nobody for its lease');
});

test('withLock granted after close() releases its lock', async (t) => {
  const n = await fakeNode(t, 200);
  const c = new Client({ addresses: [n.url] });
  const running = c.withLock('k', () => 'done');
  while (n.posts.length === 0) await new Promise((r) => setTimeout(r, 10));
  await c.close();
  const got = await running.then((v) => v, (e) => e);
  assert.deepEqual(n.released, [5], 'withLock ran fn under token 5, then could not release it (' + (got?.code ?? got) + '): held by nobody for its lease');
});

test('a Lock held at close() is released by Lock.release after it', async (t) => {
  const n = await fakeNode(t, 1);
  const c = new Client({ addresses: [n.url] });
  const l = await c.acquire('k');
  await c.close();
  await l.release();
  assert.deepEqual(n.released, [5]);
});

test('a renewal in flight at close() that must ask again renews', async (t) => {
  const n = await fakeNode(t, 1);
  const c = new Client({ addresses: [n.url] });
  const l = await c.acquire('k');
  const renewing = l.renew(40);
  await c.close(); // resolves at once: a renewal is not waited for
  await renewing;
  assert.equal(l.lease, 40);
  await l.release();
  assert.deepEqual(n.released, [5]);
});
