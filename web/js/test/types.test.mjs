// baton.d.ts is kept by hand: it must declare exactly what baton.js
// exports, and every method and property it declares for a class must
// exist on that class in the module.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as baton from '../baton.js';
import { Client, Lock, BatonError } from '../baton.js';

const dts = readFileSync(new URL('../baton.d.ts', import.meta.url), 'utf8');

/** The members declared in the body of `export declare class name`. */
function classMembers(name) {
  const m = new RegExp('export declare class ' + name + '\\b[^{]*\\{([\\s\\S]*?)\\n\\}').exec(dts);
  assert.ok(m, 'baton.d.ts declares no class ' + name);
  const members = new Map();
  for (const line of m[1].split('\n')) {
    const d = /^\s+(?:readonly\s+)?([A-Za-z_$][\w$]*)(\??)\s*(<[^>]*>)?\s*([(:])/.exec(line);
    if (d && d[1] !== 'constructor') members.set(d[1], { method: d[4] === '(', optional: d[2] === '?' });
  }
  return members;
}

test('baton.d.ts declares exactly the runtime exports of baton.js', () => {
  const declared = [...dts.matchAll(/^export declare (?:class|function|const) ([A-Za-z_$][\w$]*)/gm)].map((m) => m[1]).sort();
  assert.deepEqual(declared, Object.keys(baton).sort());
});

test('the declared classes match the module', () => {
  // Instances to read properties from: a Client, a Lock (from a grant
  // answer, no server needed), a BatonError.
  const client = new Client({ addresses: ['http://127.0.0.1:9'] });
  const lock = new Lock(client, { key: 'k', token: 7, lease: 60, expires_at: new Date(Date.now() + 60000).toISOString() }, Date.now());
  const err = new BatonError(409, 'not_holder', 'm', 'f');
  const instances = { Client: client, Lock: lock, BatonError: err };
  for (const [name, inst] of Object.entries(instances)) {
    const members = classMembers(name);
    assert.ok(members.size > 0, name);
    for (const [m, { method, optional }] of members) {
      if (method) {
        assert.equal(typeof inst[m], 'function', `${name}.${m} is declared a method but is ${typeof inst[m]}`);
      } else if (!optional) {
        assert.ok(m in inst, `${name}.${m} is declared but absent`);
      }
    }
    // Every public method of the class is declared.
    const proto = Object.getPrototypeOf(inst);
    for (const m of Object.getOwnPropertyNames(proto)) {
      if (m === 'constructor' || m.startsWith('_')) continue;
      assert.ok(members.has(m), `${name}.${m} is in baton.js but not in baton.d.ts`);
    }
    for (const m of Object.keys(inst)) {
      if (m.startsWith('_')) continue;
      assert.ok(members.has(m), `${name}.${m} is in baton.js but not in baton.d.ts`);
    }
  }
  assert.equal(lock.expiresAt instanceof Date, true);
  assert.equal(lock.lost instanceof AbortSignal, true);
  // Its lease watch is unref'd: it keeps no process running.
});

test('baton-node.d.ts declares exactly the runtime exports of baton-node.js, its Client what it adds', async () => {
  const node = await import('../baton-node.js');
  const nodeDts = readFileSync(new URL('../baton-node.d.ts', import.meta.url), 'utf8');
  const declared = [...nodeDts.matchAll(/^export declare (?:class|function|const) ([A-Za-z_$][\w$]*)/gm)].map((m) => m[1]);
  for (const m of nodeDts.matchAll(/^export \{([^}]*)\} from/gm)) declared.push(...m[1].split(',').map((s) => s.trim()));
  assert.deepEqual(declared.sort(), Object.keys(node).sort());
  // The re-exports are baton.js's own classes: instanceof holds across both.
  assert.equal(node.BatonError, BatonError);
  assert.equal(node.Lock, Lock);

  const body = /export declare class Client\b[^{]*\{([\s\S]*?)\n\}/.exec(nodeDts);
  assert.ok(body, 'baton-node.d.ts declares no class Client');
  const added = new Set([...body[1].matchAll(/^\s+(?:readonly\s+)?([A-Za-z_$][\w$]*)\??\s*[(:]/gm)].map((m) => m[1]).filter((m) => m !== 'constructor'));
  const base = classMembers('Client');
  const c = new node.Client({ addresses: ['http://127.0.0.1:9'] });
  for (const m of added) assert.ok(m in c, `Client.${m} is declared in baton-node.d.ts but absent`);
  const own = [...Object.getOwnPropertyNames(Object.getPrototypeOf(c)), ...Object.keys(c)];
  for (const m of own) {
    if (m === 'constructor' || m.startsWith('_')) continue;
    assert.ok(added.has(m) || base.has(m), `Client.${m} is in baton-node.js but in neither baton-node.d.ts nor baton.d.ts`);
  }
  c.close();
});
