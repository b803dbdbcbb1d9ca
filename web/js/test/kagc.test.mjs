// keepAlive's per-attempt timeout must fire after a garbage collection:
// Node 20 collects an AbortSignal.timeout that only AbortSignal.any
// holds, and it never fires; the renewal then waited on a silent active
// until the lease ran out, and the lock was lost although another node
// would have renewed it (README "Cluster": each renewal attempt gets a
// quarter of the lease). baton.js itself, with a fetch stub.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { Client } from '../baton.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc');

test('a keepAlive renewal that a silent node leaves unanswered moves on, garbage collections or not', async (t) => {
  const seen = [];
  // A lease of 4 s: the renewal goes at 2 s, its attempt on the silent
  // node ends at 3 s, the other node renews before 4 s. With 1 s, the
  // 250 ms between that attempt's end and the lease's was too little on
  // a loaded machine (a collection every 20 ms, timers late).
  const grant = () => new Response(JSON.stringify({ key: 'k', token: 5, lease: 4, expires_at: new Date(Date.now() + 4000).toISOString() }), { status: 200, headers: { 'Content-Type': 'application/json' } });
  const fetch = (url, o) => {
    seen.push(o.method + ' ' + new URL(url).host);
    if (o.method === 'PATCH' && url.startsWith('http://silent.invalid')) {
      return new Promise((_, reject) => o.signal?.addEventListener('abort', () => reject(o.signal.reason)));
    }
    return Promise.resolve(grant());
  };
  const c = new Client({ addresses: ['http://silent.invalid', 'http://other.invalid'], fetch });
  const l = await c.acquire('k');
  const every = setInterval(gc, 20);
  t.after(() => clearInterval(every));
  l.keepAlive();
  await new Promise((r) => setTimeout(r, 5000));
  assert.equal(l.lost.aborted, false, 'lost: ' + l.lost.reason?.message + '; calls: ' + seen.join(', '));
  assert.ok(seen.includes('PATCH other.invalid'), 'calls: ' + seen.join(', '));
  await l.release();
  await c.close();
});

// AbortSignal.timeout takes whole milliseconds (Node: RangeError
// otherwise): a lease of 1.002 s made every renewal attempt throw
// (a quarter lease of 250.5 ms) and the lock was lost; an acquire's
// attempt limit (wait + 3 s) with a wait of 0.0001 s threw the same.
test('a lease or a wait that is not a whole number of quarter milliseconds', async () => {
  const seen = [];
  const fetch = (url, o) => {
    seen.push(o.method);
    return Promise.resolve(new Response(JSON.stringify({ key: 'k', token: 5, lease: 1.002, expires_at: new Date(Date.now() + 1002).toISOString() }), { status: 200 }));
  };
  const c = new Client({ addresses: ['http://one.invalid'], fetch });
  const l = await c.acquire('k', { lease: 1.002, wait: 0.0001 });
  l.keepAlive();
  await new Promise((r) => setTimeout(r, 2500));
  assert.equal(l.lost.aborted, false, 'lost: ' + l.lost.reason?.message + '; calls: ' + seen.join(', '));
  await l.release();
  await c.close();
});
