// A keep-alive whose renewal the active leaves unanswered (paused by
// SIGSTOP, or cut off without a reset: nothing breaks the connection) asks
// the other nodes next, where the promoted standby renews the lease. Every
// attempt went to the active a 307 had named, so a 3-node cluster whose
// active was stopped for 7 s lost a 4 s lease the new active held.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from './client.mjs';
import { listenProxy } from './harness.mjs';

const LEASE = 3; // seconds: room for a loaded machine (a renewal attempt is cut at a quarter of it)

function grant(res) {
  res.writeHead(200, { 'content-type': 'application/json', 'lock-token': '7' });
  res.end(JSON.stringify({ key: 'k', token: 7, lease: LEASE, expires_at: new Date(Date.now() + LEASE * 1000).toISOString() }));
}

test('a keep-alive renews on another node when the active leaves a renewal unanswered', async (t) => {
  const patches = { active: 0, other: 0 };
  const active = await listenProxy(t, async (req, res) => {
    for await (const _ of req); // eslint-disable-line no-unused-vars
    if (req.method === 'PATCH') {
      patches.active++; // never answered: a paused node
      return;
    }
    grant(res);
  });
  // A standby: it redirects the acquire to the active, then (promoted
  // meanwhile) renews.
  const other = await listenProxy(t, async (req, res) => {
    for await (const _ of req); // eslint-disable-line no-unused-vars
    if (req.method === 'PATCH') {
      patches.other++;
      grant(res);
      return;
    }
    res.writeHead(307, { location: active.url + req.url });
    res.end();
  });
  const c = new Client({ addresses: [other.url] });
  t.after(() => c.close?.());
  const l = await c.acquire('k', { lease: LEASE });
  const stop = l.keepAlive();
  await new Promise((r) => setTimeout(r, 2500 * LEASE));
  stop();
  assert.ok(!l.lost.aborted, 'lost: ' + l.lost.reason?.message + ' ' + JSON.stringify(patches));
  assert.ok(patches.active >= 1 && patches.other >= 2, JSON.stringify(patches));
});
