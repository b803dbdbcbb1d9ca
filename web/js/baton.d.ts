// Types of baton.js, the official JavaScript client of baton (served by
// every node at /baton.d.ts beside /baton.js). Kept by hand; a test
// (web/js/test/types.test.mjs) checks it against the module's exports.

/** An error from baton, or from reaching it. */
export declare class BatonError extends Error {
  constructor(status: number, code: string, message: string, field?: string, cause?: unknown);
  name: "BatonError";
  /** HTTP status; 0 when no node answered. */
  status: number;
  /**
   * The server's `error` ("timeout", "not_holder", "not_held",
   * "invalid_argument", "limit_mismatch", "too_many_waiters",
   * "unauthorized", ...), or from the client: "unavailable" (no node
   * answered), "lost" (the lease ran out before a renewal), "closed"
   * (a call after Client.close()), "bad_answer" (an acquire's 2xx with
   * no grant in it).
   */
  code: string;
  /** The offending parameter of a 400, the member that differs of a 422, "limit" of a 409 limit_mismatch. */
  field?: string;
}

export interface ClientOptions {
  /** Node base URLs, tried in round robin (a comma-separated string is split; blank entries are dropped, as BATON_ADDR's for the Go client). */
  addresses: string | string[];
  /** Bearer token (config auth_tokens). */
  token?: string;
  /** The fetch to use; default globalThis.fetch. */
  fetch?: typeof fetch;
  /** Milliseconds (>= 0) an acquire or a read keeps trying while no node answers, an acquire no longer than its `wait`; default 10000. Then the call rejects with code "unavailable". Anything else is refused: invalid_argument, field "retryFor". */
  retryFor?: number;
}

export interface AcquireOptions {
  /** Seconds (> 0) the lock is held without a renewal; default: the server's lease_default. */
  lease?: number;
  /** Seconds (>= 0) to wait in the queue; 0 or absent: no limit. */
  wait?: number;
  /** A label for people, 1-128 bytes. */
  owner?: string;
  mode?: "exclusive" | "shared";
  /** Holders at once (a counting semaphore, 1-10000); default: the key's limit (1 for a free key); another limit than the key's is a 409 limit_mismatch. */
  limit?: number;
  /** Cancels the wait; the server drops the waiter (a grant the abort cut off is released). Anything but an AbortSignal is refused: invalid_argument, field "signal". */
  signal?: AbortSignal;
}

/** The answer of a grant or a renewal. */
export interface Grant {
  key: string;
  token: number;
  /** Seconds. */
  lease: number;
  /** RFC 3339. */
  expires_at: string;
  node?: string;
}

export interface Holder {
  token: number;
  lease: number;
  expires_at: string;
  granted_at: string;
  /** The acquire's owner label; null when it carried none. */
  owner: string | null;
  mode?: "exclusive" | "shared";
}

export interface LockStatus {
  key: string;
  holder: Holder | null;
  holders: Holder[];
  limit: number;
  waiters: number;
  /** While somebody waits: since when the first waiter waits, its owner (when it sent one) and its mode. */
  oldest_wait_since?: string;
  oldest_waiter_owner?: string;
  oldest_waiter_mode?: "exclusive" | "shared";
  /** Seconds, when a standby answered from its replica (Baton-Replica-Lag). */
  replicaLag?: number;
}

export interface LockList {
  locks: LockStatus[];
  total: number;
  /** Seconds, when a standby answered from its replica (Baton-Replica-Lag). */
  replicaLag?: number;
}

export interface PeerView {
  url: string;
  priority: number;
  role: string;
  live: boolean;
  /** RFC 3339; null if never heard from. */
  last_contact: string | null;
  /** The last index of the node's log, as its last status said. */
  last_index: number;
  /** In the active's view of a standby that streams from it: the last index it acknowledged. */
  acked_index?: number;
  /** The node's log has refused writes for a failover timeout or more (a full disk). */
  log_failing?: boolean;
  /** The node's cluster ID, as its last status said. */
  cluster_id?: string;
  /** The node refuses this node's peer requests: its cluster_secret differs. */
  refused?: boolean;
}

export interface ClusterView {
  self: string;
  role: "active" | "standby" | string;
  active: string;
  peers: PeerView[];
  last_token: number;
  [field: string]: unknown;
}

export declare class Client {
  constructor(options: ClientOptions);
  /** The bearer token sent with every call; may be changed at any time. */
  token: string;
  /**
   * Takes the lock `key`, waiting in its queue up to `wait` seconds (0 or
   * absent: no limit). A grant that ended before its answer came (a 410
   * grant_ended; or one answered after half its lease whose renewal at
   * once was refused — a frozen tab, a held-back answer) starts the
   * acquire again, with a new Idempotency-Key, for what is left of the
   * wait. A 409 "superseded" (an attempt of its own that it cut off took
   * its place over) is repeated under the same Idempotency-Key, which
   * takes the place back. Errors: "timeout" (408, not granted; also a
   * grant ended past the wait), "grant_ended" (410, nothing held) and
   * "superseded" (409) once 10 new acquires and repeats were made in all,
   * "invalid_argument" (400, `field`), "limit_mismatch" (409),
   * "too_many_waiters" (429), "unauthorized" (401), "unavailable",
   * "closed", another 5xx as answered (a node's 500, a proxy's 502 or
   * 504), "bad_answer" (a 2xx with no grant in it: a proxy's page, a
   * mangled body). An aborted `signal` rejects with its reason (the waiter
   * is dropped). A grant that the abort, "unavailable", a 5xx or a
   * "bad_answer" may have cut off is released in the background (close()
   * waits for it).
   * With a `wait`, an attempt still unanswered 3 s after it (a silent
   * node: paused, frozen) moves to the next address; a read's, after 5 s.
   */
  acquire(key: string, options?: AcquireOptions): Promise<Lock>;
  /**
   * Renews the lock `key` held under `token`: its lease restarts from now,
   * `lease` seconds long (absent: the grant's lease). Errors as release.
   * An attempt still unanswered after 5 s (a silent node) moves to the
   * next address, as a read's.
   */
  renew(key: string, token: number, lease?: number, signal?: AbortSignal): Promise<Grant>;
  /**
   * Releases the lock `key` held under `token`, retried every 200 ms for
   * 5 s until confirmed (a 429 is retried too); "not_held" (404) and
   * "not_holder" (409) end it (errors unless an earlier attempt failed or
   * got a 5xx).
   * Errors: those two, "invalid_argument", "unavailable", "closed".
   */
  release(key: string, token: number): Promise<void>;
  /**
   * Runs `fn(lock)` holding `key` (options as acquire), renewed meanwhile
   * (`lock.lost` aborts if lost), then released. Resolves to what `fn`
   * returns; rejects with `fn`'s error, else the loss, else the release's.
   */
  withLock<T>(key: string, fn: (lock: Lock) => Promise<T> | T, options?: AcquireOptions): Promise<T>;
  status(key: string, options?: { signal?: AbortSignal }): Promise<LockStatus>;
  list(options?: { prefix?: string; after?: string; limit?: number; signal?: AbortSignal }): Promise<LockList>;
  cluster(options?: { signal?: AbortSignal }): Promise<ClusterView>;
  /**
   * Refuses every later call ("closed") and resolves once the releases in
   * flight (Client.release, Lock.release) and the background settles of
   * acquires an abort or "unavailable" cut off have ended, each within its
   * 5 s of retries. Await it before a process or a serverless function
   * ends, or a release may be lost with it. A call still waiting (an
   * acquire) is neither waited for nor stopped: abort it first; cut off
   * after close(), it is still settled in the background. Locks are not
   * released (their leases run out); their keepAlive ends; Lock.release
   * (and withLock's) still works after close().
   */
  close(): Promise<void>;
}

/** A held lock. */
export declare class Lock {
  constructor(client: Client, grant: Grant, sent: number);
  readonly key: string;
  /** The fencing token, below 2^53. */
  readonly token: number;
  /** Seconds. */
  lease: number;
  /** The end of the lease, as the server reported it. */
  expiresAt: Date;
  node?: string;
  /**
   * Aborted, with a BatonError as its reason, when the lock is lost: a
   * renewal answered "not_held"/"not_holder", or the lease ran out (our
   * clock) before a renewal. A release does not abort it; one that failed
   * leaves the lease counting, and it aborts when that lease runs out.
   */
  readonly lost: AbortSignal;
  /**
   * Restarts the lease, `lease` seconds long (default: the current one).
   * A renewal the node made once `lost` was aborted (sent after, or
   * answered after the lease ran out on our clock) rejects with `lost`'s
   * reason: the lock stays lost (release it).
   */
  renew(lease?: number, signal?: AbortSignal): Promise<void>;
  /**
   * Renews in the background at half the lease, counted from the last
   * renewal (its own or a `renew`'s, whose lease it then keeps), until
   * released or lost; returns a function that stops it.
   */
  keepAlive(): () => void;
  release(): Promise<void>;
}
