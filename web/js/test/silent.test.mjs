// A node that accepts connections and never answers (SIGSTOP, a frozen
// VM, a link cut without a reset) listed before the active: an acquire
// with a `wait` and a read must move on to the next address, as the Go
// client's do (AcquireGrace 3 s past the wait; README "Cluster": a paused
// active). Before, over fetch, both waited for that node for ever (Node's
// fetch: 300 s), an acquire long after its wait had run out. A renewal
// sent to an active gone silent moves on too: over fetch it waited 300 s
// (the HTTP/2 transport's PINGs broke the connection within 10 s).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { Client } from './client.mjs';
import { startNode, sleep, freezableProxy, HOST } from './harness.mjs';

async function silentNode(t) {
  const held = [];
  const srv = net.createServer((s) => held.push(s));
  await new Promise((r) => srv.listen(0, HOST, r));
  t.after(() => { for (const s of held) s.destroy(); srv.close(); });
  return `http://${HOST}:${srv.address().port}`;
}

const within = (p, ms, what) => Promise.race([
  p.then(() => 'done', (e) => 'rejected: ' + e.message),
  sleep(ms).then(() => what + ': still waiting for the silent node after ' + ms + ' ms'),
]);

test('an acquire with a wait moves on from a silent node 3 s after its wait', async (t) => {
  const n = await startNode(t);
  const c = new Client({ addresses: [await silentNode(t), n.url] });
  t.after(() => c.close());
  let l;
  assert.equal(await within(c.acquire('silent/a', { lease: 30, wait: 1 }).then((x) => { l = x; }), 7000, 'acquire'), 'done');
  assert.equal((await c.status('silent/a')).holder.token, l.token);
  await l.release();
});

// Without a wait nothing bounds the long poll: the node it waits on is
// asked GET /healthz every 2 s, and the call moves on when that is
// unanswered for 3 s, as the Go client's PING does. Before, over fetch,
// it waited for the silent node for ever.
test('an acquire without a wait moves on from a silent node', async (t) => {
  const n = await startNode(t);
  const c = new Client({ addresses: [await silentNode(t), n.url] });
  t.after(() => c.close());
  let l;
  assert.equal(await within(c.acquire('silent/nowait', { lease: 30 }).then((x) => { l = x; }), 9000, 'acquire'), 'done');
  assert.equal((await c.status('silent/nowait')).holder.token, l.token);
  await l.release();
});

// With a long wait too: the probe cuts the attempt within 5 s, not the
// wait plus 3 s (before: 23 s for a 20 s wait; the Go client's PING
// notices such a node within 5 s whatever the wait).
test('an acquire with a long wait moves on from a silent node within 5 s', async (t) => {
  const n = await startNode(t);
  const c = new Client({ addresses: [await silentNode(t), n.url] });
  t.after(() => c.close());
  let l;
  assert.equal(await within(c.acquire('silent/longwait', { lease: 30, wait: 20 }).then((x) => { l = x; }), 9000, 'acquire'), 'done');
  assert.equal((await c.status('silent/longwait')).holder.token, l.token);
  await l.release();
});

// The probe cuts only a call whose node is silent: a waiter on a live
// node keeps its one request, and gets the grant on it.
test('an acquire without a wait on a live node keeps its place past the probes', async (t) => {
  const n = await startNode(t);
  const c = new Client({ addresses: [n.url] });
  t.after(() => c.close());
  const first = await c.acquire('live/nowait', { lease: 30 });
  const posts = [];
  const other = new Client({ addresses: [n.url], fetch: (u, o) => { if (o.method === 'POST') posts.push(u); return fetch(u, o); } });
  t.after(() => other.close());
  const waiting = other.acquire('live/nowait', { lease: 30 });
  await sleep(7000); // three probes answered
  await first.release();
  const l = await waiting;
  assert.ok(l.token > first.token);
  assert.equal(posts.length, 1, 'the waiter was sent again: ' + posts.join(' '));
  await l.release();
});

test('a read moves on from a silent node', async (t) => {
  const n = await startNode(t);
  const c = new Client({ addresses: [await silentNode(t), n.url] });
  t.after(() => c.close());
  assert.equal(await within(c.status('silent/r'), 8000, 'status'), 'done');
});

test('a renewal moves on from an active gone silent', async (t) => {
  const n = await startNode(t);
  const proxy = await freezableProxy(t, n);
  const c = new Client({ addresses: [proxy.url, n.url] }); // the first call goes through the proxy
  t.after(() => c.close());
  const l = await c.acquire('silent/renew', { lease: 60 }); // granted through the proxy: the active
  proxy.freeze();
  assert.equal(await within(l.renew(90), 15000, 'renew'), 'done');
  assert.equal(l.lease, 90);
  assert.equal((await c.status('silent/renew')).holder?.lease, 90);
  await l.release();
});
