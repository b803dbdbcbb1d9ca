// baton status page, an ES module: it reads GET /cluster and GET /locks of
// this node through the official client (/baton.js), and the GET /events
// stream, and renders them, live. A standby answers the reads from its
// replica and says how far behind it is (Baton-Replica-Lag).
import { Client, BatonError } from '/baton.js';

const $ = (id) => document.getElementById(id);
const TOKEN_KEY = 'baton.token';
const PAGE_SIZE = 100;
const LIST_LIMIT = 10000; // the most GET /locks returns at once
const KEEP_EVENTS = 500;
// On a narrow screen the events are part of the page's one scroll: fewer.
const SHOW_EVENTS = matchMedia('(max-width: 900px)').matches ? 50 : 200;
const QUIET = new Set(['renew', 'enqueue', 'leave']);
const SORT_DEFAULT_DIR = { key: 1, token: -1, remaining: 1, waiters: -1, oldest: -1 };

const st = {
  token: sessionStorage.getItem(TOKEN_KEY) || '',
  authNeeded: false,
  cluster: null,
  lag: undefined, // seconds the replica answering is behind; undefined = not a replica
  known: false, // the listing reflects the node: loaded, and the last read succeeded
  rows: [], // every lock of the last listing, as rows
  sorted: null, // rows filtered and sorted; null = to be redone
  total: 0,
  listPrefix: '',
  prefix: '',
  sort: 'key',
  dir: 1,
  page: 0,
  visible: [], // cells updated by tick()
  events: [],
  lastSeq: 0,
  live: false,
  noEventLog: false,
  skewLo: -Infinity, // server clock minus ours, in ms: an interval
  skewHi: Infinity,
  skew: 0,
  minGap: 250, // least time between two listings, adapted to their cost
};

// ---- helpers -------------------------------------------------------------

// Fencing tokens are shown and compared as strings of digits. Every token
// is below 2^53, so a JSON number holds it exactly; should one ever not be
// (a server that broke that promise), the text is parsed again keeping
// the exact digits of the source (JSON.parse source text access), which
// is too slow to do for every listing of 10,000 keys.
const TOKEN_FIELDS = new Set(['token', 'last_token']);
let unsafeToken = false;
function check(k, v) {
  if (TOKEN_FIELDS.has(k) && typeof v === 'number' && !Number.isSafeInteger(v)) unsafeToken = true;
}
function exact(k, v, ctx) {
  if (TOKEN_FIELDS.has(k) && typeof v === 'number') {
    return ctx && typeof ctx.source === 'string' ? ctx.source : String(v);
  }
  return v;
}
function parse(text) {
  const v = JSON.parse(text);
  unsafeToken = false;
  scan(v);
  return unsafeToken ? JSON.parse(text, exact) : v;
}
// scan looks at the token fields where the API puts them: the top level,
// holders of a listing, events.
function scan(v) {
  if (!v || typeof v !== 'object') return;
  for (const k of TOKEN_FIELDS) check(k, v[k]);
  if (v.holder) check('token', v.holder.token);
  for (const l of v.locks || []) { if (l.holder) check('token', l.holder.token); }
  for (const e of v.events || []) check('token', e.token);
}
const cmpDigits = (a, b) => (a.length - b.length) || (a < b ? -1 : a > b ? 1 : 0);

// RFC 3339 with up to nanoseconds, to Unix ms.
function ms(iso) {
  if (!iso) return NaN;
  const m = /^(.*T\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$/.exec(iso);
  if (!m) return Date.parse(iso);
  return Date.parse(m[1] + '.' + ((m[2] || '') + '000').slice(0, 3) + m[3]);
}
const serverNow = () => Date.now() + st.skew;

// The server's clock from the Date header (1 s resolution): every answer
// narrows the interval the offset must lie in.
function sampleSkew(date, t0, t1) {
  const d = Date.parse(date || '');
  if (isNaN(d)) return;
  let lo = d - t1, hi = d + 1000 - t0;
  if (lo > st.skewHi || hi < st.skewLo) {
    st.skewLo = -Infinity; st.skewHi = Infinity; // a clock jumped: start over
  }
  st.skewLo = Math.max(st.skewLo, lo);
  st.skewHi = Math.min(st.skewHi, hi);
  const mid = (st.skewLo + st.skewHi) / 2;
  // Within a second, prefer our own clock: the header cannot tell better.
  st.skew = Math.abs(mid) < 1000 && st.skewLo <= 0 && st.skewHi >= 0 ? 0 : mid;
}

function fmtDur(msecs) {
  if (!(msecs >= 0)) msecs = 0;
  const s = msecs / 1000;
  if (s < 60) return s.toFixed(1) + ' s';
  if (s < 3600) return Math.floor(s / 60) + 'm ' + String(Math.floor(s % 60)).padStart(2, '0') + 's';
  if (s < 86400) return Math.floor(s / 3600) + 'h ' + String(Math.floor(s % 3600 / 60)).padStart(2, '0') + 'm';
  return Math.floor(s / 86400) + 'd ' + Math.floor(s % 86400 / 3600) + 'h';
}
const fmtSecs = (sec) => fmtDur(sec * 1000);
function fmtClock(t) {
  const d = new Date(t);
  const p = (n, w = 2) => String(n).padStart(w, '0');
  return p(d.getHours()) + ':' + p(d.getMinutes()) + ':' + p(d.getSeconds()) + '.' + p(d.getMilliseconds(), 3);
}

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}
// A key may hold any character but a control character, so also some that
// show as nothing, look like another one or turn the text around them:
// format characters (U+200B zero width space, U+202E right-to-left
// override…), spaces other than U+0020 (U+00A0 looks like it), line and
// paragraph separators, private-use and unassigned code points. The page
// shows each as its code point, marked, so that no two keys read alike
// (runs of spaces are kept by the style sheet).
const HIDDEN = /((?! )[\p{Cf}\p{Z}\p{Co}\p{Cn}])/gu;
const codePoint = (c) => 'U+' + c.codePointAt(0).toString(16).toUpperCase().padStart(4, '0');
// plainKey is a key as plain text (a confirmation, a banner).
const plainKey = (key) => key.replace(HIDDEN, (c) => '<' + codePoint(c) + '>');

// keyEl is el for a key: a line may break after a separator (/ . : _ -),
// never inside a word; the characters HIDDEN matches are shown marked.
function keyEl(tag, cls, key) {
  const e = el(tag, cls);
  const parts = key.split(/(?<=[/.:_-])/);
  parts.forEach((p, i) => {
    if (i) e.appendChild(document.createElement('wbr'));
    p.split(HIDDEN).forEach((s, j) => {
      if (j % 2) {
        const m = el('span', 'hidden-char', codePoint(s));
        m.title = codePoint(s) + ': a character of the key that shows as nothing, like another one, or turns the text around it';
        e.appendChild(m);
      } else if (s) {
        e.appendChild(document.createTextNode(s));
      }
    });
  });
  return e;
}
function cell(tr, label, cls, text) {
  const td = el('td', cls, text);
  td.dataset.label = label;
  tr.appendChild(td);
  return td;
}

const banners = new Map();
function banner(key, msg) {
  if (msg) banners.set(key, msg); else banners.delete(key);
  const b = $('banner');
  b.textContent = [...banners.values()].join(' ');
  b.hidden = banners.size === 0;
}

function setConn() {
  const c = $('conn');
  let cls, text;
  if (st.authNeeded) { cls = 'down'; text = 'token needed'; }
  else if (banners.has('locks') || banners.has('cluster')) { cls = 'down'; text = 'unreachable'; }
  else if (st.live) { cls = 'live'; text = 'live'; }
  else { cls = 'polling'; text = 'polling every second'; }
  c.className = 'conn ' + cls;
  c.textContent = text;
}

// ---- HTTP ------------------------------------------------------------------

class AuthError extends Error {}

// Every answer's Date header narrows the clock offset.
const client = new Client({
  addresses: [location.origin],
  token: st.token,
  retryFor: 0, // the page polls again by itself; say at once when a read fails
  fetch: async (url, init) => {
    const t0 = Date.now();
    const res = await fetch(url, init);
    sampleSkew(res.headers.get('Date'), t0, Date.now());
    return res;
  },
});

// A 401 asks for the token. One to a call sent with another token than
// the current one (sent before the user gave it) is not the current
// token's fault: the call is made again.

// read runs a client call.
async function read(f) {
  const sent = st.token;
  try {
    return await f();
  } catch (e) {
    if (!(e instanceof BatonError && e.status === 401)) throw e;
    if (sent !== st.token && !st.authNeeded) return read(f);
    needAuth(st.token ? 'The server refused this token.' : '');
    throw new AuthError('unauthorized');
  }
}

async function call(url, opts = {}) {
  const sent = st.token;
  const headers = Object.assign({ Accept: 'application/json' }, opts.headers);
  if (sent) headers.Authorization = 'Bearer ' + sent;
  const res = await fetch(url, Object.assign({ cache: 'no-store' }, opts, { headers }));
  if (res.status === 401) {
    await res.body?.cancel();
    if (sent !== st.token && !st.authNeeded) return call(url, opts);
    needAuth(st.token ? 'The server refused this token.' : '');
    throw new AuthError('unauthorized');
  }
  return res;
}

async function getJSON(url) {
  const res = await call(url);
  const text = await res.text();
  if (!res.ok) {
    let msg = res.status + ' ' + res.statusText;
    try { const b = JSON.parse(text); if (b && b.message) msg = b.message; } catch (_) { /* not JSON */ }
    const err = new Error(msg);
    err.status = res.status;
    throw err;
  }
  return { body: parse(text), res };
}

// ---- auth ------------------------------------------------------------------

function needAuth(msg) {
  if (!st.authNeeded) {
    st.authNeeded = true;
    stopStream();
  }
  $('auth').hidden = false;
  $('auth-error').textContent = msg;
  $('auth-error').hidden = !msg;
  $('forget').hidden = !st.token;
  setConn();
  if (!msg) $('auth-token').focus();
}

// askAdminToken opens the token form after a forced release was refused
// (403), without stopping the page: its reads need no other token.
function askAdminToken() {
  $('auth').hidden = false;
  $('auth-error').textContent = 'A forced release needs one of the node’s admin_tokens: give one here to force releases from this page.';
  $('auth-error').hidden = false;
  $('forget').hidden = !st.token;
}

$('auth').addEventListener('submit', (e) => {
  e.preventDefault();
  const t = $('auth-token').value.trim();
  if (!t) return;
  st.notAdmin = false; // a new token may be an admin token
  banner('force', '');
  st.token = t;
  client.token = t;
  sessionStorage.setItem(TOKEN_KEY, t);
  $('auth-token').value = '';
  resume();
});
$('forget').addEventListener('click', () => {
  st.token = '';
  client.token = '';
  sessionStorage.removeItem(TOKEN_KEY);
  $('forget').hidden = true;
  resume();
});

function resume() {
  st.authNeeded = false;
  $('auth').hidden = true;
  $('forget').hidden = !st.token;
  setConn();
  clusterLoop();
  scheduleLocks(0);
  restartStream();
}

// ---- cluster -----------------------------------------------------------------

let clusterTimer = 0;
async function clusterLoop() {
  clearTimeout(clusterTimer);
  clusterTimer = 0;
  if (st.authNeeded) return;
  try {
    await refreshCluster();
    banner('cluster', '');
  } catch (e) {
    if (e instanceof AuthError) return;
    banner('cluster', 'Cannot read /cluster from this node: ' + e.message + '.');
  }
  setConn();
  clusterTimer = setTimeout(clusterLoop, 1000);
}

async function refreshCluster() {
  const c = await read(() => client.cluster());
  const was = st.cluster && st.cluster.role;
  st.cluster = c;
  const active = (c.active || '').replace(/\/+$/, '');
  if (c.role !== 'active') {
    banner('role', active
      ? 'This node is a standby of the active, ' + active + ': the locks below are its replica; force a release from the active’s page.'
      : 'This node is a ' + (c.role || 'node') + ' and knows no active node right now.');
  } else {
    banner('role', '');
  }
  banner('sync', c.role === 'active' && c.sync_degraded
    ? 'Degraded: fewer than sync_standbys (' + c.sync_standbys + ') standbys acknowledged a change within sync_timeout, or fewer peers were live when it was promoted; this node answers without them until they are back, and a crash of it now loses what only it has.'
    : '');
  if (was && was !== c.role) scheduleLocks(0);
  else if (!was) renderLocks(); // the force buttons follow the role
  renderCluster();
}

function renderLag() {
  const lag = $('lag');
  lag.hidden = st.lag === undefined;
  lag.textContent = st.lag === undefined ? '' : 'replica lag ' + (st.lag < 10 ? st.lag.toFixed(2) : st.lag.toFixed(0)) + ' s';
}

function renderCluster() {
  const c = st.cluster;
  if (!c) return;
  $('self').textContent = c.self;
  const role = $('role');
  role.textContent = c.role || 'unknown';
  role.className = 'badge ' + (c.role || '');
  $('last-token').textContent = c.last_token;
  const tb = $('peers').tBodies[0];
  const frag = document.createDocumentFragment();
  const peers = (c.peers || []).slice().sort((a, b) => a.priority - b.priority);
  for (const p of peers) {
    const tr = el('tr', p.live ? '' : 'dead');
    tr.dataset.url = p.url;
    cell(tr, 'priority', 'num', String(p.priority));
    const node = cell(tr, 'node', 'node');
    if (/^https?:\/\//.test(p.url)) {
      const a = el('a', '', p.url);
      a.href = p.url + '/';
      node.appendChild(a);
    } else {
      node.textContent = p.url;
    }
    if (p.url === c.self) node.appendChild(el('span', 'tag', 'this node'));
    if (p.url === c.active) node.appendChild(el('span', 'tag active', 'active'));
    cell(tr, 'role', 'role', p.refused ? 'refuses this node (cluster_secret differs)' : p.role || 'unknown');
    const live = cell(tr, 'live', 'live');
    live.appendChild(el('span', 'dot' + (p.live ? ' up' : '')));
    live.appendChild(document.createTextNode(p.live ? ' yes' : ' no'));
    const lc = cell(tr, 'last contact', 'contact');
    lc.dataset.at = p.last_contact ? String(ms(p.last_contact)) : '';
    frag.appendChild(tr);
  }
  tb.replaceChildren(frag);
  tickCluster();
}

function tickCluster() {
  const now = serverNow();
  for (const td of $('peers').querySelectorAll('td.contact')) {
    const at = Number(td.dataset.at);
    td.textContent = !td.dataset.at ? 'never' : now - at < 1000 ? 'just now' : fmtDur(now - at) + ' ago';
  }
}

// ---- locks -------------------------------------------------------------------

let locksTimer = 0, locksDue = 0, locksRunning = false, locksPending = false, locksEnd = 0;

function scheduleLocks(inMs) {
  const due = Date.now() + inMs;
  if (locksTimer && locksDue <= due) return;
  clearTimeout(locksTimer);
  locksDue = due;
  locksTimer = setTimeout(runLocks, Math.max(0, inMs));
}

// kickLocks asks for a listing soon, after an event: no sooner than minGap
// after the last one, so that a storm of events costs a few listings a
// second at most.
function kickLocks() {
  if (locksRunning) { locksPending = true; return; }
  scheduleLocks(Math.max(0, locksEnd + st.minGap - Date.now()));
}

async function runLocks() {
  locksTimer = 0;
  if (st.authNeeded) return;
  if (locksRunning) { locksPending = true; return; }
  locksRunning = true;
  const started = Date.now();
  let failed = false;
  try {
    await refreshLocks();
    if (!st.live && !st.noEventLog) await pollEvents();
    banner('locks', '');
  } catch (e) {
    if (e instanceof AuthError) { locksRunning = false; return; }
    banner('locks', 'Cannot read the locks from this node: ' + e.message.replace(/\.$/, '') + '.');
    failed = true;
    st.lag = undefined;
    renderLag();
    st.known = false;
    renderLocks();
  }
  locksRunning = false;
  locksEnd = Date.now();
  const cost = locksEnd - started;
  st.minGap = Math.max(250, 3 * cost);
  setConn();
  let next = st.live && !failed ? 5000 : Math.max(1000, 2 * cost);
  if (locksPending) { locksPending = false; next = st.minGap; }
  scheduleLocks(next);
}

async function refreshLocks() {
  const prefix = st.prefix;
  const body = await read(() => client.list({ prefix: prefix || undefined, limit: LIST_LIMIT }));
  st.lag = body.replicaLag;
  st.known = true;
  renderLag();
  st.rows = body.locks.map((l) => {
    const h = l.holder;
    const holders = l.holders || (h ? [h] : []);
    return {
      key: l.key,
      token: h ? String(h.token) : '',
      expires: h ? ms(h.expires_at) : NaN,
      lease: h ? h.lease * 1000 : 0,
      waiters: l.waiters,
      oldest: l.oldest_wait_since ? ms(l.oldest_wait_since) : NaN,
      // Several holders (a semaphore, shared holders) share one row: the
      // first is shown, the others counted; each one's owner and token
      // are in the cell's title.
      holders: holders.map((x) => ({ token: String(x.token), owner: x.owner || '', mode: x.mode || 'exclusive' })),
      limit: l.limit || 1,
      oldestOwner: l.oldest_waiter_owner || '',
    };
  });
  st.total = body.total;
  st.listPrefix = prefix;
  st.sorted = null;
  renderLocks();
}

// forceRelease is the operator's release of every holder of key, behind a
// confirmation. The server allows it only to an admin token when it has
// auth_tokens or admin_tokens: after a 403 the page stops offering it and
// opens the token form (with admin_tokens alone nothing else asks for a
// token), and offers it again once a token is given.
async function forceRelease(key, holders) {
  const leases = holders === 1 ? 'its holder’s lease' : 'the leases of all ' + holders + ' holders';
  if (!window.confirm('Force the release of “' + plainKey(key) + '”? This ends ' + leases + ' now and moves the queue on.')) return;
  // As baton.js's lockPath: a key with a "." or ".." segment has its
  // slashes escaped too, or the browser resolves the segment and the call
  // names another lock ("x/../y" forced the release of "y").
  const path = '/locks/' + (/(^|\/)\.\.?(\/|$)/.test(key) ? encodeURIComponent(key) : key.split('/').map(encodeURIComponent).join('/')) + '?force=true';
  // A key of its own for this force: Chromium sends a DELETE again by
  // itself when its reused keep-alive connection breaks before the
  // answer, and the node answers a repeat under the same key without
  // forcing again (getRandomValues: randomUUID needs a secure context).
  const idem = 'force-' + Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, '0')).join('');
  try {
    const res = await call(path, { method: 'DELETE', headers: { 'Idempotency-Key': idem } });
    if (res.status === 403) {
      st.notAdmin = true;
      banner('force', 'This token may not force a release: that needs one of the node’s admin_tokens.');
      askAdminToken();
    } else if (!res.ok && res.status !== 404) {
      banner('force', 'The forced release of “' + plainKey(key) + '” failed: ' + res.status + ' ' + res.statusText + '.');
    } else {
      banner('force', '');
    }
    await res.body?.cancel();
  } catch (e) {
    // fetch's TypeError: the request may have reached the node, which may
    // have made the force and handed the lock on; a second force would
    // release those new holders (a force is not safe to repeat), so the
    // page sends it once and says so, as the Go client and the CLI do.
    if (e instanceof TypeError) banner('force', 'The answer to the forced release of “' + plainKey(key) + '” was lost (' + e.message + '): it may have been made. Look at the key’s holders below before forcing again.');
    else if (!(e instanceof AuthError)) banner('force', 'The forced release of “' + plainKey(key) + '” failed: ' + e.message);
  }
  kickLocks();
  renderLocks();
}

function sortValue(r, now) {
  switch (st.sort) {
    case 'remaining': return isNaN(r.expires) ? Infinity : r.expires;
    case 'waiters': return r.waiters;
    case 'oldest': return isNaN(r.oldest) ? -1 : now - r.oldest;
    default: return 0;
  }
}

function sortedRows() {
  if (st.sorted) return st.sorted;
  const p = st.prefix;
  const rows = p ? st.rows.filter((r) => r.key.startsWith(p)) : st.rows.slice();
  const dir = st.dir, now = serverNow();
  const byKey = (a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0);
  let cmp;
  if (st.sort === 'key') cmp = (a, b) => dir * byKey(a, b);
  else if (st.sort === 'token') cmp = (a, b) => dir * cmpDigits(a.token, b.token) || byKey(a, b);
  else {
    for (const r of rows) r.sv = sortValue(r, now);
    cmp = (a, b) => (a.sv === b.sv ? 0 : dir * (a.sv < b.sv ? -1 : 1)) || byKey(a, b);
  }
  rows.sort(cmp);
  st.sorted = rows;
  return rows;
}

function renderLocks() {
  const rows = sortedRows();
  const pages = Math.max(1, Math.ceil(rows.length / PAGE_SIZE));
  st.page = Math.min(st.page, pages - 1);
  const from = st.page * PAGE_SIZE;
  const frag = document.createDocumentFragment();
  st.visible = [];
  for (const r of rows.slice(from, from + PAGE_SIZE)) {
    const tr = el('tr');
    tr.dataset.key = r.key;
    cell(tr, 'key', 'key').appendChild(keyEl('span', '', r.key));
    const hc = cell(tr, 'holder token', r.token ? 'token' : 'token free', r.token || 'free');
    if (r.holders.length) {
      const first = r.holders[0];
      if (first.owner) hc.appendChild(el('span', 'owner', ' ' + first.owner));
      // The mode is shown where it says something: shared holders, or
      // a key that admits several.
      if (first.mode === 'shared' || r.limit > 1) {
        // Readers of a read/write lock (limit 1) are any number: no "of 1".
        const more = r.holders.length > 1 ? ' +' + (r.holders.length - 1) + (r.limit > 1 ? ' of ' + r.limit : '') : '';
        hc.appendChild(el('span', 'mode', ' ' + first.mode + more));
      }
      hc.title = r.holders.map((x) => x.token + ' ' + x.mode + (x.owner ? ' (' + x.owner + ')' : '')).join('\n');
      // Not on a standby: it answers the DELETE with a 307 to the active,
      // another origin, which the browser may call only with cors_origins.
      if (!st.notAdmin && st.cluster && st.cluster.role === 'active') {
        const b = el('button', 'force', 'force release');
        b.type = 'button';
        b.addEventListener('click', () => forceRelease(r.key, r.holders.length));
        hc.appendChild(b);
      }
    }
    const lc = cell(tr, 'lease left', 'lease-cell');
    const v = { r, lease: null, bar: null, text: null, oldest: null };
    if (r.token) {
      const box = el('div', 'lease');
      const bar = el('span', 'bar');
      const fill = el('i');
      bar.appendChild(fill);
      const t = el('span', 't');
      box.append(bar, t);
      lc.appendChild(box);
      Object.assign(v, { lease: box, bar: fill, text: t });
    } else {
      lc.textContent = '–';
    }
    cell(tr, 'waiters', 'num waiters' + (r.waiters ? ' waiting' : ''), String(r.waiters));
    v.oldest = cell(tr, 'oldest wait', 'num oldest', isNaN(r.oldest) ? '–' : '');
    st.visible.push(v);
    frag.appendChild(tr);
  }
  $('locks').tBodies[0].replaceChildren(st.known ? frag : '');
  const shown = st.known ? rows.length : 0;
  let count = shown === 1 ? '1 key' : shown + ' keys';
  if (st.total > st.rows.length && st.listPrefix === st.prefix) {
    count = 'first ' + st.rows.length + ' of ' + st.total + ' keys (narrow the prefix to see the rest)';
  }
  if (!st.known) count = st.rows.length || banners.has('locks') ? 'unknown' : 'loading…';
  $('count').textContent = count;
  $('empty').hidden = shown > 0;
  // Say "no lock" only when a listing just said so.
  $('empty').textContent = !st.known
    ? (banners.has('locks') ? 'Unknown: the locks cannot be read from this node right now.' : 'Loading the locks…')
    : st.prefix ? 'No lock under “' + st.prefix + '” is held or waited for.' : 'No lock is held or waited for.';
  $('page').textContent = 'page ' + (st.page + 1) + ' of ' + pages;
  $('prev').disabled = st.page === 0;
  $('next').disabled = st.page >= pages - 1;
  for (const b of document.querySelectorAll('#locks th button')) {
    if (b.dataset.sort === st.sort) b.setAttribute('aria-sort', st.dir > 0 ? 'ascending' : 'descending');
    else b.removeAttribute('aria-sort');
  }
  $('sort-select').value = st.sort + ':' + st.dir;
  tickLocks();
}

function tickLocks() {
  const now = serverNow();
  for (const v of st.visible) {
    const r = v.r;
    if (v.text) {
      const left = r.expires - now;
      v.text.textContent = left > 0 ? fmtDur(left) : 'expiring';
      const frac = r.lease > 0 ? Math.max(0, Math.min(1, left / r.lease)) : 0;
      v.bar.style.width = (frac * 100).toFixed(1) + '%';
      v.lease.classList.toggle('low', left < 3000 || frac < 0.2);
    }
    if (!isNaN(r.oldest)) v.oldest.textContent = fmtDur(now - r.oldest);
  }
}

function setSort(key, dir) {
  if (!(key in SORT_DEFAULT_DIR)) return;
  st.sort = key;
  st.dir = dir;
  st.sorted = null;
  st.page = 0;
  saveHash();
  renderLocks();
}
for (const b of document.querySelectorAll('#locks th button')) {
  b.addEventListener('click', () => {
    const k = b.dataset.sort;
    setSort(k, st.sort === k ? -st.dir : SORT_DEFAULT_DIR[k]);
  });
}
$('sort-select').addEventListener('change', (e) => {
  const [k, d] = e.target.value.split(':');
  setSort(k, Number(d));
});
$('prev').addEventListener('click', () => { st.page = Math.max(0, st.page - 1); renderLocks(); });
$('next').addEventListener('click', () => { st.page += 1; renderLocks(); });

let prefixTimer = 0;
$('prefix').addEventListener('input', (e) => {
  st.prefix = e.target.value;
  st.page = 0;
  st.sorted = null;
  saveHash();
  renderLocks(); // at once from what we have; the listing follows
  renderEvents();
  clearTimeout(prefixTimer);
  prefixTimer = setTimeout(() => scheduleLocks(0), 150);
});

// The view (prefix and sort, never the token) lives in the URL's hash.
function saveHash() {
  const q = new URLSearchParams();
  if (st.prefix) q.set('prefix', st.prefix);
  if (st.sort !== 'key' || st.dir !== 1) q.set('sort', st.sort + ':' + st.dir);
  const h = q.toString();
  history.replaceState(null, '', h ? '#' + h : location.pathname + location.search);
}
function loadHash() {
  const q = new URLSearchParams(location.hash.slice(1));
  st.prefix = q.get('prefix') || '';
  $('prefix').value = st.prefix;
  const [k, d] = (q.get('sort') || '').split(':');
  if (k in SORT_DEFAULT_DIR && (d === '1' || d === '-1')) { st.sort = k; st.dir = Number(d); }
}

// ---- events ------------------------------------------------------------------

let stream = null, streamRetry = 0;

function stopStream() {
  clearTimeout(streamRetry);
  if (stream) stream.abort();
  stream = null;
  st.live = false;
}
function restartStream() {
  stopStream();
  connectStream();
}

// connectStream reads GET /events as a server-sent event stream through
// fetch (EventSource cannot send an Authorization header). While it is
// down, runLocks polls the listing and the events every second.
async function connectStream() {
  if (st.authNeeded) return;
  const ac = new AbortController();
  stream = ac;
  const since = st.lastSeq ? '?since=' + st.lastSeq : '';
  try {
    const res = await call('/events' + since, { headers: { Accept: 'text/event-stream' }, signal: ac.signal });
    if (res.status === 404) {
      st.noEventLog = true;
      await res.body?.cancel();
      return;
    }
    if (!res.ok || !res.body) throw new Error('GET /events: ' + res.status);
    st.noEventLog = false;
    st.live = true;
    setConn();
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += value.replace(/\r\n?/g, '\n');
      const batch = [];
      let i;
      while ((i = buf.indexOf('\n\n')) >= 0) {
        parseBlock(buf.slice(0, i), batch);
        buf = buf.slice(i + 2);
      }
      if (batch.length) onEvents(batch);
    }
  } catch (e) {
    if (ac.signal.aborted || e instanceof AuthError) return;
  }
  if (ac.signal.aborted || stream !== ac) return;
  st.live = false;
  setConn();
  scheduleLocks(0);
  streamRetry = setTimeout(connectStream, 2000);
}

function parseBlock(block, out) {
  let kind = 'message', data = '';
  for (const line of block.split('\n')) {
    if (!line || line[0] === ':') continue;
    const c = line.indexOf(':');
    const f = c < 0 ? line : line.slice(0, c);
    let v = c < 0 ? '' : line.slice(c + 1);
    if (v[0] === ' ') v = v.slice(1);
    if (f === 'event') kind = v;
    else if (f === 'data') data += (data ? '\n' : '') + v;
  }
  if (!data) return;
  try {
    const ev = parse(data);
    out.push(kind === 'gap' ? { kind: 'gap', missed: ev.missed } : ev);
  } catch (_) { /* a malformed message: skip it */ }
}

async function pollEvents() {
  let r;
  try {
    r = await getJSON('/events?since=' + st.lastSeq);
  } catch (e) {
    if (e.status === 404) { st.noEventLog = true; return; }
    throw e;
  }
  const batch = [];
  if (r.body.missed) batch.push({ kind: 'gap', missed: r.body.missed });
  batch.push(...r.body.events);
  if (Number(r.body.last) < st.lastSeq) st.lastSeq = 0; // the node restarted
  if (batch.length) onEvents(batch, true);
}

function onEvents(batch, polled) {
  let locks = false, cluster = false;
  for (const ev of batch) {
    if (ev.seq) {
      if (ev.seq <= st.lastSeq) continue;
      st.lastSeq = ev.seq;
    }
    st.events.push(ev);
    if (ev.kind === 'promote' || ev.kind === 'handoff' || ev.kind === 'step_down') cluster = true;
    else locks = true;
    if (ev.token && st.cluster && cmpDigits(String(ev.token), String(st.cluster.last_token)) > 0) {
      st.cluster.last_token = String(ev.token);
      $('last-token').textContent = st.cluster.last_token;
    }
  }
  if (st.events.length > KEEP_EVENTS) st.events.splice(0, st.events.length - KEEP_EVENTS);
  renderEvents();
  if (locks && !polled) kickLocks();
  if (cluster) clusterLoop();
}

function eventDetail(ev) {
  const d = [];
  if (ev.token) d.push('token ' + ev.token);
  if (ev.owner) d.push('owner ' + ev.owner);
  if (ev.mode === 'shared') d.push('shared');
  if (ev.forced) d.push('forced by an operator');
  switch (ev.kind) {
    case 'grant': if (ev.lease) d.push('lease ' + fmtSecs(ev.lease)); if (ev.waited) d.push('waited ' + fmtSecs(ev.waited)); break;
    case 'expire': if (ev.lease) d.push('lease of ' + fmtSecs(ev.lease) + ' ran out'); break;
    case 'renew': if (ev.lease) d.push('lease ' + fmtSecs(ev.lease)); break;
    case 'timeout': if (ev.waited) d.push('waited ' + fmtSecs(ev.waited) + ', not granted'); break;
    case 'gap': d.push(ev.missed + ' events skipped'); break;
  }
  if (ev.key && (ev.kind === 'enqueue' || ev.kind === 'leave' || ev.waiters)) d.push(ev.waiters + (ev.waiters === 1 ? ' waiter' : ' waiters'));
  if (ev.node) d.push(ev.node);
  if (ev.message) d.push(ev.message);
  return d;
}

function renderEvents() {
  const all = $('all-kinds').checked;
  const p = st.prefix;
  const frag = document.createDocumentFragment();
  let n = 0;
  for (let i = st.events.length - 1; i >= 0 && n < SHOW_EVENTS; i--) {
    const ev = st.events[i];
    if (!all && QUIET.has(ev.kind)) continue;
    if (p && ev.key !== undefined && !ev.key.startsWith(p)) continue;
    const li = el('li', 'ev k-' + ev.kind);
    li.dataset.kind = ev.kind;
    if (ev.key) li.dataset.key = ev.key;
    const t = el('time', '', ev.at ? fmtClock(ms(ev.at)) : '');
    if (ev.at) t.dateTime = ev.at;
    li.append(t, el('span', 'kind k-' + ev.kind, ev.kind.replace('_', ' ')), keyEl('span', 'key', ev.key || ''));
    const detail = eventDetail(ev);
    if (detail.length) {
      const span = el('span', 'detail');
      const owner = ev.owner && 'owner ' + ev.owner;
      for (const part of detail) span.appendChild(el('span', part === ev.message ? 'msg' : part === owner ? 'owner' : '', part));
      li.appendChild(span);
    }
    frag.appendChild(li);
    n++;
  }
  $('events').replaceChildren(frag);
}
$('all-kinds').addEventListener('change', renderEvents);

// ---- start -------------------------------------------------------------------

function tick() {
  tickLocks();
  tickCluster();
}

loadHash();
renderLocks();
$('forget').hidden = !st.token;
setInterval(tick, 100);
resume();
