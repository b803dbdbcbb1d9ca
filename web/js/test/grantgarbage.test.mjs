// An acquire answered 200 with no grant in it (a proxy's or a captive
// portal's page, a body mangled on the way: not JSON, or JSON without a
// token) resolved to a Lock whose token and lease were undefined, or
// threw a bare SyntaxError / TypeError; the grant the node may have made
// stayed held for its lease. It is a BatonError "bad_answer" (status as
// answered), and what the node granted is settled, as after a 5xx
// (grant5xx.test.mjs).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Client, BatonError } from './client.mjs';
import { startNode } from './harness.mjs';

for (const body of ['<html><body>Welcome</body></html>', '{"hello":1}', 'null', '', '{"token":"x"}']) {
  test(`an acquire answered 200 ${JSON.stringify(body)} rejects bad_answer and releases the grant`, async (t) => {
    const n = await startNode(t);
    let swapped = false;
    const f = async (url, init) => {
      const res = await fetch(url, init);
      if (init.method !== 'POST' || swapped || res.status !== 200) return res;
      swapped = true;
      await res.text(); // granted, and taken as delivered by the node
      return new Response(body, { status: 200, headers: { 'Content-Type': 'application/json' } });
    };
    const c = new Client({ addresses: [n.url], fetch: f });
    await assert.rejects(c.acquire('gg', { lease: 3600 }), (e) => e instanceof BatonError && e.code === 'bad_answer' && e.status === 200);
    assert.ok(swapped);
    await c.close(); // waits for the settling
    const d = new Client({ addresses: [n.url] });
    t.after(() => d.close());
    assert.equal((await d.status('gg')).holder, null);
  });
}
