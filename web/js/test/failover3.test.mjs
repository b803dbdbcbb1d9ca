// Real faults on three nodes with sync_standbys 1: clients loop acquiring
// and releasing one key while the active is killed (kill -9) or hands off
// (SIGINT). The contract (SPEC section 3 and 4): no answered grant is lost,
// so two clients are never told they hold the key at once; tokens rise
// strictly; a release sent while the active dies is retried on the new
// active and resolves; no waiter is left behind.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import http2 from 'node:http2';
import { Client, TRANSPORT } from './client.mjs';
import { Node, CLUSTER_ARGS, endToEnd, freePort, sleep, waitFor, NET as HARNESS_NET } from './harness.mjs';

// BATON_JS_NET: the first three numbers of the loopback network the nodes
// listen on (runs side by side keep to their own); else the harness's NET.
const NET = process.env.BATON_JS_NET || HARNESS_NET;
// BATON_JS_ROUNDS: how many faults each test applies (default 3).
const ROUNDS = Number(process.env.BATON_JS_ROUNDS) || 3;

async function startTrio(t, extra = []) {
  const hosts = [1, 2, 3].map((i) => `${NET}.${i}`);
  const ports = await Promise.all(hosts.map((h) => freePort(h)));
  const urls = hosts.map((h, i) => `http://${h}:${ports[i]}`);
  const nodes = hosts.map((h, i) => new Node({ host: h, port: ports[i], args: ['--advertise', urls[i], '--peers', urls.join(','), ...CLUSTER_ARGS, ...extra] }));
  for (const n of nodes) t.after(() => n.cleanup());
  await Promise.all(nodes.map((n) => n.start()));
  await waitFor('the first node active, the others its standbys', 20000, async () => {
    const s = await Promise.all(nodes.map((n) => n.get('/cluster')));
    return s[0].role === 'active' && s.slice(1).every((x) => x.role === 'standby' && x.active === nodes[0].url);
  });
  return nodes;
}

/** GET path on n, JSON, given up after 1 s (a stopped node never answers). */
async function getQuick(n, path) {
  const r = await fetch(n.url + path, { redirect: 'manual', signal: AbortSignal.timeout(1000) });
  if (r.status !== 200) throw new Error('GET ' + path + ': ' + r.status);
  return r.json();
}

async function activeOf(nodes) {
  for (const n of nodes) {
    if (!n.proc || n.proc.exitCode !== null || n.proc.signalCode) continue;
    try {
      const s = await getQuick(n, '/cluster');
      if (s.role === 'active') return n;
    } catch { /* down */ }
  }
  return null;
}

async function stress(t, fault) {
  const nodes = await startTrio(t, ['--sync-standbys', '1']);
  const addrs = nodes.map((n) => n.url);
  const holds = [], errors = [];
  let stop = false;
  let gaveUp = 0;
  // Workers 0-3 wait as long as it takes; 4 waits 50 ms (408s); 5 aborts
  // its acquires after 5-300 ms (each settled in the background).
  const workers = Array.from({ length: 6 }, async (_, w) => {
    const c = new Client({ addresses: addrs });
    try {
      while (!stop) {
        let l;
        try {
          if (w === 4) l = await c.acquire('f3/m', { lease: 15, wait: 0.05 });
          else if (w === 5) l = await c.acquire('f3/m', { lease: 15, signal: AbortSignal.timeout(Math.floor(5 + Math.random() * 295)) });
          else l = await c.acquire('f3/m', { lease: 15, wait: 30 });
        } catch (e) {
          if (w >= 4 && (e.code === 'timeout' || e.name === 'TimeoutError' || e.name === 'AbortError')) { gaveUp++; await sleep(20); continue; }
          errors.push(`worker ${w}: acquire: ${e.code} ${e.name} ${e.message}`);
          await sleep(20);
          continue;
        }
        const h = { w, token: l.token, start: Date.now(), end: 0 };
        holds.push(h);
        // One hold in twenty spans about a fault (a lost grant shows as two holders).
        await sleep(Math.random() < 0.05 ? 2000 + Math.random() * 1000 : Math.random() * 20);
        if (l.lost.aborted) errors.push(`worker ${w}: token ${l.token} lost while held: ${l.lost.reason?.message}`);
        h.end = Date.now();
        try {
          await l.release();
        } catch (e) {
          errors.push(`worker ${w}: release of token ${l.token}: ${e.code} ${e.message}`);
        }
      }
    } finally {
      await c.close();
    }
  });
  const failed = workers.map((p) => p.catch((e) => errors.push('worker died: ' + e.stack)));
  for (let round = 0; round < ROUNDS; round++) {
    await sleep(1500);
    const a = await waitFor('an active', 20000, () => activeOf(nodes));
    const faultAt = Date.now();
    await fault(a);
    await waitFor('a new active', 20000, async () => { const b = await activeOf(nodes); return b && b !== a && b; });
    if (a.proc.exitCode !== null || a.proc.signalCode) await a.start(); else a.proc.kill('SIGCONT');
    await waitFor('every node up and following one active', 30000, async () => {
      const s = await Promise.all(nodes.map((n) => getQuick(n, '/cluster')));
      const act = nodes.filter((n, i) => s[i].role === 'active');
      return act.length === 1 && s.every((x) => x.role === 'active' || (x.role === 'standby' && x.active === act[0].url));
    }).catch(async (e) => t.diagnostic('round ' + round + ': ' + e.message + ' ' + JSON.stringify(await Promise.all(nodes.map((n) => n.get('/cluster').then((x) => [x.role, x.active], (e) => e.message))))));
    // The cluster grants again after each fault (a hold that spans it
    // ends within 3 s; the waiters move to the new active).
    await waitFor(`a grant after fault ${round}`, 20000, () => holds.some((h) => h.start > faultAt))
      .catch((e) => errors.push(e.message));
    t.diagnostic(`round ${round}: ${holds.length} grants so far, ${gaveUp} given up, ${errors.length} errors`);
  }
  await sleep(1500);
  stop = true;
  await Promise.all(failed);

  const byStart = holds.slice().sort((x, y) => x.start - y.start);
  const problems = [...errors];
  for (let i = 1; i < byStart.length; i++) {
    const p = byStart[i - 1], q = byStart[i];
    if (q.start < p.end) problems.push(`two holders: worker ${p.w} token ${p.token} [${p.start}, ${p.end}] and worker ${q.w} token ${q.token} from ${q.start}`);
    if (!(q.token > p.token)) problems.push(`token ${q.token} (worker ${q.w}) granted after ${p.token} (worker ${p.w})`);
  }
  const a = await waitFor('an active', 20000, () => activeOf(nodes));
  // Nothing left behind: no holder, no waiter (a ghost waiter would take
  // the next grant and hold it unclaimed).
  const left = await waitFor('f3/m free', 20000, async () => { const s = await a.get('/locks/f3/m'); return (!s.holder && !s.waiters) && s; }).catch((e) => e.message);
  if (typeof left === 'string') problems.push(left);
  assert.deepEqual(problems, [], `${holds.length} grants`);
}

test('kill -9 of the active under load, sync_standbys 1: one holder at a time, tokens rise, releases resolve', async (t) => {
  await stress(t, (a) => a.kill());
});

test('SIGINT handoff of the active under load, sync_standbys 1: one holder at a time, tokens rise, releases resolve', async (t) => {
  await stress(t, async (a) => {
    a.proc.kill('SIGINT');
    await a.exited;
  });
});

test('SIGSTOP of the active until a standby took over, under load, sync_standbys 1: one holder at a time, tokens rise, releases resolve', async (t) => {
  await stress(t, (a) => { a.proc.kill('SIGSTOP'); });
});

// killingProxy forwards the client's requests to node a until a's answer
// to one satisfies dies(req, res): then it kills a (kill -9) and cuts that
// answer off, as an active that dies before its answer leaves. It returns
// its url, the requests seen, and killed (null until then, then a promise
// that settles once a is dead and the answer cut).
async function killingProxy(t, a, dies) {
  const px = { url: '', seen: [], killed: null };
  const srv = (TRANSPORT === 'http2' ? http2 : http).createServer((req, res) => {
    px.seen.push(req.method + ' ' + req.url);
    const up = http.request(a.url + req.url, { method: req.method, headers: endToEnd(req.headers) }, (r) => {
      if (!px.killed && dies(req, r)) {
        r.resume();
        px.killed = a.kill().then(() => { if (res.stream) res.stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR); else res.destroy(); });
        return;
      }
      res.writeHead(r.statusCode, endToEnd(r.headers));
      r.pipe(res);
    });
    up.on('error', () => res.destroy());
    req.pipe(up);
  });
  await new Promise((r) => srv.listen(0, `${NET}.9`, r));
  const socks = new Set();
  srv.on(TRANSPORT === 'http2' ? 'session' : 'connection', (s) => { socks.add(s); s.on('close', () => socks.delete(s)); });
  t.after(() => { for (const s of socks) s.destroy(); srv.close(); });
  px.url = `http://${NET}.9:${srv.address().port}`;
  return px;
}

// A release that the active makes and replicates, then dies (kill -9)
// before its answer reaches the holder: the promoted node has given the
// key to the waiter (a newer token). The holder's release must resolve
// (it took effect) and must not release the waiter's grant.
test('a release made by an active that dies before answering resolves, and the next holder keeps its grant', async (t) => {
  const nodes = await startTrio(t, ['--sync-standbys', '1']);
  const [a, b, c] = nodes;
  // The holder reaches a through a proxy that, once a's answer to the
  // DELETE is in, kills a and cuts the holder's connection off.
  const px = await killingProxy(t, a, (req) => req.method === 'DELETE');
  const holder = new Client({ addresses: [px.url, b.url, c.url] });
  const waiter = new Client({ addresses: [a.url, b.url, c.url] });
  t.after(() => Promise.all([holder.close(), waiter.close()]));
  const l = await holder.acquire('f3/rel', { lease: 60 });
  const next = waiter.acquire('f3/rel', { lease: 60, wait: 30 });
  await waitFor('the waiter queued on a', 10000, async () => (await getQuick(a, '/locks/f3/rel')).waiters === 1);
  const released = l.release().then(() => 'resolved', (e) => 'rejected: ' + e.code + ' ' + e.message);
  const outcome = await released;
  assert.ok(px.killed, 'the DELETE was never answered by a: ' + px.seen.join(', '));
  await px.killed;
  const l2 = await next;
  assert.ok(l2.token > l.token, `token ${l2.token} after ${l.token}`);
  assert.equal(outcome, 'resolved');
  const act = await waitFor('an active', 20000, () => activeOf(nodes));
  assert.equal((await getQuick(act, '/locks/f3/rel')).holder?.token, l2.token, 'the next holder lost its grant');
  assert.equal(l2.lost.aborted, false);
  await l2.release();
});

// An acquire that the active grants (and replicates), then dies (kill -9)
// before its answer reaches the client: the client's repeat under the same
// Idempotency-Key on the promoted node must get that grant, not a second
// one, and leave no waiter behind. A second client, aborted while its
// acquire waits across the failover, must leave nothing held or queued.
test('an acquire granted by an active that dies before answering gets that grant from the promoted node', async (t) => {
  const nodes = await startTrio(t, ['--sync-standbys', '1']);
  const [a, b, c] = nodes;
  const px = await killingProxy(t, a, (req, r) => req.method === 'POST' && r.statusCode === 200);
  const first = new Client({ addresses: [a.url, b.url, c.url] });
  const viaProxy = new Client({ addresses: [px.url, b.url, c.url] });
  const quitter = new Client({ addresses: [a.url, b.url, c.url] });
  t.after(() => Promise.all([first.close(), viaProxy.close(), quitter.close()]));
  const l0 = await first.acquire('f3/acq', { lease: 60 });
  const pending = viaProxy.acquire('f3/acq', { lease: 60, wait: 30 });
  await waitFor('one waiter on a', 10000, async () => (await getQuick(a, '/locks/f3/acq')).waiters === 1);
  const ac = new AbortController();
  const quit = quitter.acquire('f3/acq', { lease: 60, wait: 30, signal: ac.signal }).then((l) => 'granted ' + l.token, (e) => 'gave up: ' + e.name);
  await waitFor('two waiters on a', 10000, async () => (await getQuick(a, '/locks/f3/acq')).waiters === 2);
  await l0.release(); // a grants to the proxied waiter, and dies before it hears
  const l = await pending;
  assert.ok(px.killed, 'a never granted through the proxy');
  await px.killed;
  ac.abort(); // the quitter gives up during the failover
  assert.equal(await quit, 'gave up: AbortError');
  assert.ok(l.token > l0.token, `token ${l.token} after ${l0.token}`);
  const act = await waitFor('an active', 20000, () => activeOf(nodes));
  const s = await getQuick(act, '/locks/f3/acq');
  assert.deepEqual(s.holders.map((h) => h.token), [l.token], 'holders on the promoted node');
  await l.release();
  await first.close(); await quitter.close();
  // Nothing left: no holder, no waiter (the quitter's place, kept for its
  // repeat, is settled or dropped).
  await waitFor('f3/acq free', 15000, async () => { const x = await getQuick(act, '/locks/f3/acq'); return !x.holder && !x.waiters; });
});

// An acquire that has waited longer than retryFor when its active dies
// (kill -9) must move to the promoted node like one that has just been
// sent: retryFor bounds the failures of a failover, not the wait before it.
test('an acquire that waited past retryFor when the active dies waits on the promoted node', async (t) => {
  const nodes = await startTrio(t, ['--sync-standbys', '1']);
  const [a, b, c] = nodes;
  const holder = new Client({ addresses: [a.url, b.url, c.url] });
  const waiter = new Client({ addresses: [a.url, b.url, c.url], retryFor: 1000 });
  t.after(() => Promise.all([holder.close(), waiter.close()]));
  const l0 = await holder.acquire('f3/long', { lease: 60 });
  const pending = waiter.acquire('f3/long', { lease: 60, wait: 60 }).then((l) => l, (e) => e);
  await waitFor('the waiter queued on a', 10000, async () => (await getQuick(a, '/locks/f3/long')).waiters === 1);
  await sleep(1500); // waiting longer than retryFor
  await a.kill();
  const act = await waitFor('a new active', 20000, async () => { const x = await activeOf(nodes); return x && x !== a && x; });
  await waitFor('the waiter queued on the promoted node', 15000, async () => (await getQuick(act, '/locks/f3/long')).waiters === 1);
  await l0.release();
  const l = await pending;
  assert.ok(!(l instanceof Error), 'the waiting acquire failed: ' + l?.message);
  assert.ok(l.token > l0.token);
  await l.release();
});

// An acquire that waits (60 s) through more kill -9 failovers than the
// client has addresses: each breaks its connection, and it moves on to the
// promoted node, then by the handoff's 307 back to the restarted first
// node. It must still wait, and be granted when the holder releases (as
// TestWaitingAcquireOutlivesManyFailovers for the Go client).
test('an acquire waits through many failovers', async (t) => {
  const nodes = await startTrio(t, ['--sync-standbys', '1']);
  const [a, b, c] = nodes;
  const holder = new Client({ addresses: [a.url, b.url, c.url] });
  const waiter = new Client({ addresses: [a.url, b.url, c.url] });
  t.after(() => Promise.all([holder.close(), waiter.close()]));
  const l0 = await holder.acquire('f3/many', { lease: 120 });
  let ended = null;
  const pending = waiter.acquire('f3/many', { lease: 60, wait: 90 }).then((l) => (ended = l), (e) => (ended = e));
  for (let k = 0; k < 7; k++) {
    await waitFor(`the waiter queued on a (after ${k} kills)`, 15000, async () => {
      if (ended) throw new Error('the acquire ended: ' + (ended.message ?? ended.token));
      return (await getQuick(a, '/locks/f3/many')).waiters === 1;
    });
    await sleep(2500); // each failover its own (as in the Go test)
    await a.kill();
    await waitFor('a new active', 20000, async () => { const x = await activeOf(nodes); return x && x !== a && x; });
    await a.start();
    await waitFor('a active again', 30000, async () => (await getQuick(a, '/cluster')).role === 'active');
  }
  await l0.release();
  const l = await pending;
  assert.ok(!(l instanceof Error), 'the waiting acquire failed: ' + l?.message);
  assert.ok(l.token > l0.token);
  await l.release();
});
