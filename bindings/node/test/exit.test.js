'use strict';
// Leaving with handles open: process.exit() with reads in flight, a live
// config and a busy events queue; a natural exit once nothing is in flight
// (an idle client does not keep the loop alive); a worker_threads worker
// that loads the addon, reads and ends with its handles open, or is
// terminated mid-read. Each must end with its exit code, never a signal.
const test = require('node:test');
const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');
const { Worker } = require('node:worker_threads');
const { packageDir, server, tempDir, client } = require('./support');

function run(body, timeoutMs = 20000) {
  const script = `const a = require(${JSON.stringify(packageDir)});
    const server = ${JSON.stringify(server)}, dir = ${JSON.stringify(tempDir())};
    ${body}`;
  const child = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: timeoutMs });
  return child;
}

const openEverything = `
  const c = new a.Client({ apiUrl: server, appId: 'demo', logger: () => {} });
  const events = new a.Events(c, { dataDir: dir + '/events', flushIntervalMs: 10, batchThreshold: 1 });
  for (let i = 0; i < 200; i++) events.track('exit_test', { i });
  const config = new a.Config(c, { dataDir: dir + '/config' });
  config.on('change', () => {});
  config.startLive();`;

test('process.exit() with reads in flight and every kind of handle open', () => {
  for (let run_ = 0; run_ < 5; run_++) {
    const child = run(`${openEverything}
      for (let i = 0; i < 64; i++) c.listBoards().catch(() => {});
      c.listBoards().then(() => process.exit(7));`);
    assert.equal(child.signal, null, child.stderr);
    assert.equal(child.status, 7, child.stderr);
  }
});

test('an idle client, a live config and an events queue let the process end on its own', () => {
  const started = Date.now();
  const child = run(`${openEverything}
    c.listBoards().then((r) => console.log('read', r.boards.length > 0));`);
  assert.equal(child.signal, null, child.stderr);
  assert.equal(child.status, 0, child.stderr);
  assert.equal(child.stdout.trim(), 'read true');
  assert.ok(Date.now() - started < 15000);
});

function worker(body) {
  return new Worker(`const a = require(${JSON.stringify(packageDir)});
    const { parentPort } = require('node:worker_threads');
    const server = ${JSON.stringify(server)}, dir = ${JSON.stringify(tempDir())};
    ${body}`, { eval: true });
}

function ended(w) {
  return new Promise((resolve, reject) => {
    const messages = [];
    w.on('message', (m) => messages.push(m));
    w.on('error', reject);
    w.on('exit', (code) => resolve({ code, messages }));
  });
}

test('a worker loads the addon, reads, and ends with its handles open', async () => {
  const main = client();
  try {
    const w = worker(`${openEverything}
      c.listBoards().then((r) => parentPort.postMessage(r.boards.length));`);
    const { code, messages } = await ended(w);
    assert.equal(code, 0);
    assert.ok(messages[0] > 0);
    // The main thread's client is untouched by the worker's teardown.
    assert.ok((await main.listBoards()).boards.length > 0);
  } finally {
    main.close();
  }
});

test('a worker terminated with reads in flight', async () => {
  for (let i = 0; i < 5; i++) {
    const w = worker(`${openEverything}
      for (let i = 0; i < 32; i++) c.listBoards().catch(() => {});
      parentPort.postMessage('started');
      setInterval(() => {}, 1000);`);
    const done = ended(w);
    await new Promise((resolve) => w.once('message', resolve));
    await w.terminate();
    assert.equal((await done).code, 1);
  }
});

test("process.on('exit') shuts the library down; shutdown() refuses later calls", () => {
  const child = run(`${openEverything}
    c.listBoards().then(() => {
      a.shutdown(2000);
      try { c.scope; console.log('not refused'); } catch (error) { console.log(error.code); }
      try { new a.Client({ apiUrl: server, appId: 'demo' }); } catch (error) { console.log(error.code); }
      c.close(); // frees nothing now, and returns
      const threads = require('node:fs').readdirSync('/proc/self/task')
        .map((t) => require('node:fs').readFileSync('/proc/self/task/' + t + '/comm', 'utf8').trim());
      console.log(threads.filter((n) => n === 'appnorth-events' || n === 'appnorth-config').length);
    });`);
  assert.equal(child.signal, null, child.stderr);
  assert.equal(child.status, 0, child.stderr);
  assert.deepEqual(child.stdout.trim().split('\n'), ['APPNORTH_E_WRONG_STATE', 'APPNORTH_E_WRONG_STATE', '0']);
});
