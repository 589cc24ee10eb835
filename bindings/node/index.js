'use strict';
// appnorth for Node.js and Electron: a Node-API addon over libappnorth's C
// API (include/appnorth.h). Every callback (a completion, a log line, a
// config change) runs on the JS thread that made the client, through the
// library's dispatch mode and a uv_poll on its descriptor. See README.md.
const native = require('./lib/native');
const errors = require('./lib/errors');
const { Client, LogLevel } = require('./lib/client');
const { Config, ConfigTier } = require('./lib/config');
const { Events, NetworkType } = require('./lib/events');
const { Storage, OfflineQueue, ManualClock, ReadCache, Feedback } = require('./lib/offline');

module.exports = {
  Client, Config, Events, Storage, OfflineQueue, ManualClock, ReadCache, Feedback,
  LogLevel, ConfigTier, NetworkType,
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
  /** The name of a status code, e.g. statusString(5) === 'network error'. */
  statusString: (code) => native.statusStr(code),
};
