// A release answered only after a failover and the default sync_timeout
// (the standby holds the call until it is promoted, about 1.4 s by
// default, then the change for sync_timeout, 1 s, before it degrades
// without its synchronous standbys and answers) is one attempt: the
// attempt's cut is above it. Cut at 1 s, the attempt released the lock
// unanswered, and lock.release() returned only after its 5 s of retries
// (breaker T, 2026-12-06).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from './client.mjs';
import { listenProxy } from './harness.mjs';

test('a release answered after 2.2 s is one attempt', async (t) => {
  let deletes = 0;
  const { url } = await listenProxy(t, async (req, res) => {
    for await (const _ of req); // eslint-disable-line no-unused-vars
    const json = (status, body, h = {}) => {
      res.writeHead(status, { 'content-type': 'application/json', ...h });
      res.end(JSON.stringify(body));
    };
    if (req.method === 'POST') return json(200, { key: 'k', token: 7, lease: 60, expires_at: '2030-01-01T00:00:00Z' }, { 'lock-token': '7' });
    if (req.method === 'DELETE') {
      deletes++;
      await new Promise((r) => setTimeout(r, 2200));
      return json(200, { key: 'k', released: true });
    }
    json(404, { error: 'not_found', message: req.method + ' ' + req.url });
  });
  const c = new Client({ addresses: [url] });
  const l = await c.acquire('k');
  await l.release();
  assert.equal(deletes, 1);
  await c.close();
});
