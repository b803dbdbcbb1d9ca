// The Idempotency-Key across re-sends (a 408 re-sent by the HTTP stack,
// poll_timeout resumption), cancellation by signal, and a release repeated
// after a 503 that the node had made, against a real node.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { Client, BatonError } from './client.mjs';
import { startNode, sleep, waitFor, listenProxy, endToEnd } from './harness.mjs';

/**
 * A proxy in front of target that behaves like Chromium on a reused
 * connection: a POST answered 408 is sent again, as it was, and the second
 * answer is the one delivered. It records every POST it forwards.
 */
async function resendingProxy(t, target) {
  const seen = [];
  const forward = (req, body) => new Promise((resolve, reject) => {
    const up = http.request(target + req.url, { method: req.method, headers: endToEnd(req.headers) }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) }));
    });
    up.on('error', reject);
    up.end(body);
  });
  const { url } = await listenProxy(t, async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const body = Buffer.concat(chunks);
    try {
      let r = await forward(req, body);
      if (req.method === 'POST') {
        seen.push({ url: req.url, key: req.headers['idempotency-key'], status: r.status });
        if (r.status === 408) {
          r = await forward(req, body);
          seen.push({ url: req.url, key: req.headers['idempotency-key'], status: r.status, resent: true });
        }
      }
      res.writeHead(r.status, endToEnd(r.headers));
      res.end(r.body);
    } catch (e) {
      res.destroy(e);
    }
  });
  return { url, seen };
}

test('a 408 re-sent by the HTTP stack carries the same Idempotency-Key and queues nothing', async (t) => {
  const n = await startNode(t);
  const proxy = await resendingProxy(t, n.url);
  const direct = new Client({ addresses: [n.url] });
  const holder = await direct.acquire('rs/busy', { lease: 30 });

  const c = new Client({ addresses: [proxy.url] });
  await assert.rejects(c.acquire('rs/busy', { wait: 0.3, lease: 10 }), (e) => e instanceof BatonError && e.status === 408 && e.code === 'timeout');
  assert.equal(proxy.seen.length, 2, JSON.stringify(proxy.seen));
  const [first, again] = proxy.seen;
  assert.ok(first.key && first.key.length >= 32, 'no Idempotency-Key: ' + JSON.stringify(first));
  assert.equal(again.key, first.key);
  assert.equal(again.resent, true);
  assert.equal(again.status, 408, 'the re-send was not answered with the same 408');

  let s = await direct.status('rs/busy');
  assert.equal(s.holder.token, holder.token);
  assert.equal(s.waiters, 0);
  // Were the re-sent acquire queued, the release would hand it the lock.
  await holder.release();
  await sleep(500);
  s = await direct.status('rs/busy');
  assert.equal(s.holder, null);
  assert.equal(s.waiters, 0);

  // Two acquires get two keys.
  await c.acquire('rs/free', { lease: 5 }).then((l) => l.release());
  const keys = new Set(proxy.seen.map((x) => x.key));
  assert.equal(keys.size, 2);
});

test('poll_timeout answers are resumed with the same key, in the same place', async (t) => {
  const n = await startNode(t, { args: ['--poll-timeout', '300ms'] });
  const proxy = await resendingProxy(t, n.url); // records the POSTs; a poll_timeout 408 is re-sent too
  const direct = new Client({ addresses: [n.url] });
  const holder = await direct.acquire('pt/1', { lease: 30 });
  const c = new Client({ addresses: [proxy.url] });
  const second = await direct.acquire('pt/1', { lease: 30, wait: 0.01 }).catch((e) => e); // a timeout: leaves no waiter
  assert.equal(second.code, 'timeout');

  const waiting = c.acquire('pt/1', { lease: 10 });
  // Until it was resumed twice (a loaded machine makes fewer of the 300 ms
  // poll timeouts in a given time: this waited a fixed 1.5 s).
  const pts = () => proxy.seen.filter((x) => x.url.startsWith('/locks/pt/1'));
  await waitFor('three posts of the acquire', 15000, () => pts().length >= 3);
  const s = await direct.status('pt/1');
  assert.equal(s.waiters, 1, 'the resumed acquire is one waiter');
  const posts = pts();
  assert.ok(posts.length >= 3, JSON.stringify(posts));
  assert.equal(new Set(posts.map((x) => x.key)).size, 1, 'every resumption carries the same Idempotency-Key');
  assert.ok(posts.some((x) => x.status === 408));

  await holder.release();
  const l = await waiting;
  assert.ok(l.token > holder.token);
  assert.equal((await direct.status('pt/1')).holder.token, l.token);
  await l.release();
});

test('signal cancels a wait and the server drops the waiter', async (t) => {
  const n = await startNode(t);
  const c = new Client({ addresses: [n.url] });
  const holder = await c.acquire('sig/1', { lease: 30 });
  const ac = new AbortController();
  const waiting = c.acquire('sig/1', { lease: 30, signal: ac.signal });
  await waitFor('one waiter', 15000, async () => (await c.status('sig/1')).waiters === 1);
  ac.abort(new Error('the user went away'));
  await assert.rejects(waiting, /the user went away/);
  await waitFor('no waiter', 15000, async () => (await c.status('sig/1')).waiters === 0);
  await holder.release();
  await sleep(300);
  const s = await c.status('sig/1');
  assert.equal(s.holder, null, 'the cancelled waiter was granted the lock');
  assert.equal(s.waiters, 0);

  // A signal aborted before the call: nothing is sent.
  const pre = new AbortController();
  pre.abort();
  await assert.rejects(c.acquire('sig/2', { signal: pre.signal }), { name: 'AbortError' });
  assert.equal((await c.status('sig/2')).waiters, 0);
});

test('without crypto.randomUUID (a browser page over plain http) the key comes from getRandomValues', async (t) => {
  const n = await startNode(t);
  const proxy = await resendingProxy(t, n.url);
  const c = new Client({ addresses: [proxy.url] });
  Object.defineProperty(crypto, 'randomUUID', { value: undefined, configurable: true });
  t.after(() => delete crypto.randomUUID);
  for (let i = 0; i < 2; i++) await (await c.acquire('nouuid/1', { lease: 5 })).release();
  const keys = proxy.seen.map((x) => x.key);
  assert.equal(keys.length, 2);
  for (const k of keys) assert.match(k, /^[0-9a-f]{32}$/);
  assert.notEqual(keys[0], keys[1]);
});

test('a release answered 503 that the node made (its log could not write it) is done when the repeat finds it not held', async (t) => {
  const n = await startNode(t);
  let answered503 = 0;
  const { url } = await listenProxy(t, async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const r = await new Promise((resolve, reject) => {
      const up = http.request(n.url + req.url, { method: req.method, headers: endToEnd(req.headers) }, (ur) => {
        const body = [];
        ur.on('data', (c) => body.push(c));
        ur.on('end', () => resolve({ status: ur.statusCode, headers: ur.headers, body: Buffer.concat(body) }));
      });
      up.on('error', reject);
      up.end(Buffer.concat(chunks));
    });
    if (req.method === 'DELETE' && answered503++ === 0) {
      // Made by the node, answered as a node whose log failed answers it.
      res.writeHead(503, { 'content-type': 'application/json', 'retry-after': '1' });
      res.end(JSON.stringify({ error: 'unavailable', message: 'the node made the change but cannot write it to its log' }));
      return;
    }
    res.writeHead(r.status, endToEnd(r.headers));
    res.end(r.body);
  });
  const c = new Client({ addresses: [url] });
  const l = await c.acquire('rs/503', { lease: 30 });
  await c.release('rs/503', l.token);
  assert.equal(answered503, 2, 'the release was not repeated after its 503');
  await assert.rejects(c.release('rs/503', l.token), (e) => e instanceof BatonError && e.status === 404 && e.code === 'not_held');
});
