// Memory probe of the Node.js binding (issue #42, item 6), the twin of
// bench/py/leak_probe.py: track(), config reads and non-blocking reads with
// their completions, and the process's RSS before and after them, past a
// warm-up, with full garbage collections before each reading (rssKib()).
// Run it with V8's young generation fixed (--max-semi-space-size=1, as
// make bench does): V8 otherwise grows it from 1 to 16 MB semi-spaces under
// a high allocation rate, +27 MB of heap committed and no object retained.
//
//     node --expose-gc bench/node/leak_probe.js SERVER_URL PACKAGE_DIR \
//          [--calls N] [--warmup W] [--async-share S] [--bound-kib K] [--heap-bound-kib H] [--out FILE]
//
// Kinds: `track` (events.track() with small properties, on a queue whose
// limits hold every event, uploads waiting a day, its client on a closed
// port); `config` (getString/getInt/getBool/getJson on a bundled file);
// `async` (await client.listBoards() against the dev server, completed on
// the JS thread by the addon's uv_poll watcher, 64 in flight, one in ten
// aborted at once through an AbortSignal: a CancelledError). Exit status 1
// when the total RSS growth is over --bound-kib, or that of the JS heap in
// use over --heap-bound-kib (0: report only).
'use strict';
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');

function parseArgs(argv) {
  const args = { calls: 1000000, warmup: 100000, asyncShare: 0.1, boundKib: 0, heapBoundKib: 0, out: null, rest: [] };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    const value = () => argv[++i];
    if (flag === '--calls') args.calls = Number(value());
    else if (flag === '--warmup') args.warmup = Number(value());
    else if (flag === '--async-share') args.asyncShare = Number(value());
    else if (flag === '--bound-kib') args.boundKib = Number(value());
    else if (flag === '--heap-bound-kib') args.heapBoundKib = Number(value());
    else if (flag === '--out') args.out = value();
    else args.rest.push(flag);
  }
  return args;
}

// The RSS with transient memory given back: V8 releases pages from its
// background threads after a collection, so single readings right after
// gc() spread over +-2 MB (measured: 320,000 reads, no trend); the least of
// five readings 20 ms apart, each after a full collection, spreads over
// about +-0.7 MB. Retained memory, which a leak adds to, is in every one.
// Also the JS heap in use after those collections: exact to a few KiB,
// it shows a leak of JS objects (promises, results, listeners kept) that
// the RSS's noise could hide.
async function memory() {
  let rss = Infinity;
  let heap = Infinity;
  for (let i = 0; i < 5; i++) {
    global.gc();
    await new Promise((resolve) => setTimeout(resolve, 20));
    const m = process.memoryUsage();
    rss = Math.min(rss, m.rss);
    heap = Math.min(heap, m.heapUsed);
  }
  return { rss: Math.round(rss / 1024), heap: Math.round(heap / 1024) };
}

function closedPort() {
  return new Promise((resolve) => {
    const server = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

function trackCalls(events) {
  return async (n) => {
    for (let i = 0; i < n; i++) events.track('probe', { i, level: 'forest' });
  };
}

function configCalls(config) {
  return async (n) => {
    for (let i = 0; i < n / 4; i++) {
      config.getString('theme');
      config.getInt('limit');
      config.getBool('beta');
      config.getJson('colors');
    }
  };
}

function asyncCalls(client, appnorth) {
  const one = async (k) => {
    const controller = new AbortController();
    const promise = client.listBoards({ signal: controller.signal });
    if (k % 10 === 0) controller.abort();
    try {
      const result = await promise;
      if (!Array.isArray(result.boards)) throw new Error('no boards array');
    } catch (error) {
      if (!(error instanceof appnorth.CancelledError)) throw error;
    }
  };
  return async (n) => {
    for (let start = 0; start < n; start += 64) {
      const batch = [];
      for (let k = start; k < Math.min(n, start + 64); k++) batch.push(one(k));
      await Promise.all(batch);
    }
  };
}

async function measure(kind, run, warmup, calls) {
  await run(warmup);
  const before = await memory();
  const started = process.hrtime.bigint();
  await run(calls);
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const after = await memory();
  const growth = after.rss - before.rss;
  const heapGrowth = after.heap - before.heap;
  process.stderr.write(`node ${kind}: ${calls} calls after ${warmup}: RSS ${before.rss} -> ${after.rss} KiB ` +
    `(${growth >= 0 ? '+' : ''}${growth} KiB; JS heap in use ${heapGrowth >= 0 ? '+' : ''}${heapGrowth} KiB, ` +
    `${seconds.toFixed(1)} s)\n`);
  return { kind, calls, warmup, rss_before_kib: before.rss, rss_after_kib: after.rss, growth_kib: growth,
    heap_growth_kib: heapGrowth, seconds: Math.round(seconds * 10) / 10 };
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const [server, packageDir] = args.rest;
  if (typeof global.gc !== 'function') throw new Error('run node with --expose-gc');
  const appnorth = require(path.resolve(packageDir) + path.sep);
  const work = fs.mkdtempSync(path.join(process.env.BENCH_TMP ?? os.tmpdir(), 'appnorth-leak-node-'));
  const bundle = path.join(work, 'bundle.json');
  fs.writeFileSync(bundle, JSON.stringify({ theme: 'dark', limit: 5, beta: true, colors: ['red', 'green'] }));
  const offline = new appnorth.Client({ apiUrl: `http://127.0.0.1:${await closedPort()}`, appId: 'leakprobe',
    apiTimeoutMs: 1000 });
  const online = new appnorth.Client({ apiUrl: server, appId: 'leakprobe', apiTimeoutMs: 10000 });
  const events = new appnorth.Events(offline, { dataDir: path.join(work, 'events'), flushIntervalMs: 86400000,
    batchThreshold: 10000, maxEvents: 10000000, maxBytes: 1073741824 });
  const config = new appnorth.Config(offline, { bundledPath: bundle });
  const asyncN = Math.round(args.calls * args.asyncShare);
  let rows;
  try {
    rows = [
      await measure('track', trackCalls(events), args.warmup, args.calls),
      await measure('config', configCalls(config), args.warmup, args.calls),
      await measure('async', asyncCalls(online, appnorth), Math.round(args.warmup * args.asyncShare), asyncN),
    ];
  } finally {
    events.close();
    config.close();
    offline.close();
    online.close();
    fs.rmSync(work, { recursive: true, force: true });
  }
  const total = rows.reduce((sum, r) => sum + r.growth_kib, 0);
  const heap = rows.reduce((sum, r) => sum + r.heap_growth_kib, 0);
  const result = { bench: 'leak_node', node: process.version, rows, growth_kib: total, heap_growth_kib: heap,
    bound_kib: args.boundKib, heap_bound_kib: args.heapBoundKib };
  const text = JSON.stringify(result);
  process.stdout.write(`${text}\n`);
  if (args.out) fs.writeFileSync(args.out, `${text}\n`);
  const ok = (args.boundKib === 0 || total <= args.boundKib) && (args.heapBoundKib === 0 || heap <= args.heapBoundKib);
  process.stderr.write(`node: RSS growth ${total} KiB in all (bound ${args.boundKib || 'none'} KiB), JS heap in use ` +
    `${heap} KiB (bound ${args.heapBoundKib || 'none'} KiB): ${ok ? 'ok' : 'FAILED'}\n`);
  process.exitCode = ok ? 0 : 1;
}

main().catch((error) => {
  process.stderr.write(`${error.stack}\n`);
  process.exitCode = 2;
});
