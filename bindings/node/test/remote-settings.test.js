'use strict';
// Remote control of the event pipeline through the library's own config
// (#40 item 6), at the dev server: the config key "appnorth.events" reaches
// an Events made with the same client, live and after a restart offline
// (the cached tier); sampleRate 0 and 1; blocked events; values out of
// range refused with the last good kept; the opt-out; bad options. Each
// test has an App ID of its own.
const test = require('node:test');
const assert = require('node:assert/strict');
const { appnorth, admin, tempDir, client } = require('./support');

let apps = 0;
function newApp() {
  apps += 1;
  return `node-remote-${process.pid}-${apps}`;
}

const quiet = { flushIntervalMs: 3600000, batchThreshold: 10000, retryBaseDelayMs: 10 };
const publish = (app, config) => admin('POST', `/admin/apps/${app}/config`, { config });
const stored = async (app) => (await admin('GET', `/admin/apps/${app}/state`)).events.map((e) => e.name);

test('a remote off switch arrives live, then holds after a restart offline', async () => {
  const app = newApp();
  const dataDir = tempDir();
  await publish(app, { theme: 'dark' });
  let c = client({ appId: app });
  let config = new appnorth.Config(c, { dataDir, reconnectBaseMs: 20, reconnectMaxMs: 200 });
  let events = new appnorth.Events(c, { dataDir, ...quiet });
  const keepAlive = setInterval(() => {}, 1000);
  try {
    const changes = [];
    let wake = () => {};
    config.on('change', (change) => { changes.push(change); wake(); });
    const waitChanges = (n) => new Promise((resolve) => {
      wake = () => changes.length >= n && resolve();
      wake();
    });
    config.startLive();
    await waitChanges(1);
    assert.equal(events.track('before'), true);
    await publish(app, { theme: 'dark', 'appnorth.events': { enabled: false } });
    await waitChanges(2);
    assert.equal(events.track('during'), false, 'switched off before the change event');
    assert.equal(events.stats().dropped.disabled, 1);
    await assert.rejects(events.flush(5000), /switched off/);
    assert.equal(events.stats().queued, 1, 'the event queued before stays queued');
    assert.equal(events.stats().settings.enabled, false);
    events.close();
    config.close();
    c.close();

    // Restart offline: the cached tier keeps it off.
    await admin('POST', '/admin/faults', { drop: true, count: 1000 });
    c = client({ appId: app });
    config = new appnorth.Config(c, { dataDir });
    assert.equal(config.source.tier, 'cached');
    events = new appnorth.Events(c, { dataDir, ...quiet });
    assert.equal(events.track('offline'), false);
    assert.equal(events.stats().dropped.disabled, 1);
    await admin('DELETE', '/admin/faults');
    assert.deepEqual(await stored(app), [], 'nothing was uploaded while off');

    // On again: the queued event goes with the new one.
    await publish(app, { 'appnorth.events': { enabled: true } });
    await config.refresh();
    assert.equal(events.track('after'), true);
    await events.flush(5000);
    assert.deepEqual((await stored(app)).sort(), ['after', 'before']);
  } finally {
    clearInterval(keepAlive);
    await admin('DELETE', '/admin/faults');
    events.close();
    config.close();
    c.close();
  }
});

test('sampleRate 0 and 1 exactly, as an option and from the key', async () => {
  const app = newApp();
  const dataDir = tempDir();
  const c = client({ appId: app });
  try {
    const none = new appnorth.Events(c, { dataDir, sampleRate: 0, ...quiet });
    assert.deepEqual([1, 2, 3].map(() => none.track('zero')), [false, false, false]);
    assert.equal(none.stats().dropped.sampled, 3);
    none.close();
    const all = new appnorth.Events(c, { dataDir, sampleRate: 1, ...quiet });
    assert.deepEqual([1, 2, 3].map(() => all.track('one')), [true, true, true]);
    await publish(app, { 'appnorth.events': { sample_rate: 0 } });
    const config = new appnorth.Config(c, { dataDir });
    await config.refresh();
    assert.equal(all.track('zero'), false);
    assert.equal(all.stats().settings.sampled_in, false);
    await publish(app, { 'appnorth.events': { sample_rate: 1 } });
    await config.refresh();
    assert.equal(all.track('one'), true);
    await all.flush(5000);
    assert.deepEqual(await stored(app), ['one', 'one', 'one', 'one']);
    all.close();
    config.close();
  } finally {
    c.close();
  }
});

test('blocked events are dropped; values out of range keep the last good', async () => {
  const app = newApp();
  const dataDir = tempDir();
  const lines = [];
  const c = client({ appId: app, logger: (level, message) => lines.push({ level, message }) });
  try {
    await publish(app, { 'appnorth.events': { blocked_events: ['spam'], batch_threshold: 5 } });
    const config = new appnorth.Config(c, { dataDir });
    await config.refresh();
    const events = new appnorth.Events(c, { dataDir, ...quiet });
    assert.equal(events.track('spam'), false);
    assert.equal(events.track('signal'), true);
    assert.equal(events.stats().dropped.blocked, 1);
    await publish(app, { 'appnorth.events': { blocked_events: [''], batch_threshold: 10001, sample_rate: 'all' } });
    await config.refresh();
    const settings = events.stats().settings;
    assert.deepEqual(settings.blocked_events, ['spam']);
    assert.equal(settings.batch_threshold, 5);
    assert.equal(settings.sample_rate, 1);
    assert.equal(events.track('spam'), false, 'still blocked');
    // Log lines reach JS from the event loop: wait for the warning (5 s at most).
    const refused = () => lines.filter((line) => /appnorth\.events refused/.test(line.message));
    for (let i = 0; i < 250 && refused().length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 20));
    const refusals = refused();
    assert.equal(refusals.length, 1, JSON.stringify(lines));
    assert.equal(refusals[0].level, 'warning');
    events.close();
    config.close();
  } finally {
    c.close();
  }
});

test('a host that opts out ignores the key; bad options are refused', async () => {
  const app = newApp();
  const dataDir = tempDir();
  const c = client({ appId: app });
  try {
    await publish(app, { 'appnorth.events': { enabled: false } });
    const config = new appnorth.Config(c, { dataDir });
    await config.refresh();
    const events = new appnorth.Events(c, { dataDir, remoteSettings: false, ...quiet });
    assert.equal(events.track('kept'), true);
    assert.equal(events.stats().settings.remote, false);
    events.close();
    config.close();
    for (const sampleRate of [-0.1, 1.5, NaN]) {
      assert.throws(() => new appnorth.Events(c, { dataDir, sampleRate }), /sample rate/);
    }
    assert.throws(() => new appnorth.Events(c, { dataDir, sampleRate: '1' }), TypeError);
    assert.throws(() => new appnorth.Events(c, { dataDir, remoteSettings: 1 }), TypeError);
  } finally {
    c.close();
  }
});
