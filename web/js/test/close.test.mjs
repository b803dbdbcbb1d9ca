// Client.close(): a process (a serverless function) that returns right after
// a release, or after giving up an acquire whose grant is being settled,
// must be able to wait for that work; close() resolves only once it is done
// and refuses every call after it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { Client, BatonError } from './client.mjs';
import { listenProxy } from './harness.mjs';

/**
 * A fake node: a DELETE is answered 503 `failures` times, then 200 (each
 * recorded in `released` with its token); a POST whose wait is 0.001 (a
 * settle) is granted token 9; any other POST is parked until its
 * connection or stream closes.
 */
async function fakeNode(t, failures) {
  const released = [], posts = [];
  let deletes = 0;
  const { url } = await listenProxy(t, async (req, res) => {
    for await (const _ of req); // eslint-disable-line no-unused-vars
    const u = new URL(req.url, 'http://x');
    const json = (status, body, h = {}) => {
      res.writeHead(status, { 'content-type': 'application/json', ...h });
      res.end(JSON.stringify(body));
    };
    if (req.method === 'DELETE') {
      if (deletes++ < failures) return json(503, { error: 'unavailable', message: 'no active yet' }, { 'retry-after': '0' });
      released.push(Number(req.headers['lock-token']));
      return json(200, { key: 'k', released: true });
    }
    if (req.method === 'POST') {
      posts.push(u.searchParams.get('wait'));
      if (u.searchParams.get('wait') === '0.001') {
        return json(200, { key: 'k', token: 9, lease: 30, expires_at: '2030-01-01T00:00:00Z' }, { 'lock-token': '9' });
      }
      return; // parked: never answered
    }
    json(404, { error: 'not_found', message: req.method + ' ' + req.url });
  });
  return { url, released, posts };
}

test('close waits for a release still being retried', async (t) => {
  const n = await fakeNode(t, 3); // three 503s: about 600 ms of retries
  const c = new Client({ addresses: [n.url] });
  const releasing = c.release('k', 7); // not awaited, as a handler that returns at once
  await c.close();
  assert.deepEqual(n.released, [7], 'close resolved before the release was confirmed');
  await releasing;
});

test('close waits for the settle of an aborted acquire', async (t) => {
  const n = await fakeNode(t, 2);
  const c = new Client({ addresses: [n.url] });
  const ac = new AbortController();
  const acquiring = c.acquire('k', { wait: 30, signal: ac.signal });
  while (n.posts.length === 0) await new Promise((r) => setTimeout(r, 10));
  ac.abort(new Error('gave up'));
  await assert.rejects(acquiring, /gave up/);
  await c.close();
  assert.deepEqual(n.released, [9], 'close resolved before the grant the settle found was released');
});

test('after close every call rejects "closed" and changes nothing', async (t) => {
  const n = await fakeNode(t, 0);
  const c = new Client({ addresses: [n.url] });
  await c.close();
  await c.close(); // idempotent
  const closed = (e) => e instanceof BatonError && e.code === 'closed';
  await assert.rejects(c.acquire('k'), closed);
  await assert.rejects(c.release('k', 7), closed);
  await assert.rejects(c.renew('k', 7), closed);
  await assert.rejects(c.status('k'), closed);
  await assert.rejects(c.list(), closed);
  await assert.rejects(c.cluster(), closed);
  await assert.rejects(c.withLock('k', () => 1), closed);
  assert.deepEqual(n.posts, []);
  assert.deepEqual(n.released, []);
});

// A process that closes its client with a lock still kept alive (left to
// run out, as after an error) ends: close() ends the keepAlive, whose
// timer to the next renewal (half of a 120 s lease) held Node open.
test('close ends the keepAlive of a held lock: the process exits', async (t) => {
  const { url } = await listenProxy(t, async (req, res) => {
    for await (const _ of req); // eslint-disable-line no-unused-vars
    res.writeHead(200, { 'content-type': 'application/json', 'lock-token': '5' });
    res.end(JSON.stringify({ key: 'k', token: 5, lease: 120, expires_at: new Date(Date.now() + 120000).toISOString() }));
  });
  const start = Date.now();
  const script = `import { Client } from ${JSON.stringify(new URL('./client.mjs', import.meta.url).href)};
const c = new Client({ addresses: [process.argv[1]] });
const l = await c.acquire('k', { lease: 120 });
l.keepAlive();
await c.close();
l.keepAlive(); // after close: ends at once too
`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script, url], { stdio: ['ignore', 'inherit', 'inherit'] });
  t.after(() => child.kill('SIGKILL'));
  const code = await Promise.race([
    new Promise((resolve) => child.once('exit', resolve)),
    new Promise((resolve) => setTimeout(resolve, 20000, 'still running 20 s after close()').unref()),
  ]);
  assert.equal(code, 0, 'after ' + (Date.now() - start) + ' ms');
});
