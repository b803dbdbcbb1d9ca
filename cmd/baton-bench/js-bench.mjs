// js-bench.mjs: the JavaScript client's throughput, the `uncontended`
// workload of baton-bench in Node: --c loops (default 16), each taking and
// releasing its own key with baton.js, for --duration seconds after
// --warmup seconds. Prints one JSON line: cycles, seconds, cycles_per_sec,
// cpu_us_per_cycle (the process's CPU time in the window per cycle), errors.
// scripts/js-bench.sh runs it beside the Go client on one node.
//
// --transport http2 (default) is baton-node.js, the Node entry: the client
// over node:http2, calls multiplexed on h2c connections like the Go
// client's; --transport fetch is baton.js over Node's own fetch (undici,
// HTTP/1.1), what a browser-style import gets; --transport node-http
// hands baton.js a fetch built on node:http with a keep-alive agent (the
// client's `fetch` option), to tell the client's own cost from fetch's.
//
//   node cmd/baton-bench/js-bench.mjs --addr http://127.0.0.1:7070 --c 16 --duration 5
import http from 'node:http';
import { parseArgs } from 'node:util';
import { Client } from '../../web/js/baton-node.js';

const { values: o } = parseArgs({
  options: {
    addr: { type: 'string', default: 'http://127.0.0.1:7070' },
    c: { type: 'string', default: '16' },
    duration: { type: 'string', default: '5' },
    warmup: { type: 'string', default: '1' },
    lease: { type: 'string', default: '30' },
    transport: { type: 'string', default: 'http2' },
  },
});
if (!['http2', 'fetch', 'node-http'].includes(o.transport)) throw new Error(`--transport: ${o.transport} is not http2, fetch or node-http`);

// httpFetch is the part of fetch that baton.js uses (method, headers,
// signal; status, headers, text, json), over node:http with keep-alive.
// No redirects: run it against the active.
const agent = new http.Agent({ keepAlive: true });
function httpFetch(url, init = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: init.method, headers: init.headers, agent, signal: init.signal }, (res) => {
      const chunks = [];
      res.on('data', (d) => chunks.push(d));
      res.on('end', () => {
        const headers = new Headers();
        for (const [k, v] of Object.entries(res.headers)) headers.set(k, Array.isArray(v) ? v.join(', ') : v);
        resolve(new Response(res.statusCode === 204 ? null : Buffer.concat(chunks), { status: res.statusCode, headers }));
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}
const c = Number(o.c), duration = Number(o.duration) * 1000, warmup = Number(o.warmup) * 1000, lease = Number(o.lease);
for (const [k, v] of Object.entries({ c, duration, warmup, lease })) {
  if (!(v >= 0) || (k === 'c' && !Number.isInteger(v))) throw new Error(`--${k}: ${o[k]} is not a valid number`);
}

const client = o.transport === 'node-http'
  ? new Client({ addresses: o.addr.split(','), fetch: httpFetch })
  : new Client({ addresses: o.addr.split(','), transport: o.transport });
const t0 = performance.now(), start = t0 + warmup, end = start + duration;
let cycles = 0, errors = 0, cpu0 = null, cpu = null;
// The process's CPU time over the measured window, per cycle: the client's
// own cost, which a shared machine's load does not inflate as much.
setTimeout(() => { cpu0 = process.cpuUsage(); }, warmup);
setTimeout(() => { cpu = process.cpuUsage(cpu0 ?? undefined); }, warmup + duration);
async function loop(i) {
  const key = `js-bench/u/${i}`;
  for (;;) {
    const now = performance.now();
    if (now >= end) return;
    try {
      const l = await client.acquire(key, { lease });
      await l.release();
      if (now >= start) cycles++;
    } catch (e) {
      if (++errors > 100) throw e;
    }
  }
}
await Promise.all(Array.from({ length: c }, (_, i) => loop(i)));
const secs = duration / 1000;
agent.destroy();
client.close();
const cpuPerCycle = cpu && cycles ? Math.round((cpu.user + cpu.system) / cycles) : null;
console.log(JSON.stringify({ client: 'js', transport: o.transport, c, cycles, seconds: secs, cycles_per_sec: Math.round(cycles / secs), cpu_us_per_cycle: cpuPerCycle, errors }));
