'use strict';
// Loads the addon: appnorth.node from the platform package of this machine
// (lib/platform.js), which finds libappnorth.so.0 beside itself through its
// $ORIGIN rpath. APPNORTH_NODE_ADDON (a path to an appnorth.node)
// overrides, for development. Any failure is one Error naming the package
// and the fix (code ERR_APPNORTH_NO_ADDON, the loader's error as its cause).
const platform = require('./platform');

function load() {
  if (process.env.APPNORTH_NODE_ADDON) return require(process.env.APPNORTH_NODE_ADDON);
  if (Number(process.versions.napi) < platform.napiVersion) throw platform.napiError();
  const where = platform.target();
  if (!platform.published.includes(where)) throw platform.unsupportedError(where);
  try {
    return require(`${platform.packageName(where)}/appnorth.node`);
  } catch (cause) {
    throw platform.installError(where, cause);
  }
}

module.exports = load();
