'use strict';
// Analytics events: track() is synchronous and durable (on disk before it
// returns); uploads run on the library's thread; flush() is a Promise.
const native = require('./native');
const { operation, options, disposable, kNative, kAdopt, withNativeClock } = require('./operation');

const NetworkType = Object.freeze({ UNKNOWN: 0, WIFI: 1, CELLULAR: 2, EXPENSIVE_CELLULAR: 3 });
const consentNames = { '-1': 'unknown', 0: 'revoked', 1: 'granted' };

function objectText(properties) {
  if (typeof properties !== 'object' || properties === null || Array.isArray(properties)) {
    const error = new TypeError('properties must be a plain object');
    error.code = 'ERR_INVALID_ARG_TYPE';
    throw error;
  }
  return JSON.stringify(properties);
}

// The native side calls it with the event's JSON text, inside track():
// true keeps the text as the library made it, null drops the event, a
// string replaces it. A throw drops it too (fails closed).
function beforeSendHook(hook) {
  if (typeof hook !== 'function') return hook;
  return (text) => {
    const event = JSON.parse(text);
    const before = JSON.stringify(event);
    const result = hook(event);
    if (result === null || result === undefined) return null;
    if (typeof result !== 'object' || Array.isArray(result)) {
      throw new TypeError('beforeSend must return an object, or null to drop the event');
    }
    const after = JSON.stringify(result);
    return after === before ? true : after;
  };
}

class Events {
  #native;
  #client;
  #release;

  /**
   * @param {Client} client
   * @param {object} opts dataDir (required), flushIntervalMs, batchThreshold,
   *   maxEvents, maxBytes, maxEventBytes, retryBaseDelayMs, retries,
   *   retryAfterCapMs, breakerThreshold, retryJitterPercent, requireConsent,
   *   sessionIdleTimeoutMs (default 30 min), sessionMaxLengthMs (default
   *   24 h; 0 turns a rotation off), clock (a ManualClock, for tests),
   *   sampleRate (0 to 1, per install), remoteSettings (follow the config
   *   key "appnorth.events" of the client's configs; default true),
   *   beforeSend (event => event | other object | null, called inside
   *   track(): return the event to keep it, another object to replace it,
   *   null to drop it; a throw drops it: stats().dropped.filtered).
   */
  constructor(client, opts) {
    const o = options(opts);
    this.#native = native.eventsNew(client?.[kNative], { ...withNativeClock(o), beforeSend: beforeSendHook(o.beforeSend) });
    this.#client = client;
    this.#release = client[kAdopt](this);
  }

  /** Queues an event; true when stored, false when consent drops it. */
  track(name, properties) {
    const text = properties == null ? null : objectText(properties);
    return native.eventsTrack(this.#native, name, text);
  }

  /**
   * Super properties: saved in the data directory and added to every
   * event's properties by every handle on it, from its next track(); a key
   * already registered gets the new value (registerOnce: keeps it). A
   * property passed to track() wins; reset() clears them.
   */
  register(properties) { native.eventsRegister(this.#native, objectText(properties), false); }

  registerOnce(properties) { native.eventsRegister(this.#native, objectText(properties), true); }

  unregister(key) { native.eventsUnregister(this.#native, key); }

  /** The registered super properties. */
  get superProperties() { return JSON.parse(native.eventsText(this.#native, 3)); }

  /** Uploads now; resolves {sent} or rejects (the error has .resultJson). */
  async flush(timeoutMs = 10000, { signal } = {}) {
    return JSON.parse(await operation(() => native.eventsFlush(this.#native, this.#client[kNative], timeoutMs), signal));
  }

  setNetworkType(type) { native.eventsSetNetworkType(this.#native, type); }

  startSession() { native.eventsSimple(this.#native, 0); }

  foreground() { native.eventsSimple(this.#native, 1); }

  reset() { native.eventsSimple(this.#native, 2); }

  /** Grant (true) or revoke (false); revoking purges the queue (blocks for it). */
  setConsent(granted) { native.eventsSetConsent(this.#native, granted); }

  /** 'unknown', 'revoked' or 'granted'. */
  get consent() { return consentNames[native.eventsConsent(this.#native)]; }

  identify(userId) { native.eventsIdentify(this.#native, userId); }

  setPushToken(token) { native.eventsSetPushToken(this.#native, token ?? null); }

  get anonymousId() { return native.eventsText(this.#native, 0); }

  /** The session id the next event carries, unless that event starts a new
   *  session (after the idle timeout or the maximum length). */
  get sessionId() { return native.eventsText(this.#native, 2); }

  stats() { return JSON.parse(native.eventsText(this.#native, 1)); }

  /** The queued events, oldest first (at most max), as the server would
   *  receive them: for a host's own tests. Imports this handle's journal
   *  first; sends nothing. */
  pending(max = 10000) { return JSON.parse(native.eventsPending(this.#native, max)); }

  /** Stops the upload thread at once (queued events stay on disk). */
  close() {
    native.close(this.#native);
    this.#release();
  }

  /** Uploads for up to timeoutMs (default 2 s; errors ignored), then close(). */
  async closeAsync(timeoutMs = 2000) {
    try {
      await this.flush(timeoutMs);
    } catch {
      // Still queued on disk: the next run uploads them.
    }
    this.close();
  }
}
disposable(Events);

module.exports = { Events, NetworkType };
