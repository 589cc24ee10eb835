'use strict';
// One non-blocking library operation as a Promise, cancelled by an
// AbortSignal through appnorth_op_cancel (the operation then rejects with a
// CancelledError whose `cause` is the signal's reason).
const native = require('./native');
const { CancelledError } = require('./errors');

function checkSignal(signal) {
  if (signal !== undefined && !(signal instanceof AbortSignal)) {
    const error = new TypeError('signal must be an AbortSignal');
    error.code = 'ERR_INVALID_ARG_TYPE';
    throw error;
  }
}

// start(): calls the addon, which returns [promise, op] or throws.
async function operation(start, signal) {
  checkSignal(signal);
  if (signal?.aborted) throw new CancelledError('aborted before it started', 0, { cause: signal.reason });
  const [promise, op] = start();
  if (signal === undefined) return promise;
  const onAbort = () => native.opCancel(op);
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    return await promise;
  } catch (error) {
    if (error instanceof CancelledError && signal.aborted) error.cause = signal.reason;
    throw error;
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}

function parse(text) {
  return text == null ? null : JSON.parse(text);
}

// Options objects: a plain object or undefined, else TypeError.
function options(value, name = 'options') {
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object' || Array.isArray(value)) {
    const error = new TypeError(`${name} must be an object`);
    error.code = 'ERR_INVALID_ARG_TYPE';
    throw error;
  }
  return value;
}

// Options with `clock` (a ManualClock) given as its native handle, as the
// addon takes it; anything else is passed as is, and refused there.
function withNativeClock(o) {
  return o.clock === undefined ? o : { ...o, clock: o.clock?.[module.exports.kNative] ?? o.clock };
}

module.exports = { operation, parse, options, checkSignal, withNativeClock };

// The library handle of an object of this package (client, storage, ...).
module.exports.kNative = Symbol('appnorth.native');
// Client: registers a handle made with it, closed before the client.
module.exports.kAdopt = Symbol('appnorth.adopt');

// `using` and `await using` where Node has them (Symbol.dispose and
// Symbol.asyncDispose): close() and closeAsync() (or close()).
module.exports.disposable = function disposable(Class) {
  if (typeof Symbol.dispose === 'symbol') {
    Class.prototype[Symbol.dispose] = function dispose() { this.close(); };
  }
  if (typeof Symbol.asyncDispose === 'symbol') {
    Class.prototype[Symbol.asyncDispose] = async function asyncDispose() {
      await (this.closeAsync ? this.closeAsync() : this.close());
    };
  }
};
