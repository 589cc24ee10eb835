// TypeScript declarations for the appnorth package (index.js).

// Symbol.dispose and Symbol.asyncDispose for TypeScript before 5.2 (later
// versions declare them the same way).
declare global {
  interface SymbolConstructor {
    readonly dispose: unique symbol;
    readonly asyncDispose: unique symbol;
  }
}

export type LogLevelName = 'debug' | 'info' | 'warning' | 'error';
export declare const LogLevel: Readonly<{ DEBUG: 0; INFO: 1; WARNING: 2; ERROR: 3 }>;
export declare const ConfigTier: Readonly<{ DEFAULT: 0; BUNDLED: 1; CACHED: 2; REMOTE: 3 }>;
export declare const ConfigState: Readonly<{ INITIALIZING: 0; VALID: 1; INTERRUPTED: 2; OFFLINE: 3; OFF: 4 }>;
export declare const NetworkType: Readonly<{ UNKNOWN: 0; WIFI: 1; CELLULAR: 2; EXPENSIVE_CELLULAR: 3 }>;

/** The library's version, "MAJOR.MINOR.PATCH". */
export declare const version: string;
export declare const versionNumber: number;
/**
 * Stops the library for good (appnorth_shutdown); the package calls it from
 * the main thread's process.on('exit'). Every later call throws WrongStateError.
 */
export declare function shutdown(timeoutMs?: number): void;
/** The name of a status code, e.g. statusString(5) === 'network error'. */
export declare function statusString(code: number): string;

export interface OperationOptions {
  /** Cancels this operation alone; it then rejects with a CancelledError. */
  signal?: AbortSignal;
}
export interface WriteOptions extends OperationOptions {
  /** 1 to 255 printable ASCII characters; the library makes one when absent. */
  idempotencyKey?: string;
}

export interface ClientOptions {
  apiUrl: string;
  appId: string;
  email?: string;
  token?: string;
  apiTimeoutMs?: number;
  resourceTimeoutMs?: number;
  /** Receives log lines on this thread; off by default (NODE_DEBUG=appnorth prints them). */
  logger?: ((level: LogLevelName, message: string) => void) | null;
  logLevel?: LogLevelName | number;
  caFile?: string;
  caPem?: string;
  pinnedPublicKeys?: string;
  proxy?: string;
  compression?: boolean;
  allowCleartextHosts?: string[];
}

export interface Board { id: string; name: string; [key: string]: unknown }
export interface Idea { id: string; board_id: string; title: string; [key: string]: unknown }
export interface IdeaQuery extends OperationOptions {
  board?: string;
  q?: string;
  status?: 'open' | 'planned' | 'in_progress' | 'done' | 'declined';
  cursor?: string;
  limit?: number;
}
export interface FeedbackInit {
  text?: string;
  diagnostics?: Record<string, unknown>;
  screenshots?: { bytes: Uint8Array; contentType: 'image/png' | 'image/jpeg' }[];
}

export declare class Client {
  constructor(options: ClientOptions);
  /** "<api url>|<app id>|<email or anonymous>". */
  readonly scope: string;
  /** Operations started and not settled; only these keep the process alive. */
  readonly inFlight: number;
  setLogLevel(level: LogLevelName | number): void;
  cancel(): void;
  listBoards(options?: OperationOptions): Promise<{ boards: Board[] }>;
  listIdeas(query?: IdeaQuery): Promise<{ ideas: Idea[]; next_cursor: string | null }>;
  listComments(ideaId: string, options?: OperationOptions): Promise<{ comments: Record<string, unknown>[] }>;
  listChatMessages(options?: OperationOptions): Promise<{ messages: Record<string, unknown>[] }>;
  submitIdea(boardId: string, title: string, body?: string | null, options?: WriteOptions): Promise<any>;
  submitComment(ideaId: string, body: string, options?: WriteOptions): Promise<any>;
  submitFeedback(feedback: Feedback | FeedbackInit, options?: WriteOptions): Promise<any>;
  vote(ideaId: string, options?: WriteOptions): Promise<any>;
  sendChatMessage(body: string, options?: WriteOptions): Promise<any>;
  /** Closes the events queues and configs made with it, then itself. */
  close(): void;
  closeAsync(): Promise<void>;
  [Symbol.dispose](): void;
  [Symbol.asyncDispose](): Promise<void>;
}

export interface EventsOptions {
  dataDir: string;
  flushIntervalMs?: number;
  batchThreshold?: number;
  maxEvents?: number;
  maxBytes?: number | bigint;
  maxEventBytes?: number;
  retryBaseDelayMs?: number;
  retries?: number;
  retryAfterCapMs?: number;
  breakerThreshold?: number;
  retryJitterPercent?: number;
  requireConsent?: boolean;
  /** A new session after this long without an event (default 1800000; 0: off). */
  sessionIdleTimeoutMs?: number;
  /** A new session once one is this old (default 86400000; 0: off). */
  sessionMaxLengthMs?: number;
  /** Event timestamps, sessions and upload timers read it (tests). */
  clock?: ManualClock;
  /** The share of installs that track, 0 to 1 (default 1), per install by its anonymous id. */
  sampleRate?: number;
  /** Follow the config key "appnorth.events" of the configs made with the same client (default true). */
  remoteSettings?: boolean;
  /** Called inside track() with the assembled event: return it (or another object) to store it, null to drop it; a throw drops it. */
  beforeSend?: (event: Record<string, any>) => Record<string, any> | null | undefined;
}

export declare class Events {
  constructor(client: Client, options: EventsOptions);
  /** Synchronous and durable: on disk before it returns. false: dropped (consent, switched off,
   *  sampled out or blocked by the config key "appnorth.events"). */
  track(name: string, properties?: Record<string, unknown> | null): boolean;
  flush(timeoutMs?: number, options?: OperationOptions): Promise<{ sent: number }>;
  setNetworkType(type: number): void;
  startSession(): void;
  foreground(): void;
  reset(): void;
  setConsent(granted: boolean): void;
  readonly consent: 'unknown' | 'revoked' | 'granted';
  identify(userId: string): void;
  setPushToken(token: string | null): void;
  readonly anonymousId: string;
  /** Super properties: saved in the data directory, added to every event; track()'s own win. */
  register(properties: Record<string, unknown>): void;
  /** register(), but a key already registered keeps its value. */
  registerOnce(properties: Record<string, unknown>): void;
  unregister(key: string): void;
  readonly superProperties: Record<string, unknown>;
  /** The session id the next event carries, unless that event starts a new session. */
  readonly sessionId: string;
  stats(): Record<string, any>;
  /** The queued events, oldest first, as a batch body carries them (for tests). */
  pending(max?: number): Array<Record<string, any>>;
  close(): void;
  /** Uploads for up to timeoutMs (2000), then close(). */
  closeAsync(timeoutMs?: number): Promise<void>;
  [Symbol.dispose](): void;
  [Symbol.asyncDispose](): Promise<void>;
}

export interface ConfigOptions {
  dataDir?: string;
  bundledPath?: string;
  ttlSeconds?: number;
  clock?: ManualClock;
  pollIntervalMs?: number;
  reconnectBaseMs?: number;
  reconnectMaxMs?: number;
  reconnectJitterPercent?: number;
}
export type TierName = 'default' | 'bundled' | 'cached' | 'remote';
export interface ConfigChange {
  config: Record<string, unknown>;
  changedKeys: string[];
  tier: TierName;
}

export type ConfigStateName = 'initializing' | 'valid' | 'interrupted' | 'offline' | 'off';
export interface ConfigStatus {
  state: ConfigStateName;
  /** When that state began, wall ms since the epoch. */
  sinceMs: number;
  /** When the last failure happened, wall ms; 0 if none yet. */
  lastErrorMs: number;
  /** The last failure, kept after a recovery; null if none yet. */
  lastError: { status: number; httpStatus: number; message: string } | null;
}

export declare class Config {
  constructor(client: Client, options?: ConfigOptions);
  /** 'change' runs on this thread; a live config does not keep the process alive. */
  on(event: 'change', listener: (change: ConfigChange) => void): this;
  /** 'status' runs on this thread when the state, or the last error's kind, changes. */
  on(event: 'status', listener: (status: ConfigStatus) => void): this;
  once(event: 'status', listener: (status: ConfigStatus) => void): this;
  off(event: 'status', listener: (status: ConfigStatus) => void): this;
  once(event: 'change', listener: (change: ConfigChange) => void): this;
  off(event: 'change', listener: (change: ConfigChange) => void): this;
  removeAllListeners(event?: 'change' | 'status'): this;
  listenerCount(event: 'change' | 'status'): number;
  getString(key: string, defaultValue?: string | null): string | null;
  getInt(key: string, defaultValue?: number | bigint): number | bigint;
  getDouble(key: string, defaultValue?: number): number;
  getBool(key: string, defaultValue?: boolean): boolean;
  getJson<T = unknown>(key: string, defaultValue?: T): T;
  snapshot(): Record<string, unknown>;
  readonly source: { tier: TierName; fetchedMs: number };
  refresh(options?: OperationOptions): Promise<void>;
  startLive(): void;
  stopLive(): void;
  lastFetchStatus(): { status: number; httpStatus: number; message: string; timeMs: number };
  readonly status: ConfigStatus;
  close(): void;
  [Symbol.dispose](): void;
  [Symbol.asyncDispose](): Promise<void>;
}

declare class Handle {
  close(): void;
  [Symbol.dispose](): void;
  [Symbol.asyncDispose](): Promise<void>;
}

export declare class Storage extends Handle {
  static sqlite(dataDir: string, name: string): Storage;
  static memory(): Storage;
  erase(): void;
}

export declare class OfflineQueue extends Handle {
  constructor(storage: Storage, options?: { maxEntries?: number });
  /** true: sent now; false: queued after a network failure. */
  submitIdea(client: Client, boardId: string, title: string, body?: string | null, options?: WriteOptions): Promise<boolean>;
  submitComment(client: Client, ideaId: string, body: string, options?: WriteOptions): Promise<boolean>;
  submitFeedback(client: Client, feedback: Feedback | FeedbackInit, options?: WriteOptions): Promise<boolean>;
  flush(client: Client, options?: OperationOptions): Promise<{ sent: number; failedEntryId: string | null }>;
  pendingCount(): number;
  entries(): Record<string, unknown>[];
  discard(clientOrScope?: Client | string | null): number;
  discardEntry(entryId: string): boolean;
}

export declare class ManualClock extends Handle {
  constructor(wallMs: number | bigint);
  advance(ms: number | bigint): void;
  setWall(wallMs: number | bigint): void;
}

export declare class ReadCache extends Handle {
  constructor(storage: Storage, options?: { ttlSeconds?: number; clock?: ManualClock });
  storeBoards(clientOrScope: Client | string, boards: unknown): void;
  storeIdeas(clientOrScope: Client | string, query: object | null, ideas: unknown): void;
  boards(clientOrScope: Client | string): Board[] | null;
  ideas(clientOrScope: Client | string, query?: object | null): Idea[] | null;
  clear(clientOrScope: Client | string): void;
  readBoards(client: Client, onData: (source: 'cache' | 'network', boards: Board[]) => void,
    options?: OperationOptions): Promise<void>;
}

export declare class Feedback extends Handle {
  constructor(init?: FeedbackInit);
  static from(value: Feedback | FeedbackInit): Feedback;
  setText(text: string): void;
  setDiagnostics(diagnostics: Record<string, unknown> | null): void;
  addScreenshot(bytes: Uint8Array, contentType: 'image/png' | 'image/jpeg'): void;
}

/** Every failure the library reports; `instanceof AppNorthError` holds for all of them. */
export declare class AppNorthError extends Error {
  constructor(message: string, status?: number, httpStatus?: number, options?: ErrorOptions);
  /** The C status name, e.g. 'APPNORTH_E_NETWORK'. */
  code: string;
  /** The C status number. */
  status: number;
  /** The server's HTTP status, or 0. */
  httpStatus: number;
  /** Set on a failed queue or events flush: its {"sent":...} result. */
  resultJson?: string;
}
interface Branded { code: string; status: number; httpStatus: number }
export declare class InvalidArgumentError extends RangeError implements Branded {
  code: string; status: number; httpStatus: number;
}
export declare class TooLargeError extends RangeError implements Branded {
  code: string; status: number; httpStatus: number;
}
export declare class InvalidUtf8Error extends TypeError implements Branded {
  code: string; status: number; httpStatus: number;
}
export declare class InvalidJsonError extends AppNorthError {}
export declare class NetworkError extends AppNorthError {}
export declare class ValidationError extends AppNorthError {}
export declare class AuthenticationError extends AppNorthError {}
export declare class NotFoundError extends AppNorthError {}
export declare class ConflictError extends AppNorthError {}
export declare class ServerError extends AppNorthError {}
export declare class HttpError extends AppNorthError {}
export declare class StorageError extends AppNorthError {}
export declare class QueueFullError extends AppNorthError {}
export declare class WrongStateError extends AppNorthError {}
export declare class InternalError extends AppNorthError {}
export declare class TimeoutError extends AppNorthError {}
export declare class CancelledError extends AppNorthError {}
