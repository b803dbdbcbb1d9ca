// baton-node.js: the official JavaScript client (baton.js) for Node, Bun
// and Deno's node compatibility, over node:http2: every call of a Client is
// a stream multiplexed on HTTP/2 connections (cleartext h2c to http://
// addresses, h2 negotiated by ALPN to https://), as the Go client does
// (SPEC section 4), instead of fetch, whose one-request-per-connection
// HTTP/1.1 costs Node most of its throughput. It re-exports baton.js; its
// Client takes the same options plus `transport`. Types: /baton-node.d.ts.
//
//   import { Client } from './baton-node.js';
//   const c = new Client({ addresses: ['http://127.0.0.1:7070'] });
import http2 from 'node:http2';
import { STATUS_CODES } from 'node:http';
import { Client as FetchClient, BatonError } from './baton.js';

export { BatonError, Lock } from './baton.js';

/** Connections kept to each origin, used in turn (SPEC section 4: two). */
const CONNECTIONS = 2;
/**
 * Stream capacity, as the Go client's (api/client.go): a node limits the
 * streams of one connection (MaxConcurrentStreams, 1000 for baton) and a
 * waiting acquire holds its stream while it waits, so an acquire takes a
 * stream only where SHORT_STREAMS (at most a quarter of the limit) stay
 * free for the short calls (renewals, releases, reads), and when every
 * connection is that full an extra one is opened (up to MAX_EXTRA per
 * origin), closed again once it has no call in flight. Past that, a call
 * goes to the connection with the fewest calls in flight, where
 * node:http2 holds it until a stream ends. Before a connection's SETTINGS
 * have come, its limit is taken to be ASSUMED_STREAMS (RFC 9113's
 * recommended minimum; Go's transport assumes the same).
 */
const SHORT_STREAMS = 16;
const MAX_EXTRA = 64;
const ASSUMED_STREAMS = 100;
/**
 * ms: a connection with calls in flight is pinged every PING_MS, and one
 * whose PING is not answered within PING_WAIT_MS is closed (its calls fail
 * and move on, as over a broken one). A node that went silent (paused, its
 * host gone, a link cut without a reset) otherwise held a waiting acquire
 * for ever, also once the new active had granted it. The Go client's
 * (api.DefaultPingInterval, api.DefaultPingTimeout): a waiter on a paused
 * active is back on the new one within 5 s, inside the 5 s a promoted node
 * keeps its place after a failover of about 1 s. At 5 s and 5 s it came
 * back after that and lost its place to a Go client queued behind it
 * (breaker report of 2026-12-05).
 */
const PING_MS = 2000, PING_WAIT_MS = 3000;
/** The most redirects one call follows, as fetch. */
const MAX_FOLLOW = 20;
const REDIRECTS = new Set([301, 302, 303, 307, 308]);

/** The headers of an Answer: get(name) as a fetch Headers'. */
class AnswerHeaders {
  /** @param {Record<string, string | string[] | undefined>} h lower-case names */
  constructor(h) { this._h = h; }

  /** @param {string} name */
  get(name) {
    const v = this._h[name.toLowerCase()];
    return v === undefined ? null : Array.isArray(v) ? v.join(', ') : String(v);
  }
}

/**
 * The answer of a call: the part of a fetch Response that baton.js reads
 * (status, ok, statusText, redirected, url, headers.get, text, json), its
 * body read in full.
 */
class Answer {
  /**
   * @param {number} status
   * @param {Record<string, string | string[] | undefined>} headers lower-case names
   * @param {string} url where the call ended, after redirects
   * @param {boolean} redirected
   * @param {string} body
   */
  constructor(status, headers, url, redirected, body) {
    this.status = status;
    this.ok = status >= 200 && status < 300;
    this.statusText = STATUS_CODES[status] || '';
    this.url = url;
    this.redirected = redirected;
    this.headers = new AnswerHeaders(headers);
    this._body = body;
  }

  async text() { return this._body; }

  async json() { return JSON.parse(this._body); }
}

const inFlight = Symbol('inFlight');
/** Marks a connection opened beyond CONNECTIONS, closed once idle. */
const extraConn = Symbol('extraConn');

/**
 * A transport over node:http2 with the fetch signature baton.js's `fetch`
 * option takes: `(url, { method, headers, signal, redirect })` resolves to
 * an Answer (a Response's status, headers, url, text; no request body: no
 * baton call has one). It follows redirects like fetch (the Authorization
 * header is dropped across origins; `redirect: "manual"` returns them).
 * Calls take streams as the Go client's do (SHORT_STREAMS, MAX_EXTRA).
 * A connection that closes is replaced at the next call; one with calls in
 * flight that leaves a PING unanswered (PING_WAIT_MS) is closed; an aborted
 * `signal` resets the stream and rejects with its reason. Connections hold
 * the process open only while a call is in flight; `close()` ends them (a
 * later call opens new ones).
 * @param {import('node:tls').ConnectionOptions} [tls] options of the TLS
 *   connections to https:// origins (ca for a private CA, cert and key for
 *   client certificates, ...); ALPN always asks for h2
 * @returns {((url: string, init?: { method?: string, headers?: Record<string, string>, signal?: AbortSignal, redirect?: string }) => Promise<Answer>) & { close(): void }}
 */
export function http2Transport(tls) {
  /** @type {Map<string, { conns: (http2.ClientHttp2Session | null)[], extra: http2.ClientHttp2Session[], next: number }>} */
  const pools = new Map();

  /**
   * A new connection to origin, in p.conns[i] (i >= 0) or among p.extra
   * (i < 0), which it leaves when it closes or fails.
   * @param {string} origin
   * @param {{ conns: (http2.ClientHttp2Session | null)[], extra: http2.ClientHttp2Session[] }} p
   * @param {number} i
   */
  function connect(origin, p, i) {
    const fresh = tls && origin.startsWith('https:') ? http2.connect(origin, tls) : http2.connect(origin);
    const drop = () => {
      if (i >= 0) {
        if (p.conns[i] === fresh) p.conns[i] = null;
      } else {
        const at = p.extra.indexOf(fresh);
        if (at >= 0) p.extra.splice(at, 1);
      }
    };
    fresh.on('error', drop); // the streams in flight report it
    fresh.on('goaway', drop);
    fresh.on('close', drop);
    /** @type {any} */ (fresh)[inFlight] = 0;
    /** @type {any} */ (fresh)[extraConn] = i < 0;
    fresh.unref();
    const beat = setInterval(() => ping(fresh, origin), PING_MS);
    beat.unref();
    fresh.on('close', () => clearInterval(beat));
    if (i >= 0) p.conns[i] = fresh;
    else p.extra.push(fresh);
    return fresh;
  }

  /**
   * Whether s takes one more call: a short one while a stream is free, a
   * long one (an acquire, which may wait) while SHORT_STREAMS more are.
   * @param {any} s
   * @param {boolean} long
   */
  function room(s, long) {
    const max = s.remoteSettings?.maxConcurrentStreams;
    const limit = typeof max === 'number' ? max : ASSUMED_STREAMS;
    const keep = long ? Math.min(SHORT_STREAMS, Math.floor(limit / 4)) : 0;
    return s[inFlight] + keep < limit;
  }

  /**
   * The connection for a call to origin: the two kept connections in
   * turn (opened again once closed), else an extra one with room, else a
   * new extra one, else the one with the fewest calls in flight.
   * @param {string} origin
   * @param {boolean} long an acquire (it may hold its stream for long)
   */
  function session(origin, long) {
    let p = pools.get(origin);
    if (!p) pools.set(origin, p = { conns: new Array(CONNECTIONS).fill(null), extra: [], next: 0 });
    /** @type {any} */
    let first = null;
    for (let n = 0; n < CONNECTIONS; n++) {
      const i = p.next;
      p.next = (i + 1) % CONNECTIONS;
      let s = p.conns[i];
      if (!s || s.closed || s.destroyed) s = connect(origin, p, i);
      if (room(s, long)) return s;
      first ??= s;
    }
    for (const s of p.extra) if (!s.closed && !s.destroyed && room(s, long)) return s;
    if (p.extra.length < MAX_EXTRA) return connect(origin, p, -1);
    /** @type {any} */
    let least = first;
    for (const s of [...p.conns, ...p.extra]) if (s && !s.closed && !s.destroyed && s[inFlight] < least[inFlight]) least = s;
    return least;
  }

  /**
   * Pings s if it has calls in flight; closes it when no answer comes
   * within PING_WAIT_MS.
   * @param {any} s
   * @param {string} origin
   */
  function ping(s, origin) {
    if (!s[inFlight] || s.destroyed || s.closed) return;
    const silent = setTimeout(() => s.destroy(new Error(origin + ': no answer to an HTTP/2 PING within ' + PING_WAIT_MS + ' ms')), PING_WAIT_MS);
    silent.unref();
    try {
      s.ping((/** @type {Error | null} */ err) => {
        clearTimeout(silent);
        if (err && !s.destroyed && !s.closed) s.destroy(err); // not a PING cancelled by close()
      });
    } catch (e) {
      clearTimeout(silent);
      s.destroy(e);
    }
  }

  /**
   * One request on one connection.
   * @param {string} origin scheme://host:port
   * @param {string} path the path and query, percent-encoded
   * @param {string} method
   * @param {Record<string, string>} headers
   * @param {AbortSignal} [signal]
   * @returns {Promise<{ status: number, headers: Record<string, any>, body: string }>}
   */
  function once(origin, path, method, headers, signal) {
    return new Promise((resolve, reject) => {
      const s = /** @type {any} */ (session(origin, method === 'POST'));
      /** @type {Record<string, string>} */
      const h = { ':method': method, ':path': path };
      for (const k in headers) h[k.toLowerCase()] = headers[k];
      let st;
      try {
        st = s.request(h, signal ? { endStream: true, signal } : { endStream: true });
      } catch (e) {
        return reject(e);
      }
      if (s[inFlight]++ === 0) s.ref();
      let status = 0, rh = {}, done = false;
      /** @type {Buffer[]} */
      const body = [];
      st.on('response', (x) => { rh = x; status = Number(x[':status']); });
      st.on('data', (d) => { body.push(d); });
      // A stream ended without an answer: its connection broke.
      const broken = () => new Error(origin + ': the HTTP/2 stream closed before its answer (code ' + st.rstCode + ')');
      st.on('end', () => {
        done = true;
        const b = body.length === 1 ? body[0] : Buffer.concat(body);
        // A connection that closes (the node killed while it wrote) ends
        // the stream too: an answer short of its Content-Length, or one
        // reset, is a broken stream, not an answer (JSON.parse threw on
        // it), and the call asks again under its Idempotency-Key.
        if (status && !st.rstCode && !(b.length < Number(rh['content-length']))) resolve({ status, headers: rh, body: b.toString() });
        else reject(signal?.aborted ? signal.reason : broken());
      });
      st.on('error', (e) => { done = true; reject(e); });
      st.on('close', () => {
        if (--s[inFlight] === 0 && !s.destroyed) {
          s.unref();
          if (s[extraConn]) s.close(); // an extra connection, idle again
        }
        if (!done) reject(signal?.aborted ? signal.reason : broken());
      });
    });
  }

  /** @type {any} */
  const fetch = async (/** @type {string} */ input, /** @type {any} */ init = {}) => {
    const { signal } = init;
    if (signal?.aborted) throw signal.reason;
    // baton.js hands over normalized URLs: split them without parsing.
    const slash = input.indexOf('/', input.indexOf('//') + 2);
    let origin = slash < 0 ? input : input.slice(0, slash), path = slash < 0 ? '/' : input.slice(slash);
    let url = input, method = init.method || 'GET', headers = init.headers || {}, redirected = false;
    for (let n = 0; ; n++) {
      const r = await once(origin, path, method, headers, signal);
      const loc = r.headers.location;
      if (REDIRECTS.has(r.status) && loc && init.redirect !== 'manual') {
        if (n >= MAX_FOLLOW || init.redirect === 'error') throw new TypeError(url + ': too many redirects or redirect: error');
        const next = new URL(loc, url);
        if (next.origin !== origin) {
          headers = Object.fromEntries(Object.entries(headers).filter(([k]) => k.toLowerCase() !== 'authorization'));
        }
        if (r.status === 303 || ((r.status === 301 || r.status === 302) && method === 'POST')) method = 'GET';
        url = next.href;
        origin = next.origin;
        path = next.pathname + next.search;
        redirected = true;
        continue;
      }
      return new Answer(r.status, r.headers, url, redirected, r.body);
    }
  };
  fetch.close = () => {
    for (const p of pools.values()) for (const s of [...p.conns, ...p.extra]) s?.close();
    pools.clear();
  };
  return fetch;
}

/**
 * baton.js's Client over node:http2 by default. Options as baton.js's
 * Client, plus `transport`: "http2" (the default) or "fetch" (the
 * runtime's fetch, as in browsers; a `fetch` option wins over both), and
 * `tls`: node:tls options for https:// addresses over http2 (e.g. `ca`).
 */
export class Client extends FetchClient {
  /** @param {ConstructorParameters<typeof FetchClient>[0] & { transport?: 'http2' | 'fetch', tls?: import('node:tls').ConnectionOptions }} options */
  constructor(options) {
    // Options that are no object are FetchClient's to refuse (null: none).
    const o = typeof options === 'object' && options || {};
    const transport = o.transport ?? 'http2';
    if (transport !== 'http2' && transport !== 'fetch') {
      throw new BatonError(400, 'invalid_argument', 'transport must be "http2" or "fetch", not ' + JSON.stringify(transport), 'transport');
    }
    const h2 = o === options && !o.fetch && transport === 'http2' ? http2Transport(o.tls) : null;
    super(h2 ? { ...options, fetch: h2 } : options);
    /** The transport in use: "http2" or "fetch" (also when a `fetch` option was given). */
    this.transport = h2 ? 'http2' : 'fetch';
    this._h2 = h2;
  }

  /**
   * As baton.js's close() (later calls reject "closed"; resolves when the
   * releases and settles in flight have ended). The HTTP/2 connections
   * close once no call, acquire or withLock is in flight either (what one
   * of them leaves held is settled or released over them); a Lock.release
   * after close() opens them again, and they close once it ends, as over
   * fetch (a closed transport would leave a lock held by nobody).
   * @returns {Promise<void>}
   */
  async close() {
    await super.close();
    this._end();
  }

  /**
   * Over http2, none: the connections' PINGs (PING_MS, PING_WAIT_MS) find
   * a silent node and break its connection, so that the next call opens a
   * new one; baton.js's GET /healthz probe, for fetch, which cannot ping,
   * would only repeat them.
   * @param {any} a
   * @param {AbortController} ac
   */
  _probe(a, ac) {
    if (!this._h2) super._probe(a, ac);
  }

  /** Closes the transport once the client is closed and nothing is in flight. */
  _end() {
    if (this._closed && !this._busy.size && !this._calls) this._h2?.close();
  }

  /**
   * baton.js's, counted in flight (close() ends the connections after it).
   * @param {() => Promise<any>} f
   */
  async _counted(f) {
    this._calls = (this._calls || 0) + 1;
    try {
      return await f();
    } finally {
      this._calls--;
      this._end();
    }
  }

  /** @type {FetchClient['_call']} */
  _call(method, pathQuery, o) { return this._counted(() => super._call(method, pathQuery, o)); }

  /** @type {FetchClient['acquire']} */
  acquire(key, options) { return this._counted(() => super.acquire(key, options)); }

  /** @type {FetchClient['withLock']} */
  withLock(key, fn, options) { return this._counted(() => super.withLock(key, fn, options)); }

  /** @param {Promise<void>} p */
  _track(p) {
    super._track(p);
    p.catch(() => {}).then(() => setImmediate(() => this._end()));
    return p;
  }
}
