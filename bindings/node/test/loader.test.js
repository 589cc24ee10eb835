'use strict';
// The loader (lib/native.js, lib/platform.js): the addon comes from this
// machine's platform package; a platform without one, a platform package
// left out of the install and a too old Node-API each fail at require()
// with one error that names the package and the fix. The platform is faked
// in a child process before require(), as a musl or arm64 machine would
// report it.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { packageDir, tempDir } = require('./support');

// require(pkg) in a child after `before`; prints the addon file or the error.
function load(pkg, before = '') {
  const script = `${before}
    try {
      require(${JSON.stringify(pkg)});
      console.log(JSON.stringify({ addon: Object.keys(require.cache).find((f) => f.endsWith('.node')) }));
    } catch (error) {
      console.log(JSON.stringify({ code: error.code, message: error.message, cause: error.cause?.code }));
    }`;
  const env = { ...process.env };
  delete env.APPNORTH_NODE_ADDON;
  delete env.NODE_PATH;
  const child = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', env });
  assert.equal(child.status, 0, child.stderr);
  return JSON.parse(child.stdout);
}

test('on this machine (Linux x64, glibc) the addon comes from @appnorth/linux-x64-gnu', () => {
  const { addon } = load(packageDir);
  assert.match(addon, /[/\\]@appnorth[/\\]linux-x64-gnu[/\\]appnorth\.node$/);
  assert.ok(fs.existsSync(path.join(path.dirname(addon), 'libappnorth.so.0')));
});

test('musl: the error names @appnorth/linux-x64-musl, planned, and the fix', () => {
  const r = load(packageDir, 'process.report.getReport = () => ({ header: {} });');
  assert.equal(r.code, 'ERR_APPNORTH_NO_ADDON');
  assert.match(r.message, /no addon for linux-x64-musl: the package @appnorth\/linux-x64-musl does not exist \(planned/);
  assert.match(r.message, /Published: @appnorth\/linux-x64-gnu\./);
  assert.match(r.message, /node:\*-slim image rather than node:\*-alpine/);
});

test('arm64: the error names @appnorth/linux-arm64-gnu', () => {
  const r = load(packageDir, "Object.defineProperty(process, 'arch', { value: 'arm64' });");
  assert.equal(r.code, 'ERR_APPNORTH_NO_ADDON');
  assert.match(r.message, /no addon for linux-arm64-gnu: the package @appnorth\/linux-arm64-gnu does not exist \(planned/);
});

test('an unplanned platform says so', () => {
  const r = load(packageDir, "Object.defineProperty(process, 'platform', { value: 'freebsd' });");
  assert.match(r.message, /no addon for freebsd-x64: the package @appnorth\/freebsd-x64 does not exist \(not planned\)/);
});

test('the platform package left out of the install: the error names it and how to install it', () => {
  // appnorth alone in a node_modules, as after --omit=optional or a lockfile
  // made on another platform.
  const app = tempDir();
  const alone = path.join(app, 'node_modules', 'appnorth');
  fs.cpSync(packageDir, alone, { recursive: true });
  const { version } = require(path.join(alone, 'package.json'));
  const r = load(alone + path.sep);
  assert.equal(r.code, 'ERR_APPNORTH_NO_ADDON');
  assert.equal(r.cause, 'MODULE_NOT_FOUND');
  assert.match(r.message, /could not find @appnorth\/linux-x64-gnu, the package that holds its addon for linux-x64-gnu/);
  assert.match(r.message, /npm\/cli#4828/);
  assert.ok(r.message.includes(`npm install @appnorth/linux-x64-gnu@${version}`), r.message);
  assert.match(r.message, /npm install --include=optional appnorth/);
  assert.match(r.message, /APPNORTH_NODE_ADDON at its appnorth\.node/);
});

test('a Node-API older than the addon needs: the error says which', () => {
  const r = load(packageDir, "Object.defineProperty(process, 'versions', { value: { ...process.versions, napi: '7' } });");
  assert.equal(r.code, 'ERR_APPNORTH_NO_ADDON');
  assert.match(r.message, /appnorth needs Node-API 8, and Node\.js v[\d.]+ has Node-API 7/);
});

test('a platform package whose addon does not load: the loader says why and what it needs', () => {
  // Both packages as installed, less libappnorth.so.0 (as a missing system library would fail).
  const modules = path.join(tempDir(), 'node_modules');
  const platformDir = path.dirname(require.resolve('@appnorth/linux-x64-gnu/package.json', { paths: [packageDir] }));
  fs.cpSync(packageDir, path.join(modules, 'appnorth'), { recursive: true });
  fs.cpSync(platformDir, path.join(modules, '@appnorth', 'linux-x64-gnu'), { recursive: true });
  fs.rmSync(path.join(modules, '@appnorth', 'linux-x64-gnu', 'libappnorth.so.0'));
  const r = load(path.join(modules, 'appnorth') + path.sep);
  assert.equal(r.code, 'ERR_APPNORTH_NO_ADDON');
  assert.equal(r.cause, 'ERR_DLOPEN_FAILED');
  assert.match(r.message, /found @appnorth\/linux-x64-gnu but could not load its addon: libappnorth\.so\.0: cannot open shared object file/);
  assert.match(r.message, /glibc 2\.31 or later and the system's libcurl 4/);
});
