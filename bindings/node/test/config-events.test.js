'use strict';
// Config 'change' events and log lines run on the main JS thread, from the
// event loop (never inside the call that caused them), in order.
const test = require('node:test');
const assert = require('node:assert/strict');
const { isMainThread } = require('node:worker_threads');
const { appnorth, admin, tempDir, client } = require('./support');

test('changes arrive on the main thread, after the refresh call returned', async () => {
  const lines = [];
  let inRefreshCall = false;
  const c = client({ logger: (level, message) => lines.push({ level, message, isMainThread }), logLevel: 'debug' });
  const config = new appnorth.Config(c, { dataDir: tempDir() });
  try {
    const changes = [];
    config.on('change', (change) => changes.push({ ...change, isMainThread, inRefreshCall }));
    await admin('POST', '/admin/apps/demo/config', { config: { step: 1 } });
    inRefreshCall = true;
    const refreshed = config.refresh();
    inRefreshCall = false;
    await refreshed;
    assert.equal(changes.length, 1);
    assert.deepEqual(changes[0].changedKeys, ['step']);
    assert.equal(changes[0].isMainThread, true);
    assert.equal(changes[0].inRefreshCall, false);
    // A live config does not keep the process alive (an app's server or
    // window does); this timer stands in for it while the test waits.
    const keepAlive = setInterval(() => {}, 1000);
    const live = new Promise((resolve) => config.on('change', (change) => change.config.step === 3 && resolve()));
    config.startLive();
    await admin('POST', '/admin/apps/demo/config', { config: { step: 2 } });
    await admin('POST', '/admin/apps/demo/config', { config: { step: 3 } });
    await live;
    clearInterval(keepAlive);
    const steps = changes.map((change) => change.config.step);
    assert.deepEqual(steps, [...steps].sort(), 'in order');
    assert.ok(changes.every((change) => change.isMainThread));
    assert.ok(lines.length > 0 && lines.every((line) => line.isMainThread));
    assert.ok(lines.some((line) => line.level === 'debug' && /HTTP GET/.test(line.message)));
    config.removeAllListeners('change');
  } finally {
    config.close();
    c.close();
  }
});

test('a config on a ManualClock reads its time from it', async () => {
  const c = client();
  const clock = new appnorth.ManualClock(1_700_000_000_000);
  const config = new appnorth.Config(c, { dataDir: tempDir(), clock });
  try {
    await admin('POST', '/admin/apps/demo/config', { config: { step: 1 } });
    await config.refresh();
    assert.equal(config.source.fetchedMs, 1_700_000_000_000, 'fetched at the manual clock\'s time');
  } finally {
    config.close();
    clock.close();
    c.close();
  }
});

test('a throwing change listener is an uncaught exception, not a crash', () => {
  const { spawnSync } = require('node:child_process');
  const { packageDir, server } = require('./support');
  const script = `const a = require(${JSON.stringify(packageDir)});
    process.on('uncaughtException', (error) => { console.log('uncaught: ' + error.message); process.exit(0); });
    const c = new a.Client({ apiUrl: ${JSON.stringify(server)}, appId: 'demo' });
    const config = new a.Config(c, {});
    config.on('change', () => { throw new Error('listener bug'); });
    fetch(${JSON.stringify(server)} + '/admin/apps/demo/config', { method: 'POST',
      headers: { 'content-type': 'application/json' }, body: '{"config":{"step":"throw"}}' })
      .then(() => config.refresh());
    setTimeout(() => { console.log('no uncaught exception'); process.exit(1); }, 10000);`;
  const child = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8' });
  assert.equal(child.stdout.trim(), 'uncaught: listener bug', child.stderr);
  assert.equal(child.status, 0);
});

test('no logger: nothing is logged unless NODE_DEBUG=appnorth', async () => {
  const { spawnSync } = require('node:child_process');
  const { packageDir, server } = require('./support');
  const script = `const a = require(${JSON.stringify(packageDir)});
    const c = new a.Client({ apiUrl: ${JSON.stringify(server)}, appId: 'demo' });
    c.listBoards().then(() => c.close());`;
  const quiet = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', env: { ...process.env, NODE_DEBUG: '' } });
  assert.equal(quiet.status, 0, quiet.stderr);
  assert.equal(quiet.stderr, '');
  const loud = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', env: { ...process.env, NODE_DEBUG: 'appnorth' } });
  assert.equal(loud.status, 0, loud.stderr);
  assert.match(loud.stderr, /APPNORTH \d+: debug HTTP GET \/v1\/apps\/demo\/boards -> 200/);
});
