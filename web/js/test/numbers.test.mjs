// Numbers a JavaScript caller may pass (SPEC section 1: tokens stay below
// 2^53 so that JavaScript reads them exactly; section 2: bad input is a 400
// naming the field). Public reports: qdrant/qdrant#6841 (the JS console sent
// id 215250709085334180 for 215250709085334181: JSON numbers above 2^53
// round, silently, to another id), sourcenetwork/defradb#5176. A token that
// JavaScript rounded (2^53 + 1 reads as 2^53) must be refused, never taken
// for another grant's; numbers String() writes with an exponent ("1e-7",
// "1e+21") must be read as the numbers they are. Passed as written.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Client, BatonError } from './client.mjs';
import { startNode, NET } from './harness.mjs';

const refused = (p, field) => assert.rejects(p, (e) => {
  assert.ok(e instanceof BatonError, String(e));
  assert.equal(e.status, 400, e.message);
  assert.equal(e.code, 'invalid_argument', e.message);
  assert.equal(e.field, field, e.message);
  return true;
});

test('rounded tokens, exponents, NaN and Infinity', async (t) => {
  const n = await startNode(t, { host: NET + '.42' });
  const c = new Client({ addresses: [n.url] });
  t.after(() => c.close());
  const l = await c.acquire('held', { lease: 30 });
  assert.ok(l.token < 2 ** 53 && Number.isSafeInteger(l.token));
  // eslint-disable-next-line no-loss-of-precision
  for (const token of [9007199254740993, 2 ** 53, 2 ** 53 + 2, 1e21, 1.5, -1, NaN, Infinity]) {
    await refused(c.release('held', token), 'token');
    await refused(c.renew('held', token), 'token');
  }
  for (const lease of [NaN, Infinity, -Infinity, 1e21]) await refused(c.acquire('x', { lease }), 'lease');
  await refused(c.acquire('x', { limit: 2 ** 53 + 2 }), 'limit');
  // 1e-7 s (String(): "1e-7") is 100 ns: a wait that runs out at once.
  await assert.rejects(c.acquire('held', { wait: 1e-7 }), { status: 408, code: 'timeout' });
  const st = await c.status('held');
  assert.equal(st.holder.token, l.token);
  assert.equal(st.waiters, 0);
  await l.release();
});
