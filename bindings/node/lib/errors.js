'use strict';
// Errors: every library failure is an AppNorthError with `code` (the C
// status name, e.g. 'APPNORTH_E_NETWORK'), `status` (its number) and
// `httpStatus` (the server's answer, or 0). Bad arguments refused by the
// library are also RangeErrors (invalid, too large) or TypeErrors (bad
// UTF-8): `err instanceof AppNorthError` holds for them too.
const native = require('./native');

const kBrand = Symbol('appnorth.error');
const CODES = [
  'APPNORTH_OK', 'APPNORTH_E_INVALID_ARGUMENT', 'APPNORTH_E_INVALID_JSON', 'APPNORTH_E_INVALID_UTF8',
  'APPNORTH_E_TOO_LARGE', 'APPNORTH_E_NETWORK', 'APPNORTH_E_VALIDATION', 'APPNORTH_E_AUTHENTICATION',
  'APPNORTH_E_NOT_FOUND', 'APPNORTH_E_CONFLICT', 'APPNORTH_E_SERVER', 'APPNORTH_E_HTTP', 'APPNORTH_E_STORAGE',
  'APPNORTH_E_QUEUE_FULL', 'APPNORTH_E_WRONG_STATE', 'APPNORTH_E_INTERNAL', 'APPNORTH_E_TIMEOUT',
  'APPNORTH_E_CANCELLED',
];

function brand(error, name, status, httpStatus) {
  Object.defineProperty(error, kBrand, { value: true });
  error.name = name;
  error.code = CODES[status] || `APPNORTH_STATUS_${status}`;
  error.status = status;
  error.httpStatus = httpStatus;
}

class AppNorthError extends Error {
  constructor(message, status = 15, httpStatus = 0, options = undefined) {
    super(message, options);
    brand(this, new.target.name, status, httpStatus);
  }

  // Any error the library reported, whichever built-in class it extends.
  static [Symbol.hasInstance](value) {
    if (this !== AppNorthError) return Function.prototype[Symbol.hasInstance].call(this, value);
    return value != null && value[kBrand] === true;
  }
}

const classes = { AppNorthError };
function define(name, status, Base = AppNorthError) {
  const named = {
    [name]: class extends Base {
      constructor(message, httpStatus = 0, options = undefined) {
        if (Base === AppNorthError) {
          super(message, status, httpStatus, options);
        } else {
          super(message, options);
          brand(this, name, status, httpStatus);
        }
      }
    },
  };
  classes[name] = named[name];
  return named[name];
}

const byStatus = [
  null,
  define('InvalidArgumentError', 1, RangeError),
  define('InvalidJsonError', 2),
  define('InvalidUtf8Error', 3, TypeError),
  define('TooLargeError', 4, RangeError),
  define('NetworkError', 5),
  define('ValidationError', 6),
  define('AuthenticationError', 7),
  define('NotFoundError', 8),
  define('ConflictError', 9),
  define('ServerError', 10),
  define('HttpError', 11),
  define('StorageError', 12),
  define('QueueFullError', 13),
  define('WrongStateError', 14),
  define('InternalError', 15),
  define('TimeoutError', 16),
  define('CancelledError', 17),
];

// The addon calls this for every failed library call.
function makeError(status, httpStatus, message) {
  const Class = byStatus[status];
  return Class ? new Class(message, httpStatus) : new AppNorthError(message, status, httpStatus);
}
native.setup(makeError);

module.exports = { ...classes, makeError, CODES };
