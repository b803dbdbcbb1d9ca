// An acquire while no node answers keeps trying for retryFor, but not past
// its own wait: a caller that said "wait 0.5 s" was kept for retryFor (10 s
// by default) when its only node was down. The Go client and the CLI stop
// at the wait too. (Behaviour, not speed: retryFor here is a minute, the
// wait half a second, and the bound asserted is half the minute.)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from './client.mjs';
import { freePort, startNode, HOST } from './harness.mjs';

test('an acquire that no node answers gives up unavailable when its wait runs out, before retryFor', async () => {
  const c = new Client({ addresses: [`http://${HOST}:${await freePort()}`], retryFor: 60000 });
  const start = Date.now();
  await assert.rejects(c.acquire('wb/1', { lease: 5, wait: 0.5 }), (e) => e.code === 'unavailable');
  const took = Date.now() - start;
  assert.ok(took < 30000, `gave up after ${took} ms: retryFor (60 s), not the wait (0.5 s), ended it`);
  await c.close();
});

test('an acquire without a wait still keeps trying for retryFor while no node answers', async (t) => {
  const port = await freePort();
  const c = new Client({ addresses: [`http://${HOST}:${port}`], retryFor: 60000 });
  const taking = c.acquire('wb/2', { lease: 5 });
  // The node comes up a second later: the acquire, still trying, is granted.
  await new Promise((r) => setTimeout(r, 1000));
  await startNode(t, { port });
  const l = await taking;
  assert.ok(l.token > 0);
  await l.release();
  await c.close();
});
