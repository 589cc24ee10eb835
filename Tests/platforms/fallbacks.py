"""The run-time fallbacks for dependencies older than the build's headers
(docs/platforms.md), forced by the library the wheel bundles: Debian 11's
libcurl 7.74, older than both pieces of curl's API the library can use.
Run inside a platform root with the wheel installed
(scripts/test-platforms.sh). Usage: fallbacks.py API_URL APP DATA_DIR"""

import ctypes
import glob
import json
import os
import sys
import urllib.request

import appnorth

url, app, data_dir = sys.argv[1], sys.argv[2], sys.argv[3]
libs = os.path.join(os.path.dirname(os.path.dirname(appnorth.__file__)), "appnorth.libs")
curl = ctypes.CDLL(glob.glob(os.path.join(libs, "libcurl*.so*"))[0])
curl.curl_version.restype = ctypes.c_char_p
version = curl.curl_version().decode().split()[0].split("/")[1]
number = tuple(int(part) for part in version.split(".")[:2])
assert number < (7, 77), f"the wheel bundles libcurl {version}; this test forces the fallbacks of 7.74"

# CURLOPT_CAINFO_BLOB (7.77): an in-memory CA bundle is refused when set,
# with a message that says what to do, never silently ignored.
pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
try:
    appnorth.Client(url, app, ca_pem=pem).close()
    raise AssertionError("an in-memory CA bundle was accepted by libcurl " + version)
except appnorth.AppNorthError as error:
    assert error.code == appnorth.E_INVALID_ARGUMENT and "7.77" in error.message and "file" in error.message, error

# curl_easy_header (7.83): without it the response fields come from the
# header callback, so the config's ETag is still read and sent back.
def admin(method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url + path, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.load(response)

admin("POST", f"/admin/apps/{app}/config", {"config": {"platform_fallback": 1}})
since = admin("GET", "/admin/requests?since=0")["requests"]
since = since[-1]["seq"] if since else 0
with appnorth.Client(url, app) as client, appnorth.Config(client, data_dir) as config:
    config.refresh()
    config.refresh()
fetches = [r for r in admin("GET", f"/admin/requests?since={since}")["requests"] if r["path"].endswith("/config")]
assert len(fetches) >= 2, fetches
sent = fetches[-1]["headers"].get("If-None-Match")
assert sent, f"the second fetch sent no If-None-Match: the ETag was not read with libcurl {version}"
print(f"fallbacks: libcurl {version}: in-memory CA refused with a clear message; ETag {sent} read and sent back")
