'use strict';
// Shared by the tests: the package under test, the dev server
// (APPNORTH_TEST_SERVER, seeded with --seed-demo) and its /admin calls.
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

// The trailing separator makes require() take the folder (never a file
// named like it, such as appnorth.node beside it).
const packageDir = (process.env.APPNORTH_NODE_PACKAGE || path.join(__dirname, '..')) + path.sep;
const appnorth = require(packageDir);
const server = process.env.APPNORTH_TEST_SERVER;
if (!server) throw new Error('APPNORTH_TEST_SERVER is not set: run under scripts/with-devserver.sh');

async function admin(method, route, body) {
  const response = await fetch(server + route, {
    method,
    headers: { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!response.ok) throw new Error(`${method} ${route}: HTTP ${response.status}`);
  const text = await response.text();
  return text ? JSON.parse(text) : null;
}

function tempDir() {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'appnorth-node-'));
}

function client(extra = {}) {
  return new appnorth.Client({ apiUrl: server, appId: 'demo', apiTimeoutMs: 5000, ...extra });
}

// A signed-in user of the demo app (chat and votes need one).
let users = 0;
async function user() {
  users += 1;
  const email = `node${process.pid}-${users}@example.com`;
  const token = `tok-node-${process.pid}-${users}`;
  await admin('POST', '/admin/users', { app: 'demo', email, token });
  return client({ email, token });
}

module.exports = { appnorth, packageDir, server, admin, tempDir, client, user };
