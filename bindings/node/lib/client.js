'use strict';
// The client: reads and writes as Promises, completed on this thread.
const util = require('node:util');
const native = require('./native');
const { operation, parse, options, disposable, kNative, kAdopt } = require('./operation');

const LogLevel = Object.freeze({ DEBUG: 0, INFO: 1, WARNING: 2, ERROR: 3 });
const levelNames = ['debug', 'info', 'warning', 'error'];

// Log lines: to options.logger(level, message), else (NODE_DEBUG=appnorth)
// to util.debuglog's stderr output; else off, and then the library formats
// nothing at all.
function chooseLogger(logger) {
  if (logger !== undefined && logger !== null) {
    if (typeof logger !== 'function') {
      const error = new TypeError('logger must be a function (level, message)');
      error.code = 'ERR_INVALID_ARG_TYPE';
      throw error;
    }
    return (level, message) => logger(levelNames[level] ?? String(level), message);
  }
  const debug = util.debuglog('appnorth');
  return debug.enabled ? (level, message) => debug('%s %s', levelNames[level], message) : null;
}

function levelNumber(level, fallback) {
  if (level === undefined) return fallback;
  const index = typeof level === 'string' ? levelNames.indexOf(level) : level;
  if (index === -1) throw new RangeError(`logLevel must be one of ${levelNames.join(', ')}`);
  return index;
}

class Client {
  #native;
  #children = new Set();

  /**
   * @param {object} opts apiUrl, appId (required); email and token (a
   *   signed-in user); apiTimeoutMs, resourceTimeoutMs; logger(level,
   *   message) and logLevel; caFile, caPem, pinnedPublicKeys, proxy,
   *   compression, allowCleartextHosts.
   */
  constructor(opts) {
    const o = options(opts);
    const logger = chooseLogger(o.logger);
    // NODE_DEBUG=appnorth shows every line, DEBUG included; an app's logger
    // gets INFO and above unless it asks for more.
    const defaultLevel = o.logger ? LogLevel.INFO : LogLevel.DEBUG;
    this.#native = native.clientNew({ ...o, logger, logLevel: levelNumber(o.logLevel, defaultLevel) });
  }

  get [kNative]() { return this.#native; }

  [kAdopt](child) {
    this.#children.add(child);
    return () => this.#children.delete(child);
  }

  /** The account scope: "<api url>|<app id>|<email or anonymous>". */
  get scope() { return native.clientScope(this.#native); }

  /** Operations started and not yet settled (they keep the process alive). */
  get inFlight() { return native.clientInFlight(this.#native); }

  setLogLevel(level) { native.clientSetLogLevel(this.#native, levelNumber(level)); }

  /** Cancels every request in flight on this client (each rejects with CancelledError). */
  cancel() { native.clientCancel(this.#native); }

  async listBoards({ signal } = {}) {
    return parse(await operation(() => native.listBoards(this.#native), signal));
  }

  /** query: board, q, status, cursor, limit; plus signal. */
  async listIdeas(query) {
    const { signal, ...filters } = options(query, 'query');
    const text = Object.keys(filters).length ? JSON.stringify(filters) : null;
    return parse(await operation(() => native.listIdeas(this.#native, text), signal));
  }

  async listComments(ideaId, { signal } = {}) {
    return parse(await operation(() => native.listComments(this.#native, ideaId), signal));
  }

  async listChatMessages({ signal } = {}) {
    return parse(await operation(() => native.listChatMessages(this.#native), signal));
  }

  async submitIdea(boardId, title, body, { idempotencyKey, signal } = {}) {
    return parse(await operation(() => native.submitIdea(this.#native, boardId, title, body, idempotencyKey), signal));
  }

  async submitComment(ideaId, body, { idempotencyKey, signal } = {}) {
    return parse(await operation(() => native.submitComment(this.#native, ideaId, body, idempotencyKey), signal));
  }

  /** feedback: a Feedback, or {text, diagnostics, screenshots}. */
  async submitFeedback(feedback, { idempotencyKey, signal } = {}) {
    const { Feedback } = require('./offline');
    const built = Feedback.from(feedback);
    try {
      return parse(await operation(
        () => native.submitFeedback(this.#native, built[kNative], idempotencyKey), signal));
    } finally {
      if (built !== feedback) built.close();
    }
  }

  async vote(ideaId, { idempotencyKey, signal } = {}) {
    return parse(await operation(() => native.vote(this.#native, ideaId, idempotencyKey), signal));
  }

  async sendChatMessage(body, { idempotencyKey, signal } = {}) {
    return parse(await operation(() => native.sendChatMessage(this.#native, body, idempotencyKey), signal));
  }

  /**
   * Closes the handles made with this client (events, configs), then the
   * client: operations still in flight reject with CancelledError before
   * close() returns. Closing twice does nothing.
   */
  close() {
    for (const child of [...this.#children]) child.close();
    native.close(this.#native);
  }

  /** Lets each child finish (an Events queue uploads for up to 2 s), then close(). */
  async closeAsync() {
    for (const child of [...this.#children]) await (child.closeAsync ? child.closeAsync() : child.close());
    this.close();
  }
}
disposable(Client);

module.exports = { Client, LogLevel };
