'use strict';
// events.pending(): the queued events after an offline burst, oldest first
// and as the server then receives them; bad arguments; a closed queue.
const test = require('node:test');
const assert = require('node:assert/strict');
const { appnorth, admin, tempDir, client } = require('./support');

test('pending after an offline burst is what the server then receives', async () => {
  const appId = `node-pending-${process.pid}`;
  const c = client({ appId });
  const events = new appnorth.Events(c, { dataDir: tempDir(), flushIntervalMs: 3600000, batchThreshold: 10000 });
  try {
    assert.deepEqual(events.pending(), []);
    await admin('POST', '/admin/faults', { path_prefix: `/v1/apps/${appId}/events`, drop: true, count: 100000 });
    for (let i = 0; i < 15; i++) events.track('burst', { i, price: 9.99 });
    await assert.rejects(events.flush(5000));
    const pending = events.pending();
    assert.deepEqual(pending.map((e) => e.properties.i), [...Array(15).keys()], 'oldest first');
    assert.ok(pending.every((e) => e.name === 'burst' && typeof e.id === 'string'));
    assert.deepEqual(events.pending(2), pending.slice(0, 2));
    await admin('DELETE', '/admin/faults');
    assert.equal((await events.flush(10000)).sent, 15);
    const stored = (await admin('GET', `/admin/apps/${appId}/state`)).events.map((e) => e.id).sort();
    assert.deepEqual(stored, pending.map((e) => e.id).sort(), 'the server received exactly the pending events');
    assert.deepEqual(events.pending(), []);
    assert.throws(() => events.pending(0), RangeError);
    assert.throws(() => events.pending(-1), RangeError);
    assert.throws(() => events.pending(2 ** 31), RangeError);
    assert.throws(() => events.pending('10'), TypeError);
  } finally {
    events.close();
    c.close();
  }
  assert.throws(() => events.pending(), appnorth.WrongStateError);
});
