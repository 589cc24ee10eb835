'use strict';
// Remote config: getters read memory, refresh() is a Promise, and 'change'
// events arrive on this thread (the library's dispatch mode).
const { EventEmitter } = require('node:events');
const native = require('./native');
const { operation, options, disposable, kNative, kAdopt } = require('./operation');

const ConfigTier = Object.freeze({ DEFAULT: 0, BUNDLED: 1, CACHED: 2, REMOTE: 3 });
const tierNames = ['default', 'bundled', 'cached', 'remote'];

class Config extends EventEmitter {
  #native;
  #client;
  #release;
  #listening = false;

  /**
   * @param {Client} client
   * @param {object} opts dataDir (the cached tier), bundledPath, ttlSeconds,
   *   clock, pollIntervalMs, reconnectBaseMs, reconnectMaxMs, reconnectJitterPercent.
   */
  constructor(client, opts) {
    super();
    this.#native = native.configNew(client?.[kNative], options(opts));
    this.#client = client;
    this.#release = client[kAdopt](this);
    // One library listener while anyone listens for 'change'.
    this.on('newListener', (event) => {
      if (event === 'change' && !this.#listening) {
        native.configListen(this.#native, (config, keys, tier) => this.emit('change', {
          config: JSON.parse(config), changedKeys: JSON.parse(keys), tier: tierNames[tier] ?? tier,
        }));
        this.#listening = true;
      }
    });
    this.on('removeListener', (event) => {
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

  close() {
    native.close(this.#native);
    this.#release();
  }
}
disposable(Config);

module.exports = { Config, ConfigTier };
