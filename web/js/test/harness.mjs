// Test harness: real baton processes (the binary named by BATON_BIN, built
// by the Go test that runs these files), on free ports of NET.x.
import { spawn } from 'node:child_process';
import http from 'node:http';
import http2 from 'node:http2';
import { mkdtempSync, rmSync } from 'node:fs';
import net, { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TRANSPORT } from './client.mjs';

export const BIN = process.env.BATON_BIN;
if (!BIN) throw new Error('BATON_BIN must name the baton binary (go test ./web sets it)');

/**
 * The first three numbers of the loopback network nodes and proxies listen
 * on: CLUSTER_NET (such as "127.0.23", as the cluster tests take it), so
 * that runs side by side keep to addresses of their own; else 127.0.0.
 */
export const NET = process.env.CLUSTER_NET || '127.0.0';
/** The first address of NET, where a lone node or proxy listens. */
export const HOST = NET + '.1';

/** A free TCP port on host. */
export function freePort(host = HOST) {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, host, () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Polls cond (async) every 50 ms until it is truthy or `within` ms pass. */
export async function waitFor(what, within, cond) {
  const end = Date.now() + within;
  let last;
  for (;;) {
    try {
      last = await cond();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end) throw new Error('timed out waiting for ' + what + ' (last: ' + (last?.message ?? JSON.stringify(last)) + ')');
    await sleep(50);
  }
}

/**
 * A baton node. start() runs it with the given args and BATON_* env on
 * host:port, with its own data dir (kept across restart()).
 */
export class Node {
  constructor({ host = HOST, port, args = [], env = {}, scheme = 'http', ready }) {
    this.host = host;
    this.port = port;
    this.url = `${scheme}://${host}:${port}`;
    /** (url) => Promise<boolean>: is the node answering? Default: GET /healthz by fetch. */
    this.ready = ready ?? (async (url) => (await fetch(url + '/healthz')).ok);
    this.args = args;
    this.env = env;
    this.dir = mkdtempSync(join(tmpdir(), 'baton-js-'));
    this.out = '';
  }

  async start() {
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('BATON_')));
    this.proc = spawn(BIN, ['serve', '--listen', `${this.host}:${this.port}`, '--data-dir', this.dir, ...this.args], {
      env: { ...env, ...this.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.exited = new Promise((resolve) => this.proc.once('exit', resolve));
    this.proc.stdout.on('data', (d) => { this.out += d; });
    this.proc.stderr.on('data', (d) => { this.out += d; });
    let up = false;
    // A node that exits before it answers ends the wait at once.
    const died = this.exited.then(() => { if (!up) throw new Error('baton exited: ' + this.out); });
    died.catch(() => {});
    await Promise.race([died, waitFor(this.url + ' answering', 10000, () => this.ready(this.url))]);
    up = true;
    return this;
  }

  /** kill -9, and wait for the exit. */
  async kill() {
    if (!this.proc || this.proc.exitCode !== null || this.proc.signalCode) return;
    this.proc.kill('SIGKILL');
    await this.exited;
  }

  /** SIGTERM (a graceful stop), then SIGKILL after 5 s. */
  async stop() {
    if (!this.proc || this.proc.exitCode !== null || this.proc.signalCode) return;
    this.proc.kill('SIGTERM');
    const t = setTimeout(() => this.proc.kill('SIGKILL'), 5000);
    await this.exited;
    clearTimeout(t);
  }

  async cleanup() {
    await this.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }

  /** GET path on this node (no redirect), JSON; with this.token if set. */
  async get(path) {
    const headers = this.token ? { Authorization: 'Bearer ' + this.token } : {};
    const r = await fetch(this.url + path, { redirect: 'manual', headers });
    if (r.status !== 200) throw new Error('GET ' + path + ': ' + r.status + ' ' + await r.text());
    return r.json();
  }
}

/** Starts a single node; t.after stops it. */
export async function startNode(t, opts = {}) {
  for (let attempt = 1; ; attempt++) {
    const n = new Node({ port: await freePort(opts.host), ...opts });
    t.after(() => n.cleanup());
    try {
      return await n.start();
    } catch (e) {
      // The free port was taken before the node bound it (by another
      // process's outgoing connection, say): the node starts on another.
      if (opts.port === undefined && attempt < 3 && /address already in use/.test(n.out)) continue;
      throw e;
    }
  }
}

/** Fast cluster timings. */
export const CLUSTER_ARGS = ['--heartbeat', '100ms', '--failover-timeout', '600ms', '--cluster-secret', 'test-secret'];

/**
 * Starts a two-node cluster (the first has the higher priority) and waits
 * until the first is active and the second its standby. extra: more serve
 * arguments; token: auth_tokens (the nodes' get() sends it).
 */
export async function startPair(t, extra = [], token = '') {
  const hosts = [NET + '.1', NET + '.2'];
  const ports = [await freePort(hosts[0]), await freePort(hosts[1])];
  const urls = hosts.map((h, i) => `http://${h}:${ports[i]}`);
  const nodes = hosts.map((h, i) => new Node({
    host: h, port: ports[i],
    args: ['--advertise', urls[i], '--peers', urls.join(','), ...CLUSTER_ARGS, ...extra],
    env: token ? { BATON_AUTH_TOKENS: token } : {},
  }));
  for (const n of nodes) n.token = token;
  for (const n of nodes) t.after(() => n.cleanup());
  await Promise.all(nodes.map((n) => n.start()));
  await waitFor('the first node active, the second its standby', 15000, async () => {
    const [a, b] = await Promise.all(nodes.map((n) => n.get('/cluster')));
    return a.role === 'active' && b.role === 'standby' && b.active === nodes[0].url;
  });
  return nodes;
}

// Headers of one hop (and HTTP/2 pseudo-headers) that a proxy must not pass on.
const HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'host', 'te', 'http2-settings']);

/** headers without hop-by-hop ones and pseudo-headers, to forward them. */
export function endToEnd(headers) {
  return Object.fromEntries(Object.entries(headers).filter(([k]) => !k.startsWith(':') && !HOP.has(k.toLowerCase())));
}

/**
 * A server on a free port of HOST for proxies in front of baton, in
 * the protocol of the client under test: HTTP/1.1 for fetch, h2c for the
 * http2 transport, or proto ("http1" or "h2c") if given (handler gets the
 * compatibility API's req and res, like node:http's). Returns its url and
 * the connections it accepted so far (`seen.conns`) and still open
 * (`seen.open`); t.after closes it.
 */
export async function listenProxy(t, handler, proto = TRANSPORT === 'http2' ? 'h2c' : 'http1') {
  const srv = proto === 'h2c' ? http2.createServer(handler) : http.createServer(handler);
  const open = new Set();
  const seen = { conns: 0, get open() { return open.size; } };
  srv.on(proto === 'h2c' ? 'session' : 'connection', (c) => {
    seen.conns++;
    open.add(c);
    c.on('close', () => open.delete(c));
  });
  await new Promise((resolve) => srv.listen(0, HOST, resolve));
  t.after(() => new Promise((resolve) => {
    for (const c of open) c.destroy();
    srv.close(() => resolve());
  }));
  return { url: `http://${HOST}:${srv.address().port}`, seen };
}

/**
 * A fake node that answers its POSTs with answers[i] ([status, body]; the
 * last one repeated), each after delayMs; a 200 carries Lock-Token. Returns
 * its url and what each POST sent (`seen`: `key`, its Idempotency-Key, and
 * `wait`).
 */
export async function answeringNode(t, answers, delayMs = 0) {
  const seen = [];
  const { url } = await listenProxy(t, async (req, res) => {
    for await (const _ of req); // eslint-disable-line no-unused-vars
    await new Promise((r) => setTimeout(r, delayMs));
    const u = new URL(req.url, 'http://x');
    seen.push({ key: req.headers['idempotency-key'], wait: u.searchParams.get('wait') });
    const [status, body] = answers[Math.min(seen.length, answers.length) - 1];
    const h = { 'content-type': 'application/json' };
    if (status === 200) h['lock-token'] = String(body.token);
    res.writeHead(status, h);
    res.end(JSON.stringify(body));
  });
  return { url, seen };
}

/**
 * A TCP proxy to node `target` on host (default its host) that forwards
 * nothing either way once frozen, not even a close (a node paused, a link
 * cut without a reset); t.after closes it.
 */
export async function freezableProxy(t, target, host = target.host) {
  const socks = new Set();
  let frozen = false;
  const srv = net.createServer((down) => {
    const up = net.connect(target.port, target.host);
    for (const s of [up, down]) {
      socks.add(s);
      s.on('error', () => {});
      s.on('close', () => { if (!frozen) { up.destroy(); down.destroy(); } }); // frozen: not even a close passes
    }
    down.on('data', (d) => { if (!frozen) up.write(d); });
    up.on('data', (d) => { if (!frozen) down.write(d); });
  });
  await new Promise((r) => srv.listen(0, host, r));
  t.after(() => { for (const s of socks) s.destroy(); srv.close(); });
  return { url: `http://${host}:${srv.address().port}`, freeze() { frozen = true; } };
}
