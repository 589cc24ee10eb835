'use strict';
// Storage, the offline write queue, the read cache, the manual clock and the
// feedback builder.
const native = require('./native');
const { operation, parse, options, disposable, kNative } = require('./operation');

class Handle {
  #native;
  constructor(handle) { this.#native = handle; }
  get [kNative]() { return this.#native; }
  close() { native.close(this.#native); }
}

class Storage extends Handle {
  /** SQLite storage in a data directory; `name` separates several. */
  static sqlite(dataDir, name) { return new Storage(native.storageSqlite(dataDir, name)); }

  /** Memory only: lost when closed. */
  static memory() { return new Storage(native.storageMemory()); }

  /** Erases what it holds (logout). */
  erase() { native.storageErase(this[kNative]); }
}

function scopeOf(clientOrScope) {
  return typeof clientOrScope === 'string' || clientOrScope == null ? clientOrScope : clientOrScope.scope;
}

class OfflineQueue extends Handle {
  /** @param {Storage} storage @param {{maxEntries?: number}} opts */
  constructor(storage, opts) {
    super(native.queueNew(storage?.[kNative], options(opts).maxEntries ?? 0));
  }

  /** Sends now, or queues on a network failure: resolves true when sent. */
  async submitIdea(client, boardId, title, body, { idempotencyKey, signal } = {}) {
    const result = await operation(() => native.queueSubmitIdea(
      this[kNative], client?.[kNative], boardId, title, body, idempotencyKey), signal);
    return parse(result).submitted;
  }

  async submitComment(client, ideaId, body, { idempotencyKey, signal } = {}) {
    const result = await operation(() => native.queueSubmitComment(
      this[kNative], client?.[kNative], ideaId, body, idempotencyKey), signal);
    return parse(result).submitted;
  }

  async submitFeedback(client, feedback, { idempotencyKey, signal } = {}) {
    const built = Feedback.from(feedback);
    try {
      const result = await operation(() => native.queueSubmitFeedback(
        this[kNative], client?.[kNative], built[kNative], idempotencyKey), signal);
      return parse(result).submitted;
    } finally {
      if (built !== feedback) built.close();
    }
  }

  /** Replays the client's scope's entries: resolves {sent, failedEntryId}. */
  async flush(client, { signal } = {}) {
    const { sent, failed_entry_id: failedEntryId } =
      parse(await operation(() => native.queueFlush(this[kNative], client?.[kNative]), signal));
    return { sent, failedEntryId };
  }

  pendingCount() { return native.queuePendingCount(this[kNative]); }

  entries() { return parse(native.queueEntries(this[kNative])); }

  /** Discards a scope's entries (a client or a scope string), or all with null. */
  discard(clientOrScope = null) { return native.queueDiscard(this[kNative], scopeOf(clientOrScope)); }

  discardEntry(entryId) { return native.queueDiscardEntry(this[kNative], entryId) === 1; }
}

class ManualClock extends Handle {
  constructor(wallMs) { super(native.clockNew(wallMs)); }
  advance(ms) { native.clockAdvance(this[kNative], ms); }
  setWall(wallMs) { native.clockSetWall(this[kNative], wallMs); }
}

class ReadCache extends Handle {
  /** @param {Storage} storage @param {{ttlSeconds?: number, clock?: ManualClock}} opts */
  constructor(storage, opts) {
    const o = options(opts);
    super(native.cacheNew(storage?.[kNative], o.ttlSeconds ?? 0, o.clock?.[kNative] ?? null));
  }

  storeBoards(clientOrScope, boards) {
    native.cacheStore(this[kNative], scopeOf(clientOrScope), null, JSON.stringify(boards), false);
  }

  storeIdeas(clientOrScope, query, ideas) {
    native.cacheStore(this[kNative], scopeOf(clientOrScope), query ? JSON.stringify(query) : null,
      JSON.stringify(ideas), true);
  }

  /** The fresh boards array, or null. */
  boards(clientOrScope) { return parse(native.cacheGet(this[kNative], scopeOf(clientOrScope), null, false)); }

  ideas(clientOrScope, query) {
    return parse(native.cacheGet(this[kNative], scopeOf(clientOrScope), query ? JSON.stringify(query) : null, true));
  }

  clear(clientOrScope) { native.cacheClear(this[kNative], scopeOf(clientOrScope)); }

  /**
   * Cached-then-fresh: onData('cache', boards) at once when the cache holds
   * a fresh copy, then onData('network', boards) once listBoards() answered
   * (and the cache holds it).
   */
  async readBoards(client, onData, { signal } = {}) {
    const cached = this.boards(client);
    if (cached !== null) onData('cache', cached);
    const fresh = await client.listBoards({ signal });
    this.storeBoards(client, fresh);
    onData('network', fresh.boards);
  }
}

class Feedback extends Handle {
  /** @param {{text?: string, diagnostics?: object, screenshots?: {bytes: Uint8Array, contentType: string}[]}} init */
  constructor(init) {
    super(native.feedbackNew());
    const { text, diagnostics, screenshots = [] } = options(init, 'feedback');
    try {
      if (text !== undefined) this.setText(text);
      if (diagnostics !== undefined) this.setDiagnostics(diagnostics);
      for (const { bytes, contentType } of screenshots) this.addScreenshot(bytes, contentType);
    } catch (error) {
      this.close();
      throw error;
    }
  }

  static from(value) { return value instanceof Feedback ? value : new Feedback(value); }

  setText(text) { native.feedbackSetText(this[kNative], text); }

  setDiagnostics(diagnostics) {
    native.feedbackSetDiagnostics(this[kNative], diagnostics == null ? null : JSON.stringify(diagnostics));
  }

  addScreenshot(bytes, contentType) { native.feedbackAddScreenshot(this[kNative], bytes, contentType); }
}

for (const Class of [Storage, OfflineQueue, ManualClock, ReadCache, Feedback]) disposable(Class);

module.exports = { Storage, OfflineQueue, ManualClock, ReadCache, Feedback };
