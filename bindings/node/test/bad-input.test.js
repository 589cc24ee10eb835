'use strict';
// Bad input is a clear TypeError or RangeError (with Node's error codes),
// or the library's status as an AppNorthError: never a crash.
const test = require('node:test');
const assert = require('node:assert/strict');
const { appnorth, tempDir, client } = require('./support');

test('wrong types are TypeErrors', async () => {
  assert.throws(() => new appnorth.Client({ apiUrl: 5, appId: 'demo' }), { name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE' });
  assert.throws(() => new appnorth.Client('http://x'), { name: 'TypeError' });
  assert.throws(() => new appnorth.Client({ apiUrl: 'http://127.0.0.1:1', appId: 'demo', logger: 'yes' }), TypeError);
  const c = client();
  try {
    await assert.rejects(c.listComments(42), { name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE' });
    await assert.rejects(c.listIdeas('q=dark'), TypeError);
    await assert.rejects(c.listBoards({ signal: 'abort' }), TypeError);
    await assert.rejects(c.submitFeedback({ screenshots: [{ bytes: 'png', contentType: 'image/png' }] }), TypeError);
    const events = new appnorth.Events(c, { dataDir: tempDir() });
    assert.throws(() => events.track('x', 'not an object'), TypeError);
    assert.throws(() => events.track(undefined), TypeError);
    assert.throws(() => events.setConsent('yes'), TypeError);
    assert.throws(() => new appnorth.OfflineQueue({}), { name: 'TypeError', message: /storage must be an appnorth Storage/ });
    assert.throws(() => new appnorth.ReadCache(appnorth.Storage.memory(), { clock: c }), TypeError);
    events.close();
  } finally {
    c.close();
  }
});

test('NUL inside a string is a TypeError', async () => {
  assert.throws(() => new appnorth.Client({ apiUrl: 'http://127.0.0.1:1\0evil', appId: 'demo' }),
    { name: 'TypeError', code: 'ERR_INVALID_ARG_VALUE' });
  const c = client();
  try {
    await assert.rejects(c.listComments('idea\0'), { code: 'ERR_INVALID_ARG_VALUE' });
    const events = new appnorth.Events(c, { dataDir: tempDir() });
    assert.throws(() => events.track('na\0me'), { code: 'ERR_INVALID_ARG_VALUE' });
    events.close();
  } finally {
    c.close();
  }
});

test('oversize and out-of-range values are RangeErrors', async () => {
  assert.throws(() => new appnorth.Client({ apiUrl: 'http://127.0.0.1:1', appId: 'demo', apiTimeoutMs: 0 }),
    { name: 'RangeError', code: 'ERR_OUT_OF_RANGE' });
  assert.throws(() => new appnorth.Client({ apiUrl: 'http://127.0.0.1:1', appId: 'demo', apiTimeoutMs: 1.5 }), RangeError);
  assert.throws(() => new appnorth.Client({ apiUrl: 'ftp://x', appId: 'demo' }), (error) =>
    error instanceof RangeError && error instanceof appnorth.AppNorthError && error.code === 'APPNORTH_E_INVALID_ARGUMENT');
  const c = client();
  try {
    await assert.rejects(c.submitIdea('b_1', 'x'.repeat(201)), (error) =>
      error instanceof RangeError && error.code === 'APPNORTH_E_TOO_LARGE');
    await assert.rejects(c.listIdeas({ limit: 1000 }), RangeError);
    await assert.rejects(c.listComments('x'.repeat(33 * 1024 * 1024)), { name: 'RangeError', code: 'ERR_OUT_OF_RANGE' });
    const events = new appnorth.Events(c, { dataDir: tempDir(), maxEventBytes: 256 });
    assert.throws(() => events.track('big', { text: 'x'.repeat(1000) }), appnorth.TooLargeError);
    assert.throws(() => events.setNetworkType(9), RangeError);
    assert.throws(() => new appnorth.Events(c, { dataDir: tempDir(), batchThreshold: -1 }), RangeError);
    events.close();
    assert.throws(() => new appnorth.ManualClock(2 ** 60), RangeError);
    assert.doesNotThrow(() => new appnorth.ManualClock(2n ** 60n).close());
  } finally {
    c.close();
  }
});

test('a closed handle is a WrongStateError; close() twice is fine', async () => {
  const c = client();
  const events = new appnorth.Events(c, { dataDir: tempDir() });
  c.close();
  c.close();
  assert.throws(() => events.track('after'), appnorth.WrongStateError);
  await assert.rejects(c.listBoards(), (error) => error instanceof appnorth.WrongStateError && error.status === 14);
  assert.throws(() => c.scope, appnorth.WrongStateError);
});
