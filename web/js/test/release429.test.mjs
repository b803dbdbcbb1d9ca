// A release answered 429 (a rate-limiting proxy in front of the nodes,
// "Too Many Requests") ended at once with that error, the lock left held
// for its lease, although SPEC section 4 retries a release every 200 ms
// for 5 s until the server confirms (only a 404 or 409 ends it), and the
// Go client retries a 429 (api/lock.go release). A 429 does not make the
// attempt ambiguous either: a later 404 still is an error.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from './client.mjs';
import { startNode } from './harness.mjs';

const limited = (n) => {
  let left = n;
  const seen = [];
  const f = async (url, init) => {
    if (init.method === 'DELETE') {
      seen.push(init.method);
      if (left-- > 0) return new Response('<html>Too Many Requests</html>', { status: 429, headers: { 'Content-Type': 'text/html', 'Retry-After': '0' } });
    }
    return fetch(url, init);
  };
  return { f, seen };
};

test('a release answered 429 is retried until the node confirms', async (t) => {
  const n = await startNode(t);
  const { f, seen } = limited(2);
  const c = new Client({ addresses: [n.url], fetch: f });
  t.after(() => c.close());
  const l = await c.acquire('r429', { lease: 3600 });
  await l.release();
  assert.equal(seen.length, 3);
  assert.equal((await c.status('r429')).holder, null);
});

test('a release answered 429, then 404, rejects not_held', async (t) => {
  const n = await startNode(t);
  const { f } = limited(1);
  const c = new Client({ addresses: [n.url], fetch: f });
  t.after(() => c.close());
  await assert.rejects(c.release('r429b', 12345), { code: 'not_held', status: 404 });
});
