'use strict';
// Cancel one operation with an AbortSignal (the others go on), a signal
// aborted before the start, client.cancel(), and close() with reads in
// flight: each rejects with a CancelledError, at once, never a hang.
const test = require('node:test');
const assert = require('node:assert/strict');
const { appnorth, admin, client } = require('./support');

const slowBoards = { delay_ms: 1500, path_prefix: '/v1/apps/demo/boards', count: 100 };

test('an AbortSignal cancels one slow read; the other completes', async (t) => {
  await admin('POST', '/admin/faults', slowBoards);
  t.after(() => admin('DELETE', '/admin/faults'));
  const c = client();
  t.after(() => c.close());
  const controller = new AbortController();
  const started = performance.now();
  const cancelled = c.listBoards({ signal: controller.signal });
  const other = c.listIdeas({ q: 'dark' });
  setTimeout(() => controller.abort(new Error('user left the page')), 50);
  await assert.rejects(cancelled, (error) => {
    assert.ok(error instanceof appnorth.CancelledError);
    assert.ok(error instanceof appnorth.AppNorthError);
    assert.equal(error.code, 'APPNORTH_E_CANCELLED');
    assert.equal(error.cause.message, 'user left the page');
    return true;
  });
  assert.ok(performance.now() - started < 1000, 'the cancel ended the read before the server answered');
  assert.equal((await other).ideas[0].title, 'Dark mode');
});

test('a signal aborted before the start rejects without starting', async () => {
  const c = client();
  try {
    await assert.rejects(c.listBoards({ signal: AbortSignal.abort() }), appnorth.CancelledError);
    assert.equal(c.inFlight, 0);
  } finally {
    c.close();
  }
});

test('client.cancel() and close() end every read in flight', async (t) => {
  await admin('POST', '/admin/faults', slowBoards);
  t.after(() => admin('DELETE', '/admin/faults'));
  const c = client();
  const reads = [c.listBoards(), c.listBoards()];
  c.cancel();
  for (const outcome of await Promise.allSettled(reads)) {
    assert.ok(outcome.reason instanceof appnorth.CancelledError);
  }
  const late = c.listBoards();
  assert.equal(c.inFlight, 1);
  c.close(); // settles it before returning
  await assert.rejects(late, appnorth.CancelledError);
  await assert.rejects(c.listBoards(), appnorth.WrongStateError);
});
