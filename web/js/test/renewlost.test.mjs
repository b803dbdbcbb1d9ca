// A renewal of a lock already lost (node-redlock refuses one: "Cannot
// extend an already-expired lock"; redlock-rb issue 36) that the node
// still held was made and resolved as if all were well: the node extended
// a lease nobody watched any more (`lost` aborted, keepAlive refused). A
// renewal whose answer came after the lease ran out on our clock resolved
// too, `lost` aborted meanwhile. Both now reject with `lost`'s reason (a
// refused one still rejects with the node's not_held/not_holder).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from './client.mjs';
import { startNode, sleep } from './harness.mjs';

const lostOf = (l) => new Promise((r) => l.lost.aborted ? r() : l.lost.addEventListener('abort', r));

test('a renewal of a lost lock that the node still holds rejects with the loss', async (t) => {
  const n = await startNode(t);
  const c = new Client({
    addresses: [n.url],
    // The acquire goes out 2 s late: our lease ends 2 s before the
    // node's, time enough for the status read below on a loaded machine
    // (2 s is under half the lease: the grant is not taken for a late
    // one, which the client would renew at once).
    fetch: async (u, i) => { if (i.method === 'POST') await sleep(2000); return fetch(u, i); },
  });
  t.after(() => c.close());
  const l = await c.acquire('renewlost/a', { lease: 8 });
  await lostOf(l);
  assert.equal((await c.status('renewlost/a')).holder?.token, l.token, 'the node still holds it');
  await assert.rejects(l.renew(), { code: 'lost' });
  await l.release();
  assert.equal((await c.status('renewlost/a')).holder, null);
});

test('a renewal answered after the lease ran out on our clock rejects with the loss', async (t) => {
  const n = await startNode(t);
  let l;
  const c = new Client({
    addresses: [n.url],
    fetch: async (u, i) => {
      const res = await fetch(u, i);
      if (i.method === 'PATCH') await lostOf(l); // the node renewed; its answer is late
      return res;
    },
  });
  t.after(() => c.close());
  l = await c.acquire('renewlost/b', { lease: 2 });
  // The renewal asks for 30 s: the node still holds the lock when the
  // release below comes, however late a loaded machine sends it (with the
  // grant's 2 s, the renewed lease could run out first: 404 not_held).
  await assert.rejects(l.renew(30), { code: 'lost' });
  assert.ok(l.lost.aborted);
  await l.release();
  assert.equal((await c.status('renewlost/b')).holder, null);
});
