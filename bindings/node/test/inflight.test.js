'use strict';
// 256 reads in flight on one client, completed on the main thread; the
// poll watcher keeps the loop alive only while some are in flight.
const test = require('node:test');
const assert = require('node:assert/strict');
const { isMainThread } = require('node:worker_threads');
const { client } = require('./support');

test('256 reads in flight', async () => {
  const c = client();
  try {
    let completedInside = 0;
    const reads = Array.from({ length: 256 }, () => c.listBoards().then((r) => {
      if (isMainThread) completedInside += 1;
      return r;
    }));
    assert.equal(c.inFlight, 256);
    const results = await Promise.all(reads);
    assert.equal(results.length, 256);
    assert.ok(results.every((r) => r.boards.length > 0));
    assert.equal(completedInside, 256);
    assert.equal(c.inFlight, 0);
  } finally {
    c.close();
  }
});
