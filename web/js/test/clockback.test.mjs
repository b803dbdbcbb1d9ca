// The wall clock stepped back (NTP, a resumed VM, someone's `date`) while
// a lock was held: its lease watch, due at the end of the lease, found
// Date.now() short of its deadline by the step and waited again, so
// `lost` fired an hour late, the lock long taken by another. Deadlines
// measured on Date.now() moved the same way: a release's 5 s of retries
// and a call's retryFor went on for the hour. The client now measures them
// on a clock that never goes back (performance.now(), and Date.now() when
// that runs ahead).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from './client.mjs';
import { startNode, sleep, freePort, HOST } from './harness.mjs';

const HOUR = 3600e3;

/**
 * A step back of Date.now() by an hour, until the test ends (restored
 * before the after hooks later registered, such as a client's close(),
 * which waits for a release).
 */
function clock(t) {
  const real = Date.now;
  t.after(() => { Date.now = real; });
  return { stepBack: () => { Date.now = () => real() - HOUR; } };
}

/** 'done' or 'rejected: ...' if p settles within ms, else the string late. */
const within = (p, ms, late) => Promise.race([
  p.then(() => 'done', (e) => 'rejected: ' + e.code),
  sleep(ms).then(() => late),
]);

const lostWithin = (l, ms) => within(new Promise((r) => l.lost.aborted ? r() : l.lost.addEventListener('abort', r)), ms, 'lost has not fired ' + ms + ' ms on');

test('a lock is lost when its lease runs out, the wall clock stepped back meanwhile', async (t) => {
  const { stepBack } = clock(t);
  const n = await startNode(t);
  const c = new Client({ addresses: [n.url] });
  t.after(() => c.close());
  const l = await c.acquire('clock/a', { lease: 2 });
  await sleep(300);
  stepBack();
  assert.equal(await lostWithin(l, 3000), 'done');
  assert.equal(l.lost.reason.code, 'lost');
});

test('a kept-alive lock whose renewals fail is lost when its lease runs out, the wall clock stepped back meanwhile', async (t) => {
  const { stepBack } = clock(t);
  const n = await startNode(t);
  const c = new Client({ addresses: [n.url], fetch: (u, i) => i.method === 'PATCH' ? Promise.reject(new TypeError('fetch failed')) : fetch(u, i) });
  t.after(() => c.close());
  const l = await c.acquire('clock/b', { lease: 2 });
  l.keepAlive();
  await sleep(300);
  stepBack();
  assert.equal(await lostWithin(l, 3000), 'done');
  assert.equal(l.lost.reason.code, 'lost');
});

test("a release's retries and a call's retryFor end on time, the wall clock stepped back meanwhile", async (t) => {
  const { stepBack } = clock(t);
  const dead = `http://${HOST}:${await freePort()}`; // connections refused
  const c = new Client({ addresses: [dead], retryFor: 1500 });
  t.after(() => c.close());
  const r = c.release('clock/c', 1), s = c.status('clock/c');
  await sleep(300);
  stepBack();
  const [rr, sr] = await Promise.all([within(r, 7000, 'release still retrying 7 s on'), within(s, 4000, 'status still retrying 4 s on')]);
  assert.equal(rr, 'rejected: unavailable');
  assert.equal(sr, 'rejected: unavailable');
});
