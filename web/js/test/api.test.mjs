// Every call of the client and every error code it reports, against a
// real baton node.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { Client, BatonError, Lock } from './client.mjs';
import { startNode, freePort, sleep, waitFor, HOST } from './harness.mjs';

/** Rejects with a BatonError of this status and code (and field). */
async function rejectsWith(p, status, code, field) {
  await assert.rejects(p, (e) => {
    assert.ok(e instanceof BatonError, 'not a BatonError: ' + e);
    assert.equal(e.status, status, e.message);
    assert.equal(e.code, code, e.message);
    if (field !== undefined) assert.equal(e.field, field, e.message);
    assert.ok(e.message.length > 0);
    return true;
  });
}

test('the module is under 20 KB unminified', () => {
  const n = readFileSync(new URL('../baton.js', import.meta.url)).length;
  assert.ok(n < 20 * 1024, `baton.js is ${n} bytes`);
});

test('acquire, status, renew, list, cluster, release', async (t) => {
  const n = await startNode(t);
  const c = new Client({ addresses: [n.url] });

  const l = await c.acquire('orders/42', { lease: 10 });
  assert.ok(l instanceof Lock);
  assert.equal(l.key, 'orders/42');
  assert.ok(Number.isSafeInteger(l.token) && l.token > 2 ** 32, 'token ' + l.token);
  assert.ok(l.expiresAt instanceof Date);
  assert.ok(Math.abs(l.expiresAt.getTime() - Date.now() - 10000) < 2000, 'expiresAt ' + l.expiresAt.toISOString());
  assert.equal(l.lost.aborted, false);

  const s = await c.status('orders/42');
  assert.equal(s.key, 'orders/42');
  assert.equal(s.holder.token, l.token);
  assert.equal(s.waiters, 0);

  const before = l.expiresAt.getTime();
  await l.renew(30);
  assert.equal(l.lease, 30);
  assert.ok(l.expiresAt.getTime() > before + 15000, 'renew(30) moved expiresAt to ' + l.expiresAt.toISOString());
  assert.equal((await c.status('orders/42')).holder.lease, 30);

  const others = [];
  for (const k of ['orders/43', 'orders/44', 'users/1']) others.push(await c.acquire(k, { lease: 10 }));
  const all = await c.list();
  assert.equal(all.total, 4);
  assert.deepEqual(all.locks.map((x) => x.key), ['orders/42', 'orders/43', 'orders/44', 'users/1']);
  const page1 = await c.list({ prefix: 'orders/', limit: 2 });
  assert.deepEqual(page1.locks.map((x) => x.key), ['orders/42', 'orders/43']);
  assert.equal(page1.total, 3);

  const cl = await c.cluster();
  assert.equal(cl.role, 'active');
  assert.equal(cl.self, n.url);
  assert.ok(cl.last_token >= others[2].token);

  await l.release();
  await l.release(); // a second call changes nothing
  assert.equal((await c.status('orders/42')).holder, null);
  assert.equal(l.lost.aborted, false, 'a release is not a loss');
  for (const o of others) await o.release();
  assert.equal((await c.list()).total, 0);
});

test('a key with spaces, slashes and non-ASCII reaches the server as written', async (t) => {
  const n = await startNode(t);
  const c = new Client({ addresses: n.url });
  const key = 'a b/ü?x=1#y/%41';
  const l = await c.acquire(key, { lease: 5 });
  assert.equal(l.key, key);
  assert.equal((await c.status(key)).holder.token, l.token);
  await l.release();
});

test('a key with "." or ".." segments reaches the server as written', async (t) => {
  // fetch's URL parser removes dot segments (also written %2e) before the
  // request leaves: "a/../b" would lock "b".
  const n = await startNode(t);
  const c = new Client({ addresses: n.url });
  for (const key of ['a/../b', './x', 'x/.', '../..']) {
    const l = await c.acquire(key, { lease: 5 });
    assert.equal(l.key, key);
    assert.equal((await c.status(key)).holder.token, l.token);
    assert.deepEqual((await c.list()).locks.map((x) => x.key), [key]);
    await l.release();
  }
});

test('the keys "." and ".." are refused as invalid, every call alike', async (t) => {
  // No path carries them through fetch's URL parser: /locks/.. (or
  // %2E%2E) became "/", so acquire('..') was a 405 on the status page's
  // route and status('..') a SyntaxError on its HTML; /locks/. became
  // /locks/, the empty key (consul#3476, #1409: keys a URL path mangles).
  const n = await startNode(t);
  const c = new Client({ addresses: [n.url] });
  for (const key of ['.', '..']) {
    await rejectsWith(c.acquire(key, { wait: 0.1 }), 400, 'invalid_argument', 'key');
    await rejectsWith(c.status(key), 400, 'invalid_argument', 'key');
    await rejectsWith(c.renew(key, 1), 400, 'invalid_argument', 'key');
    await rejectsWith(c.release(key, 1), 400, 'invalid_argument', 'key');
  }
  assert.equal((await c.list()).total, 0);
});

test('error codes', async (t) => {
  const n = await startNode(t, { args: ['--max-waiters-per-key', '1'] });
  const c = new Client({ addresses: [n.url] });
  const l = await c.acquire('e/1', { lease: 30 });

  await t.test('timeout: 408, not granted', async () => {
    await rejectsWith(c.acquire('e/1', { wait: 0.2 }), 408, 'timeout');
    const s = await c.status('e/1');
    assert.equal(s.holder.token, l.token);
    assert.equal(s.waiters, 0);
  });
  await t.test('invalid_argument names the field; nothing changes', async () => {
    await rejectsWith(c.acquire('e/2', { lease: -1 }), 400, 'invalid_argument', 'lease');
    await rejectsWith(c.acquire('e/2', { wait: 'soon' }), 400, 'invalid_argument', 'wait');
    await rejectsWith(c.acquire('e/2', { mode: 'sideways' }), 400, 'invalid_argument', 'mode');
    await rejectsWith(c.acquire('e/2', { lease: {} }), 400, 'invalid_argument', 'lease');
    await rejectsWith(c.acquire(''), 400, 'invalid_argument', 'key');
    await rejectsWith(c.renew('e/1', l.token, -5), 400, 'invalid_argument', 'lease');
    assert.equal((await c.status('e/2')).holder, null);
    assert.equal((await c.list()).total, 1);
  });
  await t.test('not_holder: 409 on release and renew with another token', async () => {
    await rejectsWith(c.release('e/1', l.token + 1), 409, 'not_holder');
    await rejectsWith(c.renew('e/1', l.token + 1, 10), 409, 'not_holder');
    assert.equal((await c.status('e/1')).holder.token, l.token);
  });
  await t.test('not_held: 404 when nobody holds it', async () => {
    await rejectsWith(c.release('e/free', 12345), 404, 'not_held');
    await rejectsWith(c.renew('e/free', 12345), 404, 'not_held');
  });
  await t.test('too_many_waiters: 429', async () => {
    const ac = new AbortController();
    const first = c.acquire('e/1', { signal: ac.signal });
    await waitFor('one waiter', 15000, async () => (await c.status('e/1')).waiters === 1);
    await rejectsWith(c.acquire('e/1', { wait: 5 }), 429, 'too_many_waiters');
    ac.abort();
    await assert.rejects(first, { name: 'AbortError' });
  });
  await t.test('a lock taken back: renew says not_held or not_holder and lost is aborted', async () => {
    // 2 s leases: an acquire answered after half its lease is renewed at
    // once, and a 0.3 s lease whose answer took 150 ms on a loaded machine
    // had run out by then (its renewal refused: acquired anew).
    const m = await c.acquire('e/back', { lease: 2 });
    await waitFor('the lease to run out', 15000, async () => (await c.status('e/back')).holder === null);
    await rejectsWith(m.renew(), 404, 'not_held');
    assert.ok(m.lost.aborted);
    const o = await c.acquire('e/back2', { lease: 2 });
    const next = await c.acquire('e/back2', { lease: 30 }); // granted when o's lease runs out
    await rejectsWith(o.renew(), 409, 'not_holder');
    assert.ok(o.lost.aborted);
    await rejectsWith(o.release(), 409, 'not_holder');
    await next.release();
  });
  await l.release();
});

test('unauthorized: 401 without the token, calls work with it', async (t) => {
  const n = await startNode(t, { env: { BATON_AUTH_TOKENS: 'js-secret' } });
  await rejectsWith(new Client({ addresses: [n.url] }).acquire('auth/1'), 401, 'unauthorized');
  await rejectsWith(new Client({ addresses: [n.url], token: 'wrong' }).list(), 401, 'unauthorized');
  const c = new Client({ addresses: [n.url], token: 'js-secret' });
  const l = await c.acquire('auth/1', { lease: 5 });
  assert.equal((await c.status('auth/1')).holder.token, l.token);
  await l.release();
  // The module itself is served without a token: an import cannot send one.
  const js = await fetch(n.url + '/baton.js');
  assert.equal(js.status, 200);
  assert.match(js.headers.get('content-type'), /^text\/javascript/);
});

test('a Lock.release that failed is made by the next call', async (t) => {
  const n = await startNode(t, { env: { BATON_AUTH_TOKENS: 'js-secret' } });
  const c = new Client({ addresses: [n.url], token: 'js-secret' });
  const l = await c.acquire('again/1', { lease: 60 });
  c.token = 'rotated-too-early';
  await rejectsWith(l.release(), 401, 'unauthorized');
  c.token = 'js-secret';
  await l.release(); // not "released" by the failed call: asked again
  assert.equal((await c.status('again/1')).holder, null);
  await l.release(); // released: nothing more to do
});

test('unavailable: no node answers', async (t) => {
  const port = await freePort();
  const c = new Client({ addresses: [`http://${HOST}:${port}`], retryFor: 300 });
  await rejectsWith(c.acquire('x'), 0, 'unavailable');
  await rejectsWith(c.cluster(), 0, 'unavailable');
  await rejectsWith(c.release('x', 1), 0, 'unavailable');
});

test('bad addresses are refused at construction, naming the field', () => {
  for (const addresses of [[], undefined, ['ftp://x'], ['not a url'], '', ' , ']) {
    assert.throws(() => new Client({ addresses }), (e) => e instanceof BatonError && e.field === 'addresses');
  }
});

test('a comma-separated list drops blank entries, as BATON_ADDR does for the Go client', async (t) => {
  const n = await startNode(t);
  const c = new Client({ addresses: `${n.url}, ,` });
  t.after(() => c.close());
  const l = await c.acquire('blank/entries', { lease: 5 });
  await l.release();
});

test('withLock renews while fn runs, releases after, passes the lock', async (t) => {
  const n = await startNode(t);
  const c = new Client({ addresses: [n.url] });
  let token;
  const out = await c.withLock('w/1', async (lock) => {
    token = lock.token;
    await sleep(3200); // longer than the lease: the keep-alive renews it
    assert.equal(lock.lost.aborted, false);
    assert.equal((await c.status('w/1')).holder.token, lock.token);
    return 'done';
  }, { lease: 2 });
  assert.equal(out, 'done');
  assert.ok(token > 0);
  assert.equal((await c.status('w/1')).holder, null);

  // fn's error comes out, and the lock is released all the same.
  await assert.rejects(c.withLock('w/1', () => { throw new Error('boom'); }, { lease: 5 }), /boom/);
  assert.equal((await c.status('w/1')).holder, null);

  // A lock lost while fn runs (the node is gone: no renewal succeeds):
  // lost aborts, withLock rejects with the loss.
  let lostSeen = false;
  await rejectsWith(c.withLock('w/1', async (lock) => {
    await n.kill();
    // Under load the kill may outlast the 0.6 s lease: lost may be
    // aborted already (a listener added then would wait for ever).
    if (!lock.lost.aborted) await new Promise((resolve) => lock.lost.addEventListener('abort', resolve));
    lostSeen = true;
  }, { lease: 0.6 }), 0, 'lost');
  assert.ok(lostSeen);
});

test('lost aborts when the lease runs out without a renewal', async (t) => {
  const n = await startNode(t);
  const c = new Client({ addresses: [n.url] });
  const l = await c.acquire('lost/1', { lease: 0.5 });
  const reason = await new Promise((resolve) => l.lost.addEventListener('abort', () => resolve(l.lost.reason)));
  assert.ok(reason instanceof BatonError);
  assert.equal(reason.code, 'lost');
  await waitFor('the server to take the lock back', 15000, async () => (await c.status('lost/1')).holder === null);
});

test('addresses in round robin', async (t) => {
  const a = await startNode(t);
  const b = await startNode(t);
  const c = new Client({ addresses: [a.url, b.url] });
  const selves = [];
  for (let i = 0; i < 4; i++) selves.push((await c.cluster()).self);
  assert.deepEqual(selves, [a.url, b.url, a.url, b.url]);
  // One that fails is skipped for 3 s: every call goes to the other.
  await a.kill();
  const after = [];
  for (let i = 0; i < 4; i++) after.push((await c.cluster()).self);
  assert.deepEqual(after, [b.url, b.url, b.url, b.url]);
});
