// An acquire answered 500, 502 or 504 in place of its grant (a proxy's
// 502 for an upstream answer whose headers overflow its buffer, a 504
// written as the grant arrived, a node's 500) may have been granted: it is
// settled, as after a 503 given up on or a lost connection, and the grant
// does not stay held for its lease with the caller told the acquire failed.
// As the Go client (TestAcquireAnswered5xxAfterTheGrantReleasesIt). Public
// report of the family: hazelcast/hazelcast#17697 (a lock() failing for an
// unexpected reason left what it had acquired).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from './client.mjs';
import { startNode, NET } from './harness.mjs';

for (const status of [500, 502, 504]) {
  test(`an acquire answered ${status} after its grant releases the grant`, async (t) => {
    const n = await startNode(t, { host: NET + '.44' });
    let swapped = false;
    const f = async (url, init) => {
      const res = await fetch(url, init);
      if (init.method !== 'POST' || swapped || res.status !== 200) return res;
      swapped = true;
      await res.text(); // granted, and taken as delivered by the node
      return new Response('<html><body>' + status + '</body></html>', { status, headers: { 'Content-Type': 'text/html' } });
    };
    const c = new Client({ addresses: [n.url], fetch: f });
    await assert.rejects(c.acquire('g5', { lease: 3600 }), { status });
    assert.ok(swapped);
    await c.close(); // waits for the settling
    const d = new Client({ addresses: [n.url] });
    t.after(() => d.close());
    assert.equal((await d.status('g5')).holder, null, 'the grant answered ' + status + ' is still held');
  });
}
