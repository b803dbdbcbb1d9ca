// baton's official JavaScript client (SPEC section 4), an ES module using only
// fetch, AbortSignal, crypto, timers, performance. Types: baton.d.ts. Await close() at exit.

// ms: a failed address's skip; release (and settle) retry pace, span; an
// attempt's cut; the pause after a round of failed addresses; _probe's pace, bound.
const SKIP_MS = 3000, RELEASE_RETRY_MS = 200, RELEASE_FOR_MS = 5000, ATTEMPT_MS = 3000, ROUND_MS = 200, PING_MS = 2000, PING_WAIT_MS = 3000;
/** Max redirected 401s a call repeats to the active. */
const MAX_REDIRECTS = 10;

/** An error from baton or from reaching it (see baton.d.ts). */
export class BatonError extends Error {
	constructor(status, code, message, field, cause) {
		super(message, cause === undefined ? undefined : { cause });
		Object.assign(this, { name: 'BatonError', status, code, field });
	}
}

const invalid = (f, m, c) => new BatonError(400, 'invalid_argument', m, f, c);

// Over 256 characters: refused unsent (a node's 431 has no CORS).
function lockPath(key) {
	if (typeof key !== 'string' || /^\.{0,2}$|\p{Cs}/u.test(key) || key.length > 256) throw invalid('key', 'key must be well-formed text of 1 to 256 bytes, not "." or ".."');
	return '/locks/' + (/(^|\/)\.\.?(\/|$)/.test(key) ? encodeURIComponent(key) : key.split('/').map(encodeURIComponent).join('/'));
}

function query(params) {
	const q = new URLSearchParams();
	for (let [k, v] of Object.entries(params)) {
		if (v == null) continue;
		if (typeof v !== 'number' && typeof v !== 'string') throw invalid(k, k + ' must be a number or a string, not ' + typeof v);
		if ((v = String(v)).length > 256) throw invalid(k, k + ' is over 256 characters');
		q.set(k, v);
	}
	const s = '' + q;
	return s && '?' + s;
}

// Options: null is none (as WebIDL dictionaries); a non-object is refused.
function opts(o) {
	if (o != null && typeof o !== 'object') throw invalid('options', 'options must be an object');
	return o ?? {};
}

function normalize(base) {
	let u, cause;
	try { u = new URL(base); } catch (e) { cause = e; }
	if (u?.protocol !== 'http:' && u?.protocol !== 'https:') {
		throw invalid('addresses', 'address ' + JSON.stringify(base) + ' is not an http(s) URL', cause);
	}
	return u.origin + u.pathname.replace(/\/+$/, '');
}

// A timer's ms (over 2^31-1 fires at once).
const cap = (ms) => Math.min(Math.ceil(ms), 2 ** 31 - 1);

// ms, monotonic (Date.now() may go back).
const now = () => performance.timeOrigin + performance.now();

/** @type {(ms: number, signal?: AbortSignal) => Promise<void>} */
const sleep = (ms, signal) => new Promise((resolve, reject) => {
	const t = setTimeout(() => { signal?.removeEventListener('abort', stop); resolve(); }, cap(ms)), stop = () => { clearTimeout(t); reject(signal?.reason); };
	signal?.aborted ? stop() : signal?.addEventListener('abort', stop, { once: true });
});

/** @param {Response} res a failed answer */
async function statusError(res) {
	const text = await res.text(), str = (v) => typeof v === 'string' ? v : undefined;
	let b = {};
	try { b = Object(JSON.parse(text)); } catch { /* not JSON */ }
	return new BatonError(res.status, str(b.error) ?? 'http_' + res.status, str(b.message) ?? (text.trim().slice(0, 200) || res.status + ' ' + res.statusText), str(b.field));
}

// randomUUID: secure contexts only (https, localhost).
const newKey = () => crypto.randomUUID?.() ?? Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, '0')).join('');

/** @type {(what: string, cause: any) => BatonError} */
const unavailable = (what, cause) => new BatonError(0, 'unavailable', what + ': ' + String(cause?.message ?? cause), undefined, cause);

/** @typedef {{ base: string, downUntil: number, gone?: number, w?: Set<AbortController>, p?: any }} Addr gone: failed since a 2xx */

/** A client of a baton cluster (types: baton.d.ts). */
export class Client {
	/** @param {ClientOptions} options */
	constructor(options) {
		const { addresses, token, fetch: f, retryFor } = opts(options);
		const list = typeof addresses === 'string' ? addresses.split(',').filter((a) => a.trim()) : addresses;
		if (!Array.isArray(list) || !list.length) throw invalid('addresses', 'addresses must name at least one node');
		this._addrs = list.map((a) => ({ base: normalize(String(a).trim()), downUntil: 0 }));
		this._next = 0;
		/** @type {Addr | null} once a 307 named it or it served a change */
		this._active = null;
		/** The bearer token of every call; may be changed. */
		this.token = token || '';
		this._fetch = f || ((i, o) => fetch(i, o));
		if (!((this._retryFor = retryFor ?? 1e4) >= 0 && typeof this._retryFor == 'number')) throw invalid('retryFor', 'retryFor must be ms >= 0');
		/** @type {Set<Promise<void>>} what close() waits for */
		this._busy = new Set();
		this._closed = false;
		this._shut = new AbortController();
	}

	/** s: a call's signal */
	_open(s) {
		if (this._closed) throw new BatonError(0, 'closed', 'the client is closed');
		if (s != null && !s.addEventListener) throw invalid('signal', 'signal must be an AbortSignal');
	}

	_track(p) {
		const q = p.catch(() => {}).then(() => { this._busy.delete(q); });
		this._busy.add(q);
		return p;
	}

	/** Refuses calls, ends keepAlives; resolves when releases and settles end. */
	async close() {
		this._closed = true;
		this._shut.abort();
		while (this._busy.size) await Promise.all(this._busy);
	}

	/** `want` (not `again`, not gone), else the active, else the next live one. */
	_pick(want, again) {
		const t = now(), n = this._addrs.length;
		if (!again && want && !want.gone) return want;
		if (this._active?.downUntil <= t) return this._active;
		for (let i = n; i--;) {
			const a = this._addrs[this._next++ % n];
			if (a.downUntil <= t) return a;
		}
		return this._addrs[this._next++ % n];
	}

	/** Aborts `ac` (a call on `a`) if `a` leaves GET /healthz unanswered; one probe a node. */
	_probe(a, ac) {
		(a.w ||= new Set).add(ac);
		a.p ||= (async () => {
			while (a.w.size) {
				await new Promise((r) => setTimeout(r, PING_MS).unref?.()); // holds no process open
				if (a.w.size) await this._fetchOne(a, 'GET', '/healthz', {}, AbortSignal.timeout(PING_WAIT_MS)).catch((e) => { a.w.forEach((c) => c.abort(e)); a.w.clear(); });
			}
			a.p = 0;
		})();
	}

	_down(a) {
		a.gone = a.downUntil = now() + SKIP_MS;
		if (this._active === a) this._active = null;
	}

	/** @type {(res: Response, a: Addr) => Addr} a answered: the active after a 307/2xx. */
	_follow(res, a) {
		if (res.ok) a.gone = 0;
		if (res.redirected || res.ok) this._active = a, a.downUntil = 0;
		return a;
	}

	/**
	 * One request, body read: one cut off rejects (as over HTTP/2).
	 * 307s followed, the probe (`hop.ac`) moving along; `hop.at`: out, the
	 * node asked last. A browser's are opaque: fetch follows (_rf).
	 */
	async _fetchOne(addr, method, pathQuery, headers, signal, hop = {}) {
		const h = { Accept: 'application/json', ...headers };
		if (/[^!-~]/.test(this.token + (h['Lock-Token'] ?? ''))) throw invalid('token', 'token must be printable ASCII');
		if (this.token) h.Authorization = 'Bearer ' + this.token;
		let url = addr.base + pathQuery, n = 0, res, u;
		// no-store: no cached poll (Workers' fetch throws: then none).
		const go = () => this._fetch(url, { method, headers: h, signal, redirect: this._rf || 'manual', ...this._nc || { cache: 'no-store' } });
		for (hop.at = addr; ;) {
			res = await go().catch((e) => { if (this._nc || !(e instanceof TypeError && /cache/.test(e.message))) throw e; this._nc = 1; return go(); });
			if (res.type === 'opaqueredirect') this._rf = 'follow', res = await go();
			const loc = /^30[78]$/.test(res.status) && !this._rf && res.headers.get('Location');
			u = loc ? new URL(loc, url) : res.redirected && res.url && new URL(res.url);
			if (u) {
				const base = u.origin + u.pathname.replace(/\/locks\/.*$/, ''), k = this._addrs.find((a) => a.base === base);
				hop.at.w?.delete(hop.ac);
				hop.at = k || { base, downUntil: 0 };
				hop.ac && this._probe(hop.at, hop.ac);
				if (!k) delete h.Authorization;
			}
			if (!loc) break;
			await res.text();
			if (n++ > 19) throw new TypeError('redirect loop');
			url = u.href;
		}
		const text = await res.text();
		if (n) Object.defineProperties(res, { redirected: { value: true }, url: { value: url } });
		return Object.assign(res, { text: async () => text, json: async () => JSON.parse(text) });
	}

	/**
	 * A call safe to repeat: no answer or a 503 moves it to the next
	 * address, for retryFor ms from the last attempt served (1 s in flight),
	 * till `o.end`. A 401 after a 307 goes to the active.
	 * `o.at`: in, the node to ask first; out, last asked. `o.limit`: ms an
	 * attempt may go unanswered (and _probe); `o.t`: its timeout (Node 20
	 * collects one only AbortSignal.any holds).
	 * @type {(method: string, pathQuery: string, o?: Record<string, any>) => Promise<Response>}
	 */
	async _call(method, pathQuery, o = {}) {
		let start = now(), tries = 0, last, n = this._addrs.length;
		for (let redirects = 0; ;) {
			const addr = o.at = this._pick(o.at, tries + redirects), ac = new AbortController(), all = [ac.signal].concat(o.signal || []), hop = { ac, at: addr };
			if (o.limit) all.push(o.t = AbortSignal.timeout(cap(o.limit)));
			this._probe(addr, ac);
			let res, sent = now();
			try {
				res = await this._fetchOne(addr, method, pathQuery, o.headers, AbortSignal.any ? AbortSignal.any(all) : o.signal, hop);
			} catch (e) {
				if (o.signal?.aborted) throw o.signal.reason;
				if (e instanceof BatonError) throw e;
				this._down(hop.at);
				last = e;
			} finally {
				hop.at.w?.delete(ac);
			}
			if (res) {
				if (o.pin || res.status === 401) o.at = this._follow(res, hop.at);
				if (res.redirected && res.status === 401 && this.token && redirects++ < MAX_REDIRECTS) continue;
				if (res.status !== 503) return res;
				last = await statusError(res);
				this._down(hop.at);
			}
			if (now() - sent > 999 && !o.t?.aborted) start = now();
			tries++;
			if (tries >= n && (now() - start >= this._retryFor || now() >= o.end)) {
				if (last instanceof BatonError) throw last;
				throw unavailable(method + ' ' + pathQuery + ': no node answered (' + tries + ' attempts)', last);
			}
			if (tries % n === 0) await sleep(ROUND_MS, o.signal);
		}
	}

	/** @type {(pathQuery: string, signal?: AbortSignal) => Promise<any>} GET, JSON; `replicaLag` (s) from a standby. */
	async _get(pathQuery, signal) {
		this._open(signal);
		const res = await this._call('GET', pathQuery, { signal, limit: 5e3 });
		if (!res.ok) throw await statusError(res);
		const body = await res.json(), lag = Number(res.headers.get('Baton-Replica-Lag') ?? NaN);
		if (Number.isFinite(lag) && body instanceof Object) body.replicaLag = lag;
		return body;
	}

	/**
	 * Takes `key` (baton.d.ts). One Idempotency-Key across retries, 307s,
	 * re-sends, poll_timeouts, superseded (by our cut-off try); grant_ended
	 * (or a late renewal refused) starts anew (new key, wait left); a grant an abort,
	 * "unavailable" or a 5xx may have cut off is released.
	 */
	async acquire(key, options) {
		const { lease, wait, owner, mode, limit, signal } = opts(options);
		this._open(signal);
		const pq = (wait) => lockPath(key) + query({ lease, wait, owner, mode, limit });
		let pathQuery = pq(wait);
		let headers = { 'Idempotency-Key': newKey() };
		const start = now(), w = wait > 0 && wait * 1e3;
		// sent: the key's first request (resumes get older grants)
		for (let restarts = 0, asked = false, sent = now(); ;) {
			asked ||= !signal?.aborted; // a request sent
			let res, err, o = { headers, signal, pin: true, limit: w && w + 3e3, end: start + (w || 1 / 0) };
			try {
				res = await this._call('POST', pathQuery, o);
				if (res.redirected) pathQuery = ((u) => u.pathname + u.search)(new URL(res.url)); // a handoff's ticket stays
				if (res.ok) {
					const g = Object(await res.json().catch(() => 0));
					if (!(g.token > 0)) throw new BatonError(res.status, 'bad_answer', 'no grant: ' + (await res.text()).slice(0, 200));
					// Waited half its lease: renewed now; refused: it ended.
					const late = now() - sent >= g.lease * 500, l = new Lock(this, g, late ? now() : sent, o.at);
					if (late) await l.renew().catch(() => l._watch(sent + g.lease * 1000));
					if (!l.lost.aborted) return l;
					err = new BatonError(410, 'grant_ended', 'ended before read', undefined, l.lost.reason);
				} else if (err = await statusError(res), res.status > 499) throw err; // maybe granted: settled
			} catch (e) {
				if (asked && e.status != 400) this._settle(key, pathQuery, headers, Number(res?.headers.get('Lock-Token')), o.at); // 400: never sent
				throw signal?.aborted ? signal.reason : e;
			}
			if (err.code === 'poll_timeout' || err.code === 'superseded' && ++restarts < 11) continue;
			const left = w ? wait - (now() - start) / 1e3 : wait;
			if (err.code !== 'grant_ended' || ++restarts > 10) throw err;
			if (w && left < 1e-3) throw new BatonError(408, 'timeout', 'wait ran out: ' + err.message, undefined, err);
			pathQuery = pq(left);
			headers = { 'Idempotency-Key': newKey() };
			asked = false;
			sent = now();
		}
	}

	/**
	 * Releases in the background what a cut-off acquire may hold: `token`,
	 * else what a 1 ms-wait repeat finds (5 s; 408/410: none), `at` first.
	 */
	_settle(key, pathQuery, headers, token, at) {
		const u = new URL(pathQuery, 'http://x'), end = now() + RELEASE_FOR_MS;
		u.searchParams.set('wait', '0.001');
		this._track((async () => {
			while (!(token > 0) && now() < end) {
				try {
					const o = { headers, signal: AbortSignal.timeout(ATTEMPT_MS), pin: true, at };
					const res = await this._call('POST', u.pathname + u.search, o);
					at = o.at;
					if (res.ok) token = Number(res.headers.get('Lock-Token')) || (await res.json()).token;
					else if (res.status < 500 && res.status !== 429) return; // nothing held
				} catch { /* no answer: asked again */ }
				if (!(token > 0)) await sleep(RELEASE_RETRY_MS);
			}
			if (token > 0) await this._release(key, token, at);
		})());
	}

	/** Renews `key` held under `token` (baton.d.ts). */
	async renew(key, token, lease, signal, o = {}) {
		this._open(signal);
		const res = await this._call('PATCH', lockPath(key) + query({ lease }), Object.assign(o, { headers: { 'Lock-Token': String(token) }, signal, pin: true, limit: 5e3 }));
		if (!res.ok) throw await statusError(res);
		return res.json();
	}

	/** Releases `key` held under `token` (retries: baton.d.ts). */
	async release(key, token) {
		this._open();
		return this._track(this._release(key, token));
	}

	/** Also after close(); `from` (it granted) first: another's 404/409 does not end it. @param {Addr} [from] */
	async _release(key, token, from) {
		const path = lockPath(key), end = now() + RELEASE_FOR_MS;
		let maybeSent, elsewhere;
		for (let redirects = 0; ;) {
			let err, other;
			const addr = this._pick(from, redirects), hop = { at: addr };
			try {
				const res = await this._fetchOne(addr, 'DELETE', path, { 'Lock-Token': String(token) }, AbortSignal.timeout(ATTEMPT_MS), hop);
				this._follow(res, hop.at);
				if (res.ok) return;
				if (res.redirected && res.status === 401 && this.token && redirects++ < MAX_REDIRECTS) continue;
				err = await statusError(res);
				const s = res.status, gone = s === 404 || s === 409;
				other = gone && from && addr !== from; // not the granting node: asked again
				elsewhere ||= other;
				if (gone && maybeSent && !other) return;
				if (s < 500 && s !== 429 && !other) throw err;
			} catch (e) {
				if (e instanceof BatonError) throw e;
				err = unavailable('release ' + JSON.stringify(key), e);
			}
			if (!other && err.status !== 429) {
				maybeSent = true; // a 5xx or no answer: made, maybe not logged
				this._down(hop.at);
			}
			if (now() + RELEASE_RETRY_MS > end) {
				if (maybeSent && elsewhere) return; // from died unanswered: that attempt released
				throw err;
			}
			await sleep(RELEASE_RETRY_MS);
		}
	}

	/** `fn(lock)` holding `key`, renewed, then released (baton.d.ts). */
	async withLock(key, fn, options) {
		const lock = await this.acquire(key, options);
		lock.keepAlive();
		let result;
		try {
			result = await fn(lock);
		} catch (e) {
			await lock.release().catch(() => {});
			throw e;
		}
		const lost = lock.lost.aborted;
		await lock.release().catch((e) => { if (!lost) throw e; });
		if (lost) throw lock.lost.reason;
		return result;
	}

	/** GET /locks/{key}. */
	async status(key, options) {
		return this._get(lockPath(key), opts(options).signal);
	}

	/** GET /locks; `after`: the previous page's last key. */
	async list(options) {
		const { prefix, after, limit, signal } = opts(options);
		return this._get('/locks' + query({ prefix, after, limit }), signal);
	}

	/** GET /cluster: the view of the first node that answers. */
	async cluster(options) {
		return this._get('/cluster', opts(options).signal);
	}
}

/** @import { ClientOptions, Grant } from "./baton.d.ts" */

/** A held lock (fields, `lost`: baton.d.ts). */
export class Lock {
	/**
	 * @param {Client} client
	 * @param {Grant} g the grant's answer
	 * @param {number} sent now() at the acquire
	 * @param {Addr} [from] the node that granted (renewed last)
	 */
	constructor(client, g, sent, from) {
		// lease: s
		Object.assign(this, { _c: client, _from: from, key: g.key, token: g.token, lease: g.lease, expiresAt: new Date(g.expires_at), node: g.node });
		this._ac = new AbortController();
		this.lost = this._ac.signal;
		/** @type {Promise<void> | null} */
		this._released = null;
		/** @type {AbortController | null} */
		this._ka = null;
		this._watch(sent + g.lease * 1000);
	}

	/** Lost at `deadline` (ms, now()); wakes keepAlive (_w). */
	_watch(deadline) {
		clearTimeout(this._timer);
		this._w?.(1);
		this._deadline = deadline;
		this._timer = setTimeout(() => now() < deadline ? this._watch(deadline) : this._lose(new BatonError(0, 'lost', 'lock ' + JSON.stringify(this.key) + ' token ' + this.token + ': the lease ran out before a renewal succeeded')), cap(deadline - now()));
		/** @type {any} */ (this._timer).unref?.();
	}

	/** Stops the lease watch and the renewals. */
	_halt() {
		clearTimeout(this._timer);
		this._ka?.abort();
		this._ka = null;
	}

	_lose(reason) {
		if (this._released || this.lost.aborted) return;
		this._halt();
		this._ac.abort(reason);
	}

	/**
	 * Restarts the lease, `lease` s (absent: the grant's); not_held/
	 * not_holder loses it; once lost, rejects with the loss.
	 */
	async renew(lease, signal) {
		const sent = now(), o = {};
		let g;
		try {
			g = await this._c.renew(this.key, this.token, lease ?? this.lease, signal, o);
		} catch (e) {
			if (/^not_h(eld|older)$/.test(e?.code)) this._lose(e);
			throw e;
		}
		this.lost.throwIfAborted();
		if (this._released) return;
		this.lease = g.lease;
		this.expiresAt = new Date(g.expires_at);
		this._from = o.at;
		this._watch(sent + g.lease * 1000);
	}

	/** Renews at half the lease till released, lost, closed. */
	keepAlive() {
		let ka = this._ka;
		const stop = () => { if (ka && this._ka === ka) { ka.abort(); this._ka = null; } };
		if (ka || this._released || this.lost.aborted || this._c._closed) return stop;
		ka = this._ka = new AbortController();
		this._c._shut.signal.addEventListener('abort', stop, { signal: ka.signal });
		(async () => {
			while (!ka.signal.aborted) {
				const lease = this.lease * 1000;
				if (await Promise.race([sleep(this._deadline - lease / 2 - now(), ka.signal), new Promise((r) => this._w = r)])) continue;
				const retry = Math.min(Math.max(lease / 10, 10), 1000);
				for (;;) {
					const to = AbortSignal.timeout(cap(Math.max(lease / 4, 100))); // held: see _call
					try {
						await this.renew(undefined, AbortSignal.any ? AbortSignal.any([ka.signal, to]) : ka.signal);
						break;
					} catch (e) {
						if (ka.signal.aborted || this.lost.aborted || e?.code === 'closed') return;
						const a = this._c._active; // silent: ask the others
						if (to.aborted && a) this._c._down(a);
						await sleep(Math.min(retry, this._deadline - now()), ka.signal);
					}
				}
			}
		})().catch(() => {}).finally(stop);
		return stop;
	}

	/** Client.release, renewals stopped; after a failure, tries again. */
	release() {
		this._halt();
		const c = this._c;
		return this._released ||= c._track(c._release(this.key, this.token, this._from)).catch((e) => { this._released = null; this._watch(this._deadline); throw e; });
	}
}
