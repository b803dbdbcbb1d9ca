// A waiter whose long poll ends 408 poll_timeout keeps its place, which
// the node may grant before the client resumes (the release comes while
// the 408 is on its way, or the client is busy): the resume under the
// same Idempotency-Key gets that grant, whose lease runs on the node from
// the grant. The client's lease clock (`lost`) must start no later: from
// the first request of the acquire. It started at the resume, so `lost`
// came after the node had expired the lease and granted the next waiter:
// two holders on a single node (a tester's report: 0.3-2.5 s of overlap).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from './client.mjs';
import { startNode, sleep, waitFor } from './harness.mjs';

test('a grant made while the client was between polls is lost by the client no later than on the node', async (t) => {
  const n = await startNode(t, { args: ['--poll-timeout', '500ms'] });
  const direct = new Client({ addresses: [n.url] });
  t.after(() => direct.close());
  const held = await direct.acquire('pa/1', { lease: 30 });
  let posts = 0;
  // The first poll's 408 reaches the client only after the holder
  // released (the node granted the kept place meanwhile) and a second
  // more (a slow link, a busy client).
  const f = async (u, o) => {
    const first = o?.method === 'POST' && posts++ === 0, r = await fetch(u, o);
    if (first && r.status === 408) {
      await held.release();
      await sleep(1000);
    }
    return r;
  };
  const w = new Client({ addresses: [n.url], fetch: f });
  const next = new Client({ addresses: [n.url] });
  t.after(() => { w.close(); next.close(); });
  const waiting = w.acquire('pa/1', { lease: 4 });
  await waitFor('the waiter queued', 5000, async () => (await direct.status('pa/1')).waiters === 1);
  const queued = next.acquire('pa/1', { lease: 30 });
  await waitFor('the next waiter queued', 5000, async () => (await direct.status('pa/1')).waiters === 2);
  const l = await waiting;
  assert.ok(posts >= 2, 'the acquire was not resumed after a poll_timeout');
  await new Promise((r) => l.lost.addEventListener('abort', r, { once: true }));
  const lostAt = Date.now();
  const l2 = await queued;
  const grantedAt = Date.parse((await direct.status('pa/1')).holder.granted_at);
  assert.ok(grantedAt >= lostAt, `the next waiter was granted ${lostAt - grantedAt} ms before the client saw its lock lost`);
  await l2.release();
});
