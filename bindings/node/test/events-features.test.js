'use strict';
// The events features of issue 40, at the dev server: automatic sessions
// on a ManualClock.
const test = require('node:test');
const assert = require('node:assert/strict');
const { appnorth, admin, tempDir, client } = require('./support');

const quiet = { flushIntervalMs: 600000, batchThreshold: 1000, retryBaseDelayMs: 10 };

function freshApp(tag) {
  return `node-${tag}-${process.pid}-${Math.random().toString(16).slice(2, 8)}`;
}

async function storedEvents(app) {
  return (await admin('GET', `/admin/apps/${app}/state`)).events;
}

test('a session rotates after the idle timeout and after the max length', async () => {
  const app = freshApp('sessions');
  const c = client({ appId: app });
  const clock = new appnorth.ManualClock(1700000000000);
  const events = new appnorth.Events(c, { dataDir: tempDir(), ...quiet, clock,
    sessionIdleTimeoutMs: 1000, sessionMaxLengthMs: 5000 });
  try {
    const first = events.sessionId;
    assert.match(first, /^[0-9a-f]{32}$/);
    events.track('a');
    clock.advance(999);
    events.track('b');
    clock.advance(1000);
    events.track('after_idle');
    const second = events.sessionId;
    assert.notEqual(second, first);
    for (let i = 0; i < 6; i++) {
      clock.advance(900);
      events.track('busy');
    }
    const third = events.sessionId;
    assert.notEqual(third, second);
    await events.flush(10000);
    const sessions = (await storedEvents(app)).map((e) => [e.name, e.session_id]);
    assert.deepEqual(sessions, [['a', first], ['b', first], ['after_idle', second],
      ['busy', second], ['busy', second], ['busy', second], ['busy', second], ['busy', second], ['busy', third]]);
  } finally {
    events.close();
    clock.close();
    c.close();
  }
});

test('bad session policies are refused', () => {
  const c = client();
  try {
    for (const bad of [{ sessionIdleTimeoutMs: -1 }, { sessionMaxLengthMs: 2 ** 31 }, { sessionIdleTimeoutMs: 'x' }]) {
      assert.throws(() => new appnorth.Events(c, { dataDir: tempDir(), ...bad }), /session/);
    }
    assert.throws(() => new appnorth.Events(c, { dataDir: tempDir(), clock: {} }), /clock/);
  } finally {
    c.close();
  }
});

test('super properties reach a second handle and survive a restart; track() wins; reset clears', async () => {
  const app = freshApp('supers');
  const c = client({ appId: app });
  const dir = tempDir();
  const a = new appnorth.Events(c, { dataDir: dir, ...quiet });
  const b = new appnorth.Events(c, { dataDir: dir, ...quiet });
  try {
    a.register({ plan: 'pro', n: 1 });
    assert.deepEqual(b.superProperties, { plan: 'pro', n: 1 });
    b.track('from_b', { screen: 'home' });
    a.track('override', { plan: 'free' });
    b.registerOnce({ plan: 'team', first: true });
    b.unregister('n');
    await a.flush(10000);
    await b.flush(10000);
  } finally {
    a.close();
    b.close();
  }
  const again = new appnorth.Events(c, { dataDir: dir, ...quiet });
  try {
    assert.deepEqual(again.superProperties, { plan: 'pro', first: true });
    again.track('restarted', { k: 1 });
    again.reset();
    again.track('after_reset', { k: 2 });
    await again.flush(10000);
    const got = Object.fromEntries((await storedEvents(app)).map((e) => [e.name, e.properties_raw]));
    assert.equal(got.from_b, '{"plan":"pro","n":1,"screen":"home"}');
    assert.equal(got.override, '{"n":1,"plan":"free"}');
    assert.equal(got.restarted, '{"plan":"pro","first":true,"k":1}');
    assert.equal(got.after_reset, '{"k":2}');
    assert.throws(() => again.register({ session_id: 'x' }), /reserved/);
    assert.throws(() => again.register([1]), TypeError);
    assert.throws(() => again.register({ big: 'x'.repeat(40000) }), /limit/);
    assert.deepEqual(again.superProperties, {});
  } finally {
    again.close();
    c.close();
  }
});

test('beforeSend drops, rewrites and fails closed when it throws', async () => {
  const app = freshApp('hook');
  const c = client({ appId: app });
  const seen = [];
  const events = new appnorth.Events(c, { dataDir: tempDir(), ...quiet, beforeSend: (event) => {
    seen.push(event);
    if (event.name === 'secret') return null;
    if (event.name === 'boom') throw new Error('filter bug');
    if (event.name === 'scrub') {
      delete event.properties.email;
      return event;
    }
    return event;
  } });
  try {
    assert.equal(events.track('kept', { a: 1 }), true);
    assert.equal(events.track('secret', { a: 2 }), false);
    assert.equal(events.track('scrub', { email: 'a@b.c', ok: 1 }), true);
    assert.equal(events.track('boom', { a: 3 }), false);
    await events.flush(10000);
    assert.equal(events.stats().dropped.filtered, 2);
    assert.equal(seen.length, 4);
    assert.match(seen[0].session_id, /^[0-9a-f]{32}$/);
    const got = Object.fromEntries((await storedEvents(app)).map((e) => [e.name, e.properties_raw]));
    assert.deepEqual(Object.keys(got).sort(), ['kept', 'scrub']);
    assert.equal(got.scrub, '{"ok":1}');
    assert.throws(() => new appnorth.Events(c, { dataDir: tempDir(), beforeSend: 42 }), TypeError);
  } finally {
    events.close();
    c.close();
  }
});
