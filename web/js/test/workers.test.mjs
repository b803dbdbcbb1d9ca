// Cloudflare Workers' fetch throws a TypeError ("The 'cache' field on
// 'RequestInitializerDict' is not implemented.") for a RequestInit with a
// `cache` field, which baton.js sends (cache: "no-store", so that no
// browser cache answers a long poll or a status read): every call failed
// "unavailable" there, after its retries. The client now repeats such a
// request at once without the field and leaves it out from then on (that
// client only); another TypeError still is a failed attempt. It passes
// `redirect: "manual"`, which Workers' fetch takes: the client follows a
// standby's 307 itself (so that it knows the node a call waits on).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from './client.mjs';
import { startNode } from './harness.mjs';

/** A fetch that refuses `cache` as Workers' does; seen: every init given it. */
const workersFetch = () => {
  const seen = [];
  const f = async (url, init) => {
    seen.push({ ...init });
    if (init && 'cache' in init) throw new TypeError("The 'cache' field on 'RequestInitializerDict' is not implemented.");
    return fetch(url, init);
  };
  return { f, seen };
};

test("a fetch refusing the 'cache' field is asked again without it, and not given it again", async (t) => {
  const n = await startNode(t);
  const { f, seen } = workersFetch();
  const c = new Client({ addresses: [n.url], fetch: f, retryFor: 0 });
  t.after(() => c.close());
  const l = await c.acquire('workers/k', { lease: 30 });
  await l.renew();
  assert.equal((await c.status('workers/k')).holder.token, l.token);
  await l.release();
  assert.equal((await c.status('workers/k')).holder, null);
  assert.equal(seen.length, 6, 'one refused request, then five calls: ' + JSON.stringify(seen.map((i) => i.method)));
  assert.equal(seen[0].cache, 'no-store');
  assert.equal(seen[1].method, 'POST');
  assert.ok(seen.slice(1).every((i) => !('cache' in i)), 'cache left out after the refusal');
  assert.equal(seen[0].headers['Idempotency-Key'], seen[1].headers['Idempotency-Key'], 'the repeat is the same request');
  // Another client over the same runtime still tries it first.
  const { f: f2, seen: seen2 } = workersFetch();
  const c2 = new Client({ addresses: [n.url], fetch: f2, retryFor: 0 });
  t.after(() => c2.close());
  await c2.status('workers/k');
  assert.deepEqual(seen2.map((i) => i.cache), ['no-store', undefined]);
});

test('a fetch accepting cache is given no-store, and redirect: manual', async (t) => {
  const n = await startNode(t);
  const seen = [];
  const c = new Client({ addresses: [n.url], fetch: (u, i) => { seen.push(i); return fetch(u, i); }, retryFor: 0 });
  t.after(() => c.close());
  const l = await c.acquire('workers/b', { lease: 30 });
  await c.status('workers/b');
  await l.release();
  assert.equal(seen.length, 3);
  for (const i of seen) {
    assert.equal(i.cache, 'no-store', i.method);
    assert.equal(i.redirect, 'manual', i.method);
  }
});

test('another TypeError is a failed attempt, and cache stays', async (t) => {
  const n = await startNode(t);
  const seen = [];
  let fail = 1;
  const c = new Client({
    addresses: [n.url], retryFor: 0,
    fetch: async (u, i) => { seen.push(i); if (fail-- > 0) throw new TypeError('fetch failed'); return fetch(u, i); },
  });
  t.after(() => c.close());
  await assert.rejects(c.status('workers/c'), { code: 'unavailable' });
  assert.equal(seen.length, 1, 'not repeated at once');
  await c.status('workers/c');
  assert.deepEqual(seen.map((i) => i.cache), ['no-store', 'no-store']);
});
