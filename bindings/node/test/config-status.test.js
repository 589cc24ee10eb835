'use strict';
// The config's data-source status: config.status and 'status' events on the
// main JS thread (the library's dispatch mode) through an outage (the server
// drops every config connection) and a recovery.
const test = require('node:test');
const assert = require('node:assert/strict');
const { isMainThread } = require('node:worker_threads');
const { appnorth, admin, tempDir, client } = require('./support');

test('status events through an outage and a recovery, on the main thread', async () => {
  const appId = `node-status-${process.pid}`;
  await admin('POST', `/admin/apps/${appId}/config`, { config: { level: 1 } });
  const c = client({ appId });
  const config = new appnorth.Config(c, { dataDir: tempDir(), pollIntervalMs: 100, reconnectBaseMs: 20, reconnectMaxMs: 200 });
  // A live config does not keep the process alive; this timer stands in for an app.
  const keepAlive = setInterval(() => {}, 1000);
  try {
    assert.equal(config.status.state, 'initializing');
    assert.equal(config.status.lastError, null);
    const seen = [];
    const reach = (state) => new Promise((resolve) => {
      if (seen.length > 0 && seen.at(-1).state === state) return resolve();
      const check = (s) => { if (s.state === state) { config.off('status', check); resolve(); } };
      config.on('status', check);
    });
    config.on('status', (s) => seen.push({ ...s, isMainThread }));

    await admin('POST', '/admin/faults', { path_prefix: `/v1/apps/${appId}/config`, drop: true, count: 100000 });
    const offline = reach('offline');
    config.startLive();
    await offline;
    const outage = seen.find((s) => s.state === 'offline');
    assert.equal(outage.lastError.status, 5, 'APPNORTH_E_NETWORK');
    assert.equal(outage.lastError.httpStatus, 0);
    assert.ok(outage.lastError.message.length > 0 && outage.sinceMs > 0 && outage.lastErrorMs >= outage.sinceMs);

    const valid = reach('valid');
    await admin('DELETE', '/admin/faults');
    await valid;
    assert.equal(seen.at(-1).lastError.httpStatus, 0, 'the last error outlives the recovery');
    assert.equal(config.status.state, 'valid');
    assert.equal(config.status.sinceMs, seen.at(-1).sinceMs);

    const off = reach('off');
    config.stopLive();
    await off;
    assert.ok(seen.every((s) => s.isMainThread));
    assert.deepEqual([...new Set(seen.map((s) => s.state))].sort(), ['off', 'offline', 'valid']);
    config.removeAllListeners('status');
  } finally {
    clearInterval(keepAlive);
    config.close();
    c.close();
  }
});

test('a refused credential is kept as the last error; ConfigState; a closed config refuses', async () => {
  const appId = `node-status-401-${process.pid}`;
  await admin('POST', `/admin/apps/${appId}/config`, { config: { level: 1 } });
  const c = client({ appId });
  const config = new appnorth.Config(c, { dataDir: tempDir() });
  try {
    await admin('POST', '/admin/faults', { path_prefix: `/v1/apps/${appId}/config`, status: 401, count: 1 });
    await assert.rejects(config.refresh(), appnorth.AuthenticationError);
    assert.equal(config.status.state, 'interrupted');
    assert.equal(config.status.lastError.httpStatus, 401);
    assert.match(config.status.lastError.message, /^HTTP 401/);
    await config.refresh();
    assert.equal(config.status.state, 'valid');
    assert.equal(config.status.lastError.httpStatus, 401);
    assert.deepEqual(appnorth.ConfigState, { INITIALIZING: 0, VALID: 1, INTERRUPTED: 2, OFFLINE: 3, OFF: 4 });
  } finally {
    config.close();
    c.close();
  }
  assert.throws(() => config.status, appnorth.WrongStateError);
});
