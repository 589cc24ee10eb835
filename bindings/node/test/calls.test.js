'use strict';
// Every call of the package against the dev server, once each.
const test = require('node:test');
const assert = require('node:assert/strict');
const { appnorth, admin, tempDir, client, user } = require('./support');

test('version', () => {
  assert.match(appnorth.version, /^\d+\.\d+\.\d+$/);
  assert.equal(typeof appnorth.versionNumber, 'number');
  assert.equal(appnorth.statusString(5), 'network error');
});

test('reads', async () => {
  const c = client();
  try {
    const { boards } = await c.listBoards();
    assert.ok(boards.length > 0);
    const page = await c.listIdeas({ q: 'dark', limit: 5 });
    assert.equal(page.ideas[0].title, 'Dark mode');
    const { comments } = await c.listComments(page.ideas[0].id);
    assert.ok(Array.isArray(comments));
    assert.match(c.scope, /\|demo\|anonymous$/);
  } finally {
    c.close();
  }
});

test('writes', async () => {
  const c = await user();
  try {
    const { boards } = await c.listBoards();
    const { idea } = await c.submitIdea(boards[0].id, 'Node idea', 'from the addon', { idempotencyKey: `k-${Date.now()}` });
    assert.equal(idea.title, 'Node idea');
    const { comment } = await c.submitComment(idea.id, 'a comment');
    assert.equal(comment.body, 'a comment');
    await c.vote(idea.id);
    await assert.rejects(c.vote(idea.id), appnorth.ConflictError);
    const sent = await c.sendChatMessage('hello from node');
    assert.ok(sent.message);
    const { messages } = await c.listChatMessages();
    assert.ok(messages.some((m) => m.body === 'hello from node'));
    const feedback = await c.submitFeedback({
      text: 'It crashed', diagnostics: { build: 7 },
      screenshots: [{ bytes: Buffer.from([0x89, 0x50, 0x4e, 0x47]), contentType: 'image/png' }],
    });
    assert.ok(feedback);
    const built = new appnorth.Feedback();
    built.setText('built by hand');
    assert.ok(await c.submitFeedback(built));
    built.close();
  } finally {
    c.close();
  }
});

test('offline queue: queued on a network failure, flushed later', async () => {
  const c = client();
  const storage = appnorth.Storage.sqlite(tempDir(), 'queue');
  const queue = new appnorth.OfflineQueue(storage, { maxEntries: 10 });
  try {
    const idea = (await c.listIdeas({ limit: 1 })).ideas[0];
    await admin('POST', '/admin/faults', { drop: true, count: 1000 });
    assert.equal(await queue.submitComment(c, idea.id, 'offline comment'), false);
    assert.equal(await queue.submitIdea(c, idea.board_id, 'offline idea', null), false);
    assert.equal(await queue.submitFeedback(c, { text: 'offline feedback' }), false);
    assert.equal(queue.pendingCount(), 3);
    assert.equal(queue.entries().length, 3);
    await admin('DELETE', '/admin/faults');
    const { sent, failedEntryId } = await queue.flush(c);
    assert.equal(sent, 3);
    assert.equal(failedEntryId, null);
    assert.equal(queue.pendingCount(), 0);
    await admin('POST', '/admin/faults', { drop: true, count: 1000 });
    await queue.submitComment(c, idea.id, 'to discard');
    await queue.submitComment(c, idea.id, 'to discard by id');
    await admin('DELETE', '/admin/faults');
    assert.equal(queue.discardEntry(queue.entries()[1].id), true);
    assert.equal(queue.discard(c), 1);
    assert.equal(queue.discard(null), 0);
  } finally {
    await admin('DELETE', '/admin/faults');
    queue.close();
    storage.close();
    c.close();
  }
});

test('read cache with a manual clock, memory storage', async () => {
  const c = client();
  const storage = appnorth.Storage.memory();
  const clock = new appnorth.ManualClock(1_700_000_000_000);
  const cache = new appnorth.ReadCache(storage, { ttlSeconds: 300, clock });
  try {
    const seen = [];
    await cache.readBoards(c, (source) => seen.push(source));
    await cache.readBoards(c, (source) => seen.push(source));
    assert.deepEqual(seen, ['network', 'cache', 'network']);
    clock.advance(301_000);
    assert.equal(cache.boards(c), null);
    const ideas = await c.listIdeas({ q: 'dark' });
    cache.storeIdeas(c, { q: 'dark' }, ideas);
    assert.equal(cache.ideas(c, { q: 'dark' })[0].title, 'Dark mode');
    cache.clear(c);
    assert.equal(cache.ideas(c, { q: 'dark' }), null);
    clock.setWall(1_800_000_000_000);
    storage.erase();
  } finally {
    cache.close();
    clock.close();
    storage.close();
    c.close();
  }
});

test('events: every call', async () => {
  const c = client();
  const events = new appnorth.Events(c, { dataDir: tempDir(), flushIntervalMs: 600000, batchThreshold: 1000 });
  try {
    assert.equal(events.consent, 'unknown');
    assert.equal(events.track('node_started', { n: 1 }), true);
    assert.equal(events.track('no_properties'), true);
    events.setNetworkType(appnorth.NetworkType.WIFI);
    events.startSession();
    events.foreground();
    events.identify('user-7');
    events.setPushToken('push-token');
    events.setPushToken(null);
    events.reset();
    assert.match(events.anonymousId, /\S/);
    await events.flush(10000);
    assert.equal(events.stats().queued, 0);
    events.setConsent(false);
    assert.equal(events.consent, 'revoked');
    assert.equal(events.track('dropped'), false);
    events.setConsent(true);
    const state = await admin('GET', '/admin/apps/demo/state');
    assert.ok(state.events.some((e) => e.name === 'node_started'));
  } finally {
    events.close();
    c.close();
  }
});

test('config: getters, refresh, tiers, live updates, last fetch status', async () => {
  const dir = tempDir();
  const fs = require('node:fs');
  fs.writeFileSync(`${dir}/bundled.json`, JSON.stringify({ banner: 'bundled' }));
  // Raw text: 9007199254740993 is not a JS number (2^53 + 1).
  await fetch(`${require('./support').server}/admin/apps/demo/config`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: '{"config":{"theme":"dark","price":9.99,"count":3,"big":9007199254740993,"on":true,"list":[1,2]}}',
  });
  const c = client();
  const config = new appnorth.Config(c, { dataDir: dir, bundledPath: `${dir}/bundled.json`, reconnectJitterPercent: 0 });
  try {
    assert.equal(config.source.tier, 'bundled');
    assert.equal(config.getString('banner'), 'bundled');
    await config.refresh();
    assert.equal(config.source.tier, 'remote');
    assert.equal(config.getString('theme', 'light'), 'dark');
    assert.equal(config.getString('missing', 'light'), 'light');
    assert.equal(config.getDouble('price'), 9.99);
    assert.equal(config.getInt('count'), 3);
    assert.equal(config.getInt('big'), 9007199254740993n);
    assert.equal(config.getBool('on'), true);
    assert.deepEqual(config.getJson('list'), [1, 2]);
    assert.deepEqual(config.getJson('nothing', { a: 1 }), { a: 1 });
    assert.equal(config.snapshot().theme, 'dark');
    assert.equal(config.lastFetchStatus().status, 0);
    const changed = new Promise((resolve) => config.once('change', resolve));
    config.startLive();
    // A live config does not keep the process alive; this timer does meanwhile.
    const keepAlive = setInterval(() => {}, 1000);
    await admin('POST', '/admin/apps/demo/config', { config: { theme: 'light' } });
    const event = await changed;
    clearInterval(keepAlive);
    assert.deepEqual(event.changedKeys.sort(), ['big', 'count', 'list', 'on', 'price', 'theme']);
    assert.equal(event.config.theme, 'light');
    config.stopLive();
  } finally {
    config.close();
    c.close();
  }
});
