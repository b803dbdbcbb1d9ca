// Arguments the client refuses itself, before any request: a BatonError
// "invalid_argument" whose `field` names the parameter, as the node's 400s
// do (README, "JavaScript client"), never a bare TypeError or URIError,
// and never a call that goes on for ever.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Client, BatonError } from './client.mjs';

const invalid = (field) => (e) => {
  assert.ok(e instanceof BatonError, 'not a BatonError: ' + e);
  assert.equal(e.code, 'invalid_argument', e.message);
  assert.equal(e.field, field, e.message);
  return true;
};

// A lone surrogate cannot be written in UTF-8 (so in no key):
// encodeURIComponent throws URIError "URI malformed" on it.
test('a key with a lone surrogate is refused naming key', async (t) => {
  const c = new Client({ addresses: ['http://127.0.0.1:9'], retryFor: 0 });
  t.after(() => c.close());
  for (const key of ['a\ud800', '\udc00b', 'x/\ud83d']) {
    await assert.rejects(c.acquire(key, { wait: 1 }), invalid('key'), 'acquire ' + JSON.stringify(key));
    await assert.rejects(c.status(key), invalid('key'), 'status');
    await assert.rejects(c.release(key, 5), invalid('key'), 'release');
    await assert.rejects(c.renew(key, 5, 10), invalid('key'), 'renew');
  }
});

// retryFor: "2s" compared as NaN: no node answering, the call never ended.
test('a retryFor that is not a number of ms is refused naming retryFor', () => {
  for (const retryFor of ['2s', NaN, -1, {}, '5', true, [], [5]]) {
    assert.throws(() => new Client({ addresses: ['http://127.0.0.1:9'], retryFor }), invalid('retryFor'), String(retryFor));
  }
  for (const retryFor of [0, 2500, undefined, null]) new Client({ addresses: ['http://127.0.0.1:9'], retryFor });
});

// Options given as null (as WebIDL's dictionaries take it) are no
// options; anything else that is not an object is refused naming
// options. Before: acquire(key, null) threw a bare TypeError from
// destructuring, and acquire(key, 5) ran with no options at all.
test('options that are not an object are refused naming options; null is none', async (t) => {
  assert.throws(() => new Client(null), invalid('addresses'));
  assert.throws(() => new Client(5), invalid('options'));
  const c = new Client({ addresses: ['http://127.0.0.1:9'], retryFor: 0 });
  t.after(() => c.close());
  for (const bad of [5, 'wait=1', true]) {
    const what = JSON.stringify(bad);
    await assert.rejects(c.acquire('k', bad), invalid('options'), 'acquire ' + what);
    await assert.rejects(c.withLock('k', () => {}, bad), invalid('options'), 'withLock ' + what);
    await assert.rejects(c.status('k', bad), invalid('options'), 'status ' + what);
    await assert.rejects(c.list(bad), invalid('options'), 'list ' + what);
    await assert.rejects(c.cluster(bad), invalid('options'), 'cluster ' + what);
  }
  // null: no options; nothing answers at 127.0.0.1:9, so each call gets
  // as far as the network and fails there, not on its arguments.
  const down = (e) => e instanceof BatonError && e.code === 'unavailable';
  await assert.rejects(c.acquire('k', null), down, 'acquire null');
  await assert.rejects(c.status('k', null), down, 'status null');
  await assert.rejects(c.list(null), down, 'list null');
  await assert.rejects(c.cluster(null), down, 'cluster null');
});

// A token that no HTTP header can carry ("…" pasted from the README, a
// newline from a file read whole, a space): fetch throws a TypeError
// before any request, which the client took for a node that did not
// answer: it retried for retryFor (10 s by default) and failed
// "unavailable: no node answered". It is the caller's argument, refused
// naming token, also when set on the client later and for a release.
test('a token no header can carry is refused naming token', async (t) => {
  for (const token of ['…', 'a\nb', 'a b', 'é']) {
    const c = new Client({ addresses: ['http://127.0.0.1:9'], token, retryFor: 0 });
    t.after(() => c.close());
    await assert.rejects(c.status('k'), invalid('token'), 'status ' + JSON.stringify(token));
    await assert.rejects(c.acquire('k', { wait: 1 }), invalid('token'), 'acquire ' + JSON.stringify(token));
    await assert.rejects(c.release('k', 5), invalid('token'), 'release ' + JSON.stringify(token));
    const later = new Client({ addresses: ['http://127.0.0.1:9'], retryFor: 0 });
    t.after(() => later.close());
    later.token = token;
    await assert.rejects(later.list(), invalid('token'), 'list, token set later ' + JSON.stringify(token));
  }
});

// The same for a lock's token given to release or renew (one kept
// elsewhere: a newline from a file read whole, full-width digits): it was
// taken for a node that did not answer, retried for 5 s (release) or
// retryFor (renew, 10 s) with every node marked down, then "unavailable"
// (a tester's report).
test('a lock token no header can carry is refused naming token', async (t) => {
  const c = new Client({ addresses: ['http://127.0.0.1:9'], retryFor: 0 });
  t.after(() => c.close());
  for (const token of ['1\n2', '\uff11\uff12', '1 2', '\u2026']) {
    await assert.rejects(c.release('k', token), invalid('token'), 'release ' + JSON.stringify(token));
    await assert.rejects(c.renew('k', token, 10), invalid('token'), 'renew ' + JSON.stringify(token));
  }
});

// An acquire refused before any request (its token) left nothing to
// settle, yet it started the background settle of a cut-off grant, whose
// repeats were refused the same way for its whole 5 s: close() waited 5 s
// (breaker report, 4 of 4). Nothing is settled for a refusal that was
// never sent: close() resolves without waiting for a settle.
test('close after an acquire refused for its token does not wait for a settle', async () => {
  const c = new Client({ addresses: ['http://127.0.0.1:9'], token: 'a b', retryFor: 0 });
  await assert.rejects(c.acquire('k', { wait: 0.5 }), invalid('token'));
  const settle = 5000, start = Date.now();
  await c.close();
  assert.ok(Date.now() - start < settle / 2, `close took ${Date.now() - start} ms: it waited for a settle of a request never sent`);
});

// A key or a parameter longer than the API allows (SPEC: a key is 1–256
// bytes of UTF-8, an owner 1–128). One long enough (tens of KB) makes a
// request line the node refuses before reading it (431, with no CORS
// header): a page on another origin saw only "Failed to fetch", each
// attempt took over a second, so the retry window started again after
// each one, and the acquire went on for 98 s in Chromium before failing
// "unavailable" (a 200 KB message quoting the URL). The client refuses a
// key or a parameter of more than 256 characters (so more than 256
// bytes) itself, naming it, before any request; a shorter one the node
// refuses at once.
test('a key or a parameter over 256 characters is refused naming it, before any request', async (t) => {
  const sent = [];
  const fetch = async (url) => {
    sent.push(url);
    const key = decodeURIComponent(new URL(url).pathname.slice('/locks/'.length));
    return new Response(JSON.stringify({ key, token: 7, lease: 30, expires_at: '2030-01-01T00:00:00Z' }),
      { status: 200, headers: { 'content-type': 'application/json', 'lock-token': '7' } });
  };
  const c = new Client({ addresses: ['http://127.0.0.1:9'], retryFor: 0, fetch, transport: 'fetch' });
  t.after(() => c.close());
  for (const key of ['k'.repeat(257), 'é'.repeat(257), 'k'.repeat(200000)]) {
    await assert.rejects(c.acquire(key), invalid('key'), 'acquire, key of ' + key.length + ' characters');
    await assert.rejects(c.status(key), invalid('key'), 'status');
    await assert.rejects(c.release(key, 5), invalid('key'), 'release');
    await assert.rejects(c.renew(key, 5, 10), invalid('key'), 'renew');
  }
  for (const owner of ['o'.repeat(257), 'o'.repeat(200000)]) {
    await assert.rejects(c.acquire('k', { owner }), invalid('owner'), 'owner of ' + owner.length + ' characters');
  }
  await assert.rejects(c.list({ prefix: 'p'.repeat(200000) }), invalid('prefix'), 'list');
  await assert.rejects(c.acquire('k', { mode: 'm'.repeat(200000) }), invalid('mode'), 'mode');
  assert.deepEqual(sent, [], 'requests were sent');
  const l = await c.acquire('k'.repeat(256), { owner: 'é'.repeat(64) });
  assert.equal(l.token, 7, 'the longest key and owner allowed are sent');
  assert.equal(sent.length, 1);
});

// A `signal` that is not an AbortSignal (true, {}, a string: a mistyped
// option) made fetch throw a TypeError taken for an unreachable node; the
// pause before the next round then threw in its timer, an uncaught
// TypeError ("signal?.removeEventListener is not a function") that ended
// the caller's process. It is refused before any request, naming signal.
test('a signal that is not an AbortSignal is refused naming signal', async (t) => {
  let sent = 0;
  const c = new Client({ addresses: ['http://127.0.0.1:9'], fetch: async () => { sent++; throw new TypeError('fetch failed'); } });
  t.after(() => c.close());
  for (const signal of [true, {}, 'abort']) {
    await assert.rejects(c.acquire('k', { wait: 1, signal }), invalid('signal'), 'acquire ' + String(signal));
    await assert.rejects(c.acquire('k', { signal }), invalid('signal'), 'acquire, no wait, ' + String(signal));
    await assert.rejects(c.status('k', { signal }), invalid('signal'), 'status');
    await assert.rejects(c.list({ signal }), invalid('signal'), 'list');
    await assert.rejects(c.renew('k', 5, 10, signal), invalid('signal'), 'renew');
  }
  assert.equal(sent, 0);
});
