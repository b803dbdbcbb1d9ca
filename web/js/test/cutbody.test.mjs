// An answer cut off inside its body (its node killed while it wrote, a
// proxy reset) is a broken attempt under either transport: the call asks
// again, within its retry rules, as after a connection lost before the
// answer: acquire under its Idempotency-Key, renew and release under the
// Lock-Token, status as it was. Under fetch, acquire rejected "TypeError:
// terminated" (its grant then settled: released), renew and status
// rejected the same; the HTTP/2 transport already asked again
// (node.test.mjs). Release already counted it as an attempt made.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { Client, TRANSPORT } from './client.mjs';
import { startNode, listenProxy, endToEnd } from './harness.mjs';

/**
 * A proxy in front of n (in the protocol of the transport under test)
 * that sends half of the first body answering `method`, then drops the
 * connection. `seen[method]` counts the requests of each method.
 */
async function cutting(t, n, method) {
  const seen = {};
  const proxy = await listenProxy(t, (req, res) => {
    const first = !seen[req.method];
    seen[req.method] = (seen[req.method] || 0) + 1;
    const up = http.request(n.url + req.url, { method: req.method, headers: endToEnd(req.headers) }, (r) => {
      res.writeHead(r.statusCode, endToEnd(r.headers));
      if (req.method === method && first) {
        r.once('data', (d) => {
          res.write(d.subarray(0, d.length >> 1));
          setTimeout(() => (TRANSPORT === 'http2' ? res.stream.session.destroy() : res.socket.destroy()), 50);
        });
        return;
      }
      r.pipe(res);
    });
    up.on('error', (e) => res.destroy(e));
    req.pipe(up);
  });
  return { url: proxy.url, seen };
}

test('an acquire whose grant is cut off inside its body asks again and gets the grant', async (t) => {
  const n = await startNode(t);
  const p = await cutting(t, n, 'POST');
  const c = new Client({ addresses: [p.url] });
  t.after(() => c.close());
  const l = await c.acquire('cut/acquire', { lease: 30 });
  assert.equal(p.seen.POST, 2, 'the acquire was asked again');
  assert.equal((await n.get('/locks/cut/acquire')).holder?.token, l.token);
  await l.release();
  assert.equal((await n.get('/locks/cut/acquire')).holder, null);
});

test('a renew whose answer is cut off inside its body asks again and renews', async (t) => {
  const n = await startNode(t);
  const p = await cutting(t, n, 'PATCH');
  const c = new Client({ addresses: [p.url] });
  t.after(() => c.close());
  const l = await c.acquire('cut/renew', { lease: 30 });
  await l.renew(60);
  assert.equal(p.seen.PATCH, 2, 'the renew was asked again');
  assert.equal(l.lease, 60);
  assert.equal(l.lost.aborted, false);
  assert.equal((await n.get('/locks/cut/renew')).holder?.token, l.token);
  await l.release();
});

test('a release whose answer is cut off inside its body resolves, the lock released', async (t) => {
  const n = await startNode(t);
  const p = await cutting(t, n, 'DELETE');
  const c = new Client({ addresses: [p.url] });
  t.after(() => c.close());
  const l = await c.acquire('cut/release', { lease: 30 });
  await l.release();
  assert.equal(p.seen.DELETE, 2, 'the release was asked again');
  assert.equal((await n.get('/locks/cut/release')).holder, null);
});

test('a status whose answer is cut off inside its body asks again', async (t) => {
  const n = await startNode(t);
  const p = await cutting(t, n, 'GET');
  const c = new Client({ addresses: [p.url] });
  t.after(() => c.close());
  assert.equal((await c.status('cut/status')).holder, null);
  assert.equal(p.seen.GET, 2, 'the status was asked again');
});
