'use strict';
// Remote config: getters read memory, refresh() is a Promise, and 'change'
// events arrive on this thread (the library's dispatch mode).
const { EventEmitter } = require('node:events');
const native = require('./native');
const { operation, options, disposable, kNative, kAdopt, withNativeClock } = require('./operation');

const ConfigTier = Object.freeze({ DEFAULT: 0, BUNDLED: 1, CACHED: 2, REMOTE: 3 });
const tierNames = ['default', 'bundled', 'cached', 'remote'];
const ConfigState = Object.freeze({ INITIALIZING: 0, VALID: 1, INTERRUPTED: 2, OFFLINE: 3, OFF: 4 });
const stateNames = ['initializing', 'valid', 'interrupted', 'offline', 'off'];

/** The native status object with the state's name (a state this package
 *  does not know, from a newer library, stays a number). */
function status(s) {
  return { ...s, state: stateNames[s.state] ?? s.state };
}

class Config extends EventEmitter {
  #native;
  #client;
  #release;
  #listening = false;
  #statusListening = false;

  /**
   * @param {Client} client
   * @param {object} opts dataDir (the cached tier), bundledPath, ttlSeconds,
   *   clock, pollIntervalMs, reconnectBaseMs, reconnectMaxMs, reconnectJitterPercent.
   */
  constructor(client, opts) {
    super();
    this.#native = native.configNew(client?.[kNative], withNativeClock(options(opts)));
    this.#client = client;
    this.#release = client[kAdopt](this);
    // One library listener while anyone listens for 'change', and one
    // status listener while anyone listens for 'status'.
    this.on('newListener', (event) => {
      if (event === 'status' && !this.#statusListening) {
        native.configStatusListen(this.#native, (s) => this.emit('status', status(s)));
        this.#statusListening = true;
      }
      if (event === 'change' && !this.#listening) {
        native.configListen(this.#native, (config, keys, tier) => this.emit('change', {
          config: JSON.parse(config), changedKeys: JSON.parse(keys), tier: tierNames[tier] ?? tier,
        }));
        this.#listening = true;
      }
    });
    this.on('removeListener', (event) => {
      if (event === 'status' && this.#statusListening && this.listenerCount('status') === 0) {
        this.#statusListening = false;
        native.configStatusListen(this.#native, null);
      }
      if (event === 'change' && this.#listening && this.listenerCount('change') === 0) {
        this.#listening = false;
        native.configListen(this.#native, null);
      }
    });
  }

  getString(key, defaultValue = null) { return native.configGet(this.#native, 0, key, defaultValue); }

  /** A number, or a bigint when the integer is beyond Number.MAX_SAFE_INTEGER. */
  getInt(key, defaultValue = 0) {
    const value = native.configGet(this.#native, 1, key, defaultValue);
    return value >= Number.MIN_SAFE_INTEGER && value <= Number.MAX_SAFE_INTEGER ? Number(value) : value;
  }

  getDouble(key, defaultValue = 0) { return native.configGet(this.#native, 2, key, defaultValue); }

  getBool(key, defaultValue = false) { return native.configGet(this.#native, 3, key, defaultValue); }

  /** Any value, parsed; defaultValue when the key is missing. */
  getJson(key, defaultValue = null) {
    const text = native.configGet(this.#native, 4, key, JSON.stringify(defaultValue));
    return text == null ? defaultValue : JSON.parse(text);
  }

  snapshot() { return JSON.parse(native.configSnapshot(this.#native)); }

  /** {tier: 'default'|'bundled'|'cached'|'remote', fetchedMs}. */
  get source() {
    const [tier, fetchedMs] = native.configSource(this.#native);
    return { tier: tierNames[tier] ?? tier, fetchedMs };
  }

  /** Fetches now; a change emits 'change' before the Promise settles. */
  async refresh({ signal } = {}) {
    await operation(() => native.configRefresh(this.#native, this.#client[kNative]), signal);
  }

  /** Live updates (stream, polling fallback) until stopLive() or close();
   *  they do not keep the process alive. */
  startLive() { native.configLive(this.#native, true); }

  stopLive() { native.configLive(this.#native, false); }

  lastFetchStatus() { return native.configLastFetchStatus(this.#native); }

  /** The data source's status: {state: 'initializing'|'valid'|'interrupted'|
   *  'offline'|'off', sinceMs, lastErrorMs, lastError: {status, httpStatus,
   *  message} | null}; the last error is kept after a recovery. */
  get status() { return status(native.configStatus(this.#native)); }

  close() {
    native.close(this.#native);
    this.#release();
  }
}
disposable(Config);

module.exports = { Config, ConfigTier, ConfigState };
