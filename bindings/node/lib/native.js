'use strict';
// Loads the addon: appnorth.node beside this package's index.js, which finds
// libappnorth.so.0 beside itself through its $ORIGIN rpath.
// APPNORTH_NODE_ADDON (a path to an appnorth.node) overrides, for development.
const path = require('node:path');

const file = process.env.APPNORTH_NODE_ADDON || path.join(__dirname, '..', 'appnorth.node');
const native = require(file);

module.exports = native;
