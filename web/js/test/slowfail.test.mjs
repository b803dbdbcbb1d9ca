// An address where every attempt fails after more than a second, without
// an answer: a name whose lookup fails slowly, a firewall or a proxy that
// resets each connection after a while. An attempt in flight over a
// second counts as served (a long poll a failover broke) and starts the
// retry window again; so every attempt did, and a call never failed: it
// kept trying for ever instead of failing "unavailable" once retryFor ran
// out (README, "JavaScript client"). A slow failure starts the window
// again once, until an answer comes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { Client, BatonError } from './client.mjs';
import { sleep, HOST } from './harness.mjs';

/** A TCP server that takes each connection and resets it after ms. */
async function resetting(t, ms) {
  const open = new Set();
  const srv = net.createServer((s) => {
    open.add(s);
    s.on('error', () => {});
    const timer = setTimeout(() => s.resetAndDestroy(), ms);
    s.on('close', () => { clearTimeout(timer); open.delete(s); });
  });
  await new Promise((r) => srv.listen(0, HOST, r));
  t.after(() => { for (const s of open) s.destroy(); srv.close(); });
  return `http://${HOST}:${srv.address().port}`;
}

const within = (p, ms) => Promise.race([
  p.then(() => 'answered', (e) => (e instanceof BatonError ? e.code : 'not a BatonError: ' + e)),
  sleep(ms).then(() => 'still trying after ' + ms + ' ms'),
]);

for (const [what, call] of [
  ['a read', (c) => c.list()],
  ['an acquire without a wait', (c) => c.acquire('slow/1')],
  ['an acquire with a wait', (c) => c.acquire('slow/2', { wait: 30 })],
]) {
  test(what + ' fails unavailable when every attempt fails slowly', { timeout: 60000 }, async (t) => {
    const c = new Client({ addresses: [await resetting(t, 1200)], retryFor: 500 });
    t.after(() => c.close());
    // The window: a slow failure, then 500 ms of more: about 3 attempts.
    assert.equal(await within(call(c), 15000), 'unavailable');
  });
}
