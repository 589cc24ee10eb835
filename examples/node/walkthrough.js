// The C walkthrough from Node.js, through the appnorth package (a Node-API
// addon): boards and ideas read without blocking the event loop, a comment
// written offline and flushed later, 300 events that outlive a lost
// connection and a restart, remote config with a live 'change' listener
// (and the cached copy after a restart), a logger, every handle closed.
//
//     node examples/node/walkthrough.js API_URL APP_ID DATA_DIR
//
// The package: `npm install appnorth-0.4.0.tgz` (make node-package), or
// APPNORTH_NODE_PACKAGE=build/node/appnorth as make demo sets it.
//
// Every callback (each Promise's completion, the logger, the listener) runs
// on this thread: the client is in the library's dispatch mode and its
// descriptor is watched by the event loop. docs/hosts.md, "Node.js", has
// the rules.
//
// DEV SERVER ONLY: "losing connectivity" asks the local dev server to drop
// every API connection (POST /admin/faults); config versions are published
// through /admin/apps/APP/config. A real API has neither.
'use strict';
const appnorth = require(process.env.APPNORTH_NODE_PACKAGE ?? 'appnorth');

const [apiUrl, app, dataDir] = process.argv.slice(2);
if (!dataDir) {
  console.error('usage: node walkthrough.js API_URL APP_ID DATA_DIR');
  process.exit(2);
}

async function devAdmin(method, route, body) {
  const response = await fetch(apiUrl + route, {
    method, headers: { 'content-type': 'application/json' }, body: body && JSON.stringify(body),
  });
  if (!response.ok) throw new Error(`${method} ${route}: HTTP ${response.status}`);
}
const goOffline = () => devAdmin('POST', '/admin/faults', { drop: true, count: 1000 });
const goOnline = () => devAdmin('DELETE', '/admin/faults');

async function readsWithoutBlocking(client) {
  console.log('1. Boards and ideas, read without blocking the event loop');
  let ticks = 0;
  const ticker = setInterval(() => { ticks += 1; }, 1); // the loop keeps turning meanwhile
  const { boards } = await client.listBoards();
  const { ideas } = await client.listIdeas({ q: 'dark' });
  clearInterval(ticker);
  console.log(`   ${boards.length} boards; ideas matching "dark": ${ideas.map((i) => i.title).join(', ')}`);
  console.log(`   (a 1 ms timer fired ${ticks} times while they were in flight)`);
  return ideas[0];
}

async function offlineComment(client, idea) {
  console.log('2. A comment written offline');
  const storage = appnorth.Storage.sqlite(`${dataDir}/queue`, 'queue');
  const queue = new appnorth.OfflineQueue(storage);
  try {
    await goOffline();
    const sentNow = await queue.submitComment(client, idea.id, 'Sí, escrito en el avión ✈');
    console.log(`   sent now: ${sentNow}, pending: ${queue.pendingCount()}`);
    await goOnline();
    const { sent } = await queue.flush(client);
    console.log(`   after reconnecting: ${sent} sent, ${queue.pendingCount()} pending`);
    return !sentNow && sent === 1 && queue.pendingCount() === 0;
  } finally {
    queue.close();
    storage.close();
  }
}

async function eventsAcrossARestart(client) {
  console.log('3. Events that outlive a lost connection and a restart');
  const open = () => new appnorth.Events(client, { dataDir: `${dataDir}/events` });
  await goOffline();
  let events = open();
  for (let level = 1; level <= 300; level++) events.track('level_completed', { level }); // on disk at once
  try {
    await events.flush(2000);
  } catch (error) {
    console.log(`   flush while offline: ${error.code} (events kept)`);
  }
  events.close(); // "restart": the events stay on disk
  await goOnline();
  events = open();
  events.foreground();
  await events.flush(10000);
  const { queued } = events.stats();
  console.log(`   after restarting online: ${queued} queued`);
  events.close();
  return queued === 0;
}

async function liveConfig(client) {
  console.log('4. Remote config with a live listener, on the event loop');
  const path = `/admin/apps/${app}/config`;
  await devAdmin('POST', path, { config: { theme: 'dark', price: 9.99 } });
  let config = new appnorth.Config(client, { dataDir: `${dataDir}/config` });
  const nextChange = () => new Promise((resolve) => config.once('change', resolve));
  // A live config does not keep the process alive; this timer stands in
  // for the app's window or server while we wait for the server's push.
  const keepAlive = setInterval(() => {}, 1000);
  let change = nextChange();
  config.startLive();
  await change;
  console.log(`   theme ${config.getString('theme', 'light')}, price ${config.getDouble('price')}`);
  change = nextChange();
  await devAdmin('POST', path, { config: { theme: 'dark', price: 7.49 } });
  const { changedKeys } = await change;
  clearInterval(keepAlive);
  console.log(`   after a live update: ${changedKeys.join(', ')} changed, price ${config.getDouble('price')}`);
  config.close(); // stops the stream
  config = new appnorth.Config(client, { dataDir: `${dataDir}/config` }); // a "restart": no network call
  const { tier } = config.source;
  const price = config.getDouble('price');
  console.log(`   after a restart, before any fetch: ${tier} tier, price ${price}`);
  config.close();
  return tier === 'cached' && price === 7.49;
}

async function main() {
  console.log(`libappnorth ${appnorth.version} (Node ${process.version}, Node-API addon)`);
  const client = new appnorth.Client({
    apiUrl, appId: app, apiTimeoutMs: 3000,
    logger: (level, message) => console.log(`   [log ${level}] ${message}`),
  });
  let ok = false;
  try {
    const idea = await readsWithoutBlocking(client);
    ok = await offlineComment(client, idea);
    ok = (await eventsAcrossARestart(client)) && ok;
    ok = (await liveConfig(client)) && ok;
  } finally {
    await goOnline();
    client.close(); // last: closes anything still made with it
  }
  console.log(ok ? 'all four walkthroughs done' : 'a walkthrough did not end as expected');
  process.exitCode = ok ? 0 : 1;
}

main();
