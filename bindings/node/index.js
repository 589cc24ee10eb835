'use strict';
// appnorth for Node.js and Electron: a Node-API addon over libappnorth's C
// API (include/appnorth.h). Every callback (a completion, a log line, a
// config change) runs on the JS thread that made the client, through the
// library's dispatch mode and a uv_poll on its descriptor. See README.md.
const native = require('./lib/native');
const errors = require('./lib/errors');
const { Client, LogLevel } = require('./lib/client');
const { Config, ConfigTier, ConfigState } = require('./lib/config');
const { Events, NetworkType } = require('./lib/events');
const { Storage, OfflineQueue, ManualClock, ReadCache, Feedback } = require('./lib/offline');

/**
 * Stops the library for good (appnorth_shutdown): every handle's threads
 * end, no callback runs again, every later call throws WrongStateError.
 * Process-wide: called from the main thread's process.on('exit') below.
 */
function shutdown(timeoutMs = 2000) {
  native.shutdown(timeoutMs);
}

// The main thread's exit: stop every library thread before Node tears the
// process down. Not in a worker: shutdown is for the whole process (a
// worker's own handles are freed when its env goes).
if (require('node:worker_threads').isMainThread) {
  process.once('exit', () => {
    try {
      shutdown();
    } catch {
      // A callback still running at exit: nothing more can start anyway.
    }
  });
}

module.exports = {
  Client, Config, Events, Storage, OfflineQueue, ManualClock, ReadCache, Feedback,
  LogLevel, ConfigTier, ConfigState, NetworkType,
  AppNorthError: errors.AppNorthError,
  InvalidArgumentError: errors.InvalidArgumentError,
  InvalidJsonError: errors.InvalidJsonError,
  InvalidUtf8Error: errors.InvalidUtf8Error,
  TooLargeError: errors.TooLargeError,
  NetworkError: errors.NetworkError,
  ValidationError: errors.ValidationError,
  AuthenticationError: errors.AuthenticationError,
  NotFoundError: errors.NotFoundError,
  ConflictError: errors.ConflictError,
  ServerError: errors.ServerError,
  HttpError: errors.HttpError,
  StorageError: errors.StorageError,
  QueueFullError: errors.QueueFullError,
  WrongStateError: errors.WrongStateError,
  InternalError: errors.InternalError,
  TimeoutError: errors.TimeoutError,
  CancelledError: errors.CancelledError,
  /** The library's version, "MAJOR.MINOR.PATCH". */
  version: native.version(),
  versionNumber: native.versionNumber,
  shutdown,
  /** The name of a status code, e.g. statusString(5) === 'network error'. */
  statusString: (code) => native.statusStr(code),
};
