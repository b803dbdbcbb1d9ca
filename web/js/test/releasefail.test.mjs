// A release that failed leaves the lock as it was: held, its lease
// counting, and `lost` aborts when that lease runs out (baton.d.ts: "the
// lease ran out (our clock) before a renewal. A release does not abort
// it"; a failed one is no release). Public report: apache/curator#1193
// (CURATOR-678: InterProcessMutex.release() hit a connection loss, dropped
// its local state while the lock node stayed, and the client's view and
// the server's disagreed from then on).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Client, BatonError } from './client.mjs';
import { startNode, NET } from './harness.mjs';

test('after a failed release, lost still aborts when the lease runs out', async (t) => {
  const n = await startNode(t, { host: NET + '.43', env: { BATON_AUTH_TOKENS: 'js-secret' } });
  const c = new Client({ addresses: [n.url], token: 'js-secret' });
  t.after(() => c.close());
  const l = await c.acquire('rf/1', { lease: 1 });
  c.token = 'rotated-too-early';
  await assert.rejects(l.release(), { status: 401, code: 'unauthorized' });
  c.token = 'js-secret';
  const reason = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('lost not aborted 15 s after a 1 s lease ran out')), 15000);
    const done = () => { clearTimeout(timer); resolve(l.lost.reason); };
    if (l.lost.aborted) done();
    else l.lost.addEventListener('abort', done);
  });
  assert.ok(reason instanceof BatonError && reason.code === 'lost', String(reason));
});
