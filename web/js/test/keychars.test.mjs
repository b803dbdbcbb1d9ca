// Keys are taken literally (SPEC section 2: the rest of the path, 1–256
// bytes of UTF-8 without control characters), whatever they contain.
// Public reports of JavaScript clients that put a name into a URL path
// unescaped: splitio/javascript-client#364 ("test/key" and "test\key"
// answered 404; "%" a 400, fixed in #463), KeychainMDIP/kc#1289 ('#', '?'
// and '/' truncated names or added query parameters). Here each such key
// must be locked, shown and released as written, and stay its own lock
// (api.test.mjs has one key with '?', '#', '%' and one with dot
// segments; this adds empty segments, '%XX' written literally beside the
// character it would decode to, and '\', which a URL parser turns into '/'
// for http: URLs). Passed as written.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from './client.mjs';
import { startNode, NET } from './harness.mjs';

const keys = ['100%', '%2F', '/', 'a%2Fb', 'a/b', '%41', 'A', '/lead', 'trail/', 'a//b', '//', 'sp ace+plus', 'semi;colon&amp=',
  "q'uo\"te", 'back\\slash', 'back/slash'];

test('keys with empty segments, literal %XX and backslashes are each their own lock', async (t) => {
  const n = await startNode(t, { host: NET + '.41' });
  const c = new Client({ addresses: [n.url] });
  t.after(() => c.close());
  const held = [];
  for (const key of keys) {
    const l = await c.acquire(key, { lease: 30, wait: 5 });
    assert.equal(l.key, key);
    const s = await c.status(key);
    assert.equal(s.key, key, 'status of ' + JSON.stringify(key));
    assert.equal(s.holder?.token, l.token, 'holder of ' + JSON.stringify(key));
    held.push(l);
  }
  // Each key is its own lock: none of them folded onto another.
  const all = await c.list({ limit: 1000 });
  assert.deepEqual(all.locks.map((x) => x.key).sort(), [...keys].sort());
  for (const l of held) {
    await l.release();
    const s = await c.status(l.key).catch((e) => e);
    assert.ok(!s.holder, 'still held after release: ' + JSON.stringify(l.key));
  }
});
