'use strict';
// Which platform package holds the addon here, and what to tell the user
// when it cannot be loaded. The addon and libappnorth.so.0 ship in one
// package per platform, @appnorth/<platform>-<arch>[-<libc>], named in this
// package's optionalDependencies: npm, pnpm and yarn install only the one
// whose os, cpu and libc match, and nothing runs at install time.
const pkg = require('../package.json');

const scope = '@appnorth/';
/** The Node-API version the addon is compiled for (-DNAPI_VERSION). */
const napiVersion = pkg.binary.napi_versions[0];
/** The platforms with a published package (this package's optionalDependencies). */
const published = Object.keys(pkg.optionalDependencies).map((name) => name.slice(scope.length));
/** The platforms docs/platforms.md plans, without a package yet. */
const planned = ['linux-arm64-gnu', 'linux-x64-musl'];

/** 'gnu' or 'musl' on Linux (from the process report), null elsewhere. */
function libcFamily(report = process.report) {
  if (process.platform !== 'linux') return null;
  if (!report || typeof report.getReport !== 'function') return 'gnu';
  // The network part of a report can take seconds (reverse DNS); skip it.
  const excludeNetwork = report.excludeNetwork;
  report.excludeNetwork = true;
  try {
    return report.getReport().header.glibcVersionRuntime ? 'gnu' : 'musl';
  } finally {
    report.excludeNetwork = excludeNetwork;
  }
}

/** 'linux-x64-gnu', 'linux-x64-musl', 'darwin-arm64', ... */
function target(platform = process.platform, arch = process.arch, libc = libcFamily()) {
  return libc ? `${platform}-${arch}-${libc}` : `${platform}-${arch}`;
}

function packageName(where) {
  return scope + where;
}

function fail(message, cause) {
  const error = new Error(message, cause ? { cause } : undefined);
  error.code = 'ERR_APPNORTH_NO_ADDON';
  return error;
}

const devFix = '- build the addon from source (`make node-package` in the libappnorth repository) and point\n' +
  '  APPNORTH_NODE_ADDON at its appnorth.node';

/** The error for a Node.js whose Node-API is older than the addon's. */
function napiError(have = process.versions.napi) {
  return fail(`appnorth needs Node-API ${napiVersion}, and Node.js ${process.version} has Node-API ${have}.\n` +
    'Possible fix: use Node.js 18.18 or later (in Electron: Electron 28 or later).');
}

/** The error for a platform without a published package. */
function unsupportedError(where) {
  const name = packageName(where);
  const when = planned.includes(where) ? 'planned, not published yet' : 'not planned';
  return fail(`appnorth has no addon for ${where}: the package ${name} does not exist (${when}).\n` +
    `Published: ${published.map(packageName).join(', ')}.\n` +
    'Possible fixes:\n' +
    `- run on ${published.join(' or ')} (Linux x64 with glibc 2.31 or later: Debian 11+, Ubuntu 20.04+,\n` +
    '  RHEL 9+; a node:*-slim image rather than node:*-alpine)');
}

/** The error for a published package that is not installed, or does not load. */
function installError(where, cause) {
  const name = packageName(where);
  const version = pkg.optionalDependencies[name];
  if (cause && cause.code === 'MODULE_NOT_FOUND' && String(cause.message).includes(name)) {
    return fail(`appnorth could not find ${name}, the package that holds its addon for ${where}.\n` +
      'npm installs it as an optional dependency; it is missing after `npm install --omit=optional`,\n' +
      'or with a package-lock.json made on another platform (npm/cli#4828).\n' +
      'Possible fixes:\n' +
      '- npm install --include=optional appnorth\n' +
      `- npm install ${name}@${version}\n` +
      '- remove node_modules and package-lock.json, then npm install\n' + devFix, cause);
  }
  return fail(`appnorth found ${name} but could not load its addon: ${cause && cause.message}\n` +
    'It needs glibc 2.31 or later and the system\'s libcurl 4, libjansson 4 and libsqlite3\n' +
    '(Debian and Ubuntu: apt-get install libcurl4 libjansson4 libsqlite3-0).', cause);
}

module.exports = { napiVersion, published, planned, libcFamily, target, packageName, napiError, unsupportedError, installError };
