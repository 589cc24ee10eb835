'use strict';
// One process, three envs at once: the main thread and two worker_threads
// load the addon (an instance each: its state is per env, and the env's
// cleanup hook closes its uv_poll handles), each tracks an event and
// uploads it, and the process ends on its own with exit code 0
// (fixtures/threads.js).
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { randomUUID } = require('node:crypto');
const { packageDir, server, admin, tempDir } = require('./support');

test('the addon in the main thread and two workers at once: an event from each, a clean exit', async () => {
  for (let round = 0; round < 3; round++) {
    const run = randomUUID();
    const child = spawnSync(process.execPath,
      [path.join(__dirname, 'fixtures', 'threads.js'), packageDir, server, run, tempDir(), tempDir(), tempDir()],
      { encoding: 'utf8', timeout: 300000 }); // a hang guard (a deadlocked teardown), not a speed bound
    assert.equal(child.signal, null, child.stderr);
    assert.equal(child.status, 0, child.stderr);
    const { sent, codes } = JSON.parse(child.stdout);
    assert.deepEqual(codes, [0, 0]);
    assert.equal(sent.length, 3);
    assert.ok(sent.every((n) => n >= 1), `each thread uploaded its event: ${sent}`);
    const state = await admin('GET', '/admin/apps/demo/state');
    const mine = state.events.filter((e) => e.name === 'thread_event' && e.properties.run === run);
    assert.deepEqual(mine.map((e) => `${e.properties.thread} ${e.properties.isMainThread}`).sort(),
      ['main true', 'w1 false', 'w2 false']);
  }
});
