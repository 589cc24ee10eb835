// index.d.ts in use: make test-node compiles this with tsc --strict (no output, not run).
import * as appnorth from '../index';
async function main(): Promise<void> {
  const client = new appnorth.Client({ apiUrl: 'http://127.0.0.1:8080', appId: 'demo', logger: (level, message) => console.log(level, message) });
  const { boards } = await client.listBoards({ signal: new AbortController().signal });
  const page = await client.listIdeas({ q: 'dark', limit: 5 });
  console.log(boards[0].name, page.ideas[0].title, page.next_cursor);
  const config = new appnorth.Config(client, { dataDir: '/tmp/x' });
  config.on('change', ({ changedKeys, tier }) => console.log(changedKeys.join(','), tier));
  const n: number | bigint = config.getInt('count', 3);
  config.on('status', ({ state, sinceMs, lastError }) => console.log(state, sinceMs, lastError?.httpStatus));
  const state: appnorth.ConfigStateName = config.status.state;
  console.log(state, appnorth.ConfigState.OFFLINE);
  const events = new appnorth.Events(client, { dataDir: '/tmp/y', sampleRate: 0.5, remoteSettings: true });
  const queued: boolean = events.track('x', { a: 1 });
  const pendingNames: string[] = events.pending(10).map((e) => String(e.name));
  console.log(pendingNames);
  const { sent } = await events.flush(1000);
  const queue = new appnorth.OfflineQueue(appnorth.Storage.memory());
  const ok: boolean = await queue.submitComment(client, 'i_1', 'hi');
  try { await client.vote('i_1'); } catch (e) { if (e instanceof appnorth.ConflictError) console.log(e.code, e.httpStatus, e.status); }
  console.log(n, queued, sent, ok, appnorth.version, appnorth.statusString(5));
  await events.closeAsync();
  appnorth.shutdown(100);
  client.close();
}
main();
