// Types of baton-node.js, baton.js for Node (and Bun, Deno's node
// compatibility) over node:http2 (served by every node at /baton-node.d.ts
// beside /baton-node.js). Kept by hand; a test
// (web/js/test/types.test.mjs) checks it against the module's exports.

import { Client as FetchClient, ClientOptions } from "./baton.js";

export { BatonError, Lock } from "./baton.js";
export type { ClientOptions, AcquireOptions, Grant, Holder, LockStatus, LockList, PeerView, ClusterView } from "./baton.js";

export interface NodeClientOptions extends ClientOptions {
  /**
   * "http2" (default): calls multiplexed on two HTTP/2 connections per
   * origin (h2c to http://, h2 by ALPN to https://), each pinged every 5 s
   * while calls are in flight and closed when a PING goes unanswered 5 s
   * (a silent node: its calls move on); "fetch": the runtime's fetch, as
   * baton.js. A `fetch` option wins over both.
   */
  transport?: "http2" | "fetch";
  /**
   * Options of node:tls connect for https:// addresses over http2: `ca`
   * (a private CA), `cert` and `key` (a client certificate), ... ALPN asks
   * for h2.
   */
  tls?: Record<string, unknown>;
}

/** The part of a fetch Response that the client reads. */
export interface Answer {
  readonly status: number;
  readonly ok: boolean;
  readonly statusText: string;
  /** Where the call ended, after redirects. */
  readonly url: string;
  readonly redirected: boolean;
  readonly headers: { get(name: string): string | null };
  text(): Promise<string>;
  json(): Promise<any>;
}

/**
 * A fetch-shaped transport over node:http2 (for the `fetch` option):
 * follows redirects like fetch (Authorization dropped across origins);
 * `close()` ends its connections (a later call opens new ones).
 */
export declare function http2Transport(tls?: Record<string, unknown>): ((url: string, init?: {
  method?: string;
  headers?: Record<string, string>;
  signal?: AbortSignal;
  redirect?: "follow" | "manual" | "error";
}) => Promise<Answer>) & { close(): void };

/** baton.js's Client, over node:http2 by default. */
export declare class Client extends FetchClient {
  constructor(options: NodeClientOptions);
  /** The transport in use: "http2", or "fetch" (also when a `fetch` option was given). */
  readonly transport: "http2" | "fetch";
  /**
   * As baton.js's close() (later calls reject "closed"; resolves once the
   * releases and settles in flight have ended). The HTTP/2 connections
   * close once no call, acquire or withLock is in flight either; a
   * Lock.release after close() opens them again, and they close once it
   * ends.
   */
  close(): Promise<void>;
}
