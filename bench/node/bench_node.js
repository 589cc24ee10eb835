// make bench, the Node.js row: `await client.listBoards()` through the
// addon (dispatch mode, completed on the JS thread by the uv_poll watcher),
// one read at a time, and `events.track()` (synchronous, one journal
// write) per call. bench/report.py sets them against the C non-blocking read
// (bench_async) and C track() (bench_track) of the same run.
//
//     node bench/node/bench_node.js SERVER_URL PACKAGE_DIR
// BENCH_NODE_READS (default 300) and BENCH_NODE_TRACKS (default 20000).
'use strict';
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const [server, packageDir] = process.argv.slice(2);
const appnorth = require(path.resolve(packageDir) + path.sep);
const reads = Number(process.env.BENCH_NODE_READS ?? 300);
const tracks = Number(process.env.BENCH_NODE_TRACKS ?? 20000);

function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

async function readLatencies(client) {
  for (let i = 0; i < 20; i++) await client.listBoards(); // warm: the connection
  const ms = [];
  for (let i = 0; i < reads; i++) {
    const t0 = process.hrtime.bigint();
    await client.listBoards();
    ms.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  return ms.sort((a, b) => a - b);
}

function trackLatencies(events) {
  for (let i = 0; i < 200; i++) events.track('warm', { i });
  const us = new Array(tracks);
  for (let i = 0; i < tracks; i++) {
    const t0 = process.hrtime.bigint();
    events.track('level_completed', { level: i, score: 100 });
    us[i] = Number(process.hrtime.bigint() - t0) / 1e3;
  }
  return us.sort((a, b) => a - b);
}

async function main() {
  // Its own app with one board, as bench_async makes.
  const app = `bench-node-${process.pid}`;
  await fetch(`${server}/admin/apps/${app}/boards`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'Features', description: 'bench' }),
  });
  const client = new appnorth.Client({ apiUrl: server, appId: app });
  const dir = fs.mkdtempSync(path.join(process.env.BENCH_TMP ?? os.tmpdir(), 'bench-node-'));
  // No upload while tracking: the figure is track()'s own cost.
  const events = new appnorth.Events(client, { dataDir: dir, flushIntervalMs: 86400000, batchThreshold: 10000,
    maxEvents: 10000000, maxBytes: 1073741824 });
  try {
    const read = await readLatencies(client);
    const track = trackLatencies(events);
    const result = {
      bench: 'node', node: process.version, reads, tracks,
      read_p50_ms: percentile(read, 50), read_p99_ms: percentile(read, 99),
      track_p50_us: percentile(track, 50), track_p99_us: percentile(track, 99),
    };
    process.stderr.write(`node: await listBoards() p50 ${result.read_p50_ms.toFixed(3)} ms; ` +
      `track() p50 ${result.track_p50_us.toFixed(2)} us\n`);
    process.stdout.write(`${JSON.stringify(result)}\n`);
  } finally {
    events.close();
    client.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main();
