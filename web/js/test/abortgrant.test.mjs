// An acquire whose grant is made but never reaches the caller (aborted
// while the answer is on its way, or given up as "unavailable" because
// every answer was cut): the grant is released, not left held for its
// lease (as the Go client settles it under the Idempotency-Key).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { Client } from './client.mjs';
import { startNode, waitFor, listenProxy, endToEnd } from './harness.mjs';

/**
 * A proxy to node n that passes the node's answer on unless
 * cut(req, upstreamResponse, res) returns true (it then deals with res).
 */
function proxy(t, n, cut) {
  return listenProxy(t, async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const up = http.request(n.url + req.url, { method: req.method, headers: endToEnd(req.headers) }, (ur) => {
      const body = [];
      ur.on('data', (c) => body.push(c));
      ur.on('end', () => {
        if (req.method === 'POST' && ur.statusCode === 200 && cut(req, ur, res)) return;
        res.writeHead(ur.statusCode, endToEnd(ur.headers));
        res.end(Buffer.concat(body));
      });
    });
    up.end(Buffer.concat(chunks));
  });
}

test('an acquire aborted while its grant is on its way leaves no holder', async (t) => {
  const n = await startNode(t);
  let granted, heldBack = false;
  const grantedP = new Promise((r) => { granted = r; });
  const { url } = await proxy(t, n, () => {
    if (heldBack) return false;
    heldBack = true;
    granted(); // held back: the node has answered, the client hears nothing
    return true;
  });
  const direct = new Client({ addresses: [n.url] });
  const holder = await direct.acquire('ab/1', { lease: 30 });
  const c = new Client({ addresses: [url] });
  const ac = new AbortController();
  const waiting = c.acquire('ab/1', { lease: 30, signal: ac.signal });
  await waitFor('one waiter', 15000, async () => (await direct.status('ab/1')).waiters === 1);
  await holder.release();
  await grantedP;
  ac.abort(new Error('the user went away'));
  await assert.rejects(waiting, /the user went away/);
  await waitFor('no holder', 15000, async () => (await direct.status('ab/1')).holder === null);
});

test('an acquire that gives up unavailable, its grants cut off, leaves no holder', async (t) => {
  const n = await startNode(t);
  let cutting = true;
  // Every grant's answer is cut (the stream reset) while cutting.
  const { url } = await proxy(t, n, (req, ur, res) => cutting && (res.destroy(), true));
  const c = new Client({ addresses: [url], retryFor: 300 });
  await assert.rejects(c.acquire('ab/2', { lease: 30 }), (e) => e.code === 'unavailable');
  const direct = new Client({ addresses: [n.url] });
  assert.notEqual((await direct.status('ab/2')).holder, null, 'the node granted it');
  cutting = false; // the node answers again: the grant is settled
  await waitFor('no holder', 15000, async () => (await direct.status('ab/2')).holder === null);
});
