"""Issue 23, class 2: a private CA is the only trust source, and TLS 1.2 is
the library's own floor. Each case runs the library in a child process:
the CA-directory case inside a private mount namespace (``unshare -m``,
root) with the test CA installed over /etc/ssl/certs, the floor case under a
permissive OPENSSL_CONF against a listener that speaks only TLS 1.0/1.1
(devserver/appnorth_tls_listeners.py). Skipped with a message where the
namespace or the old protocols are not available."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Iterator

import pytest

from appnorth_test_support import BINDING_DIR, REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "devserver"))
from appnorth_devserver import DevServer  # noqa: E402
from appnorth_tls_listeners import TLSListener  # noqa: E402

PERMISSIVE_CONF = """openssl_conf = init
[init]
ssl_conf = ssl_sect
[ssl_sect]
system_default = system_default_sect
[system_default_sect]
MinProtocol = TLSv1
CipherString = DEFAULT:@SECLEVEL=0
"""


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("pki")
    subprocess.run([str(REPO_ROOT / "scripts" / "make-test-certs.sh"), str(folder)], check=True, timeout=60)
    return folder


@pytest.fixture(scope="module")
def https_url(pki: Path) -> Iterator[str]:
    with DevServer("127.0.0.1", 0, tls_cert=str(pki / "server.pem"), tls_key=str(pki / "server.key")) as server:
        yield server.url


def run_child(script: str, env_extra: dict, prefix: list[str] | None = None) -> str:
    env = dict(os.environ, PYTHONPATH=str(BINDING_DIR), **env_extra)
    child = subprocess.run([*(prefix or []), sys.executable, "-c", textwrap.dedent(script)],
                           env=env, capture_output=True, text=True, timeout=120)
    assert child.returncode == 0, child.stdout + child.stderr
    return child.stdout


def mount_namespace_available() -> bool:
    return os.geteuid() == 0 and shutil.which("unshare") is not None and \
        subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode == 0


@pytest.mark.skipif(not mount_namespace_available(),
                    reason="the CA-directory case needs root and unshare -m (a private mount namespace); skipped")
def test_a_private_ca_replaces_the_system_ca_directory(pki: Path, https_url: str) -> None:
    # In the namespace, the system store (bundle and hashed directory)
    # trusts the test CA that signed the server; the client is given
    # another CA. Trusting the directory too would let the request pass.
    store = "/etc/ssl/certs"
    setup = (f"mount --make-rprivate / && mount -t tmpfs none {store} && cp {pki}/ca.pem {store}/test-ca.pem "
             f"&& cp {pki}/ca.pem {store}/ca-certificates.crt && openssl rehash {store} >/dev/null 2>&1 && exec \"$@\"")
    out = run_child(f"""
        import appnorth
        url = {https_url!r}
        with appnorth.Client(url, "tls-app", api_timeout_ms=15000) as c:
            c.list_boards()
            print("system store trusts the test CA")
        with appnorth.Client(url, "tls-app", api_timeout_ms=15000, ca_file={str(pki / 'selfsigned.pem')!r}) as c:
            try:
                c.list_boards()
                print("ca_file: ACCEPTED")
            except appnorth.NetworkError as e:
                print("ca_file: refused:", e)
        pem = open({str(pki / 'selfsigned.pem')!r}, "rb").read()
        with appnorth.Client(url, "tls-app", api_timeout_ms=15000, ca_pem=pem) as c:
            try:
                c.list_boards()
                print("ca_pem: ACCEPTED")
            except appnorth.NetworkError as e:
                print("ca_pem: refused:", e)
    """, {}, prefix=["unshare", "-m", "sh", "-c", setup, "sh"])
    assert "system store trusts the test CA" in out
    assert "ca_file: refused:" in out and "ca_pem: refused:" in out, out
    assert "ACCEPTED" not in out


def test_tls_below_1_2_is_refused_whatever_openssl_conf_allows(pki: Path, tmp_path: Path) -> None:
    conf = tmp_path / "permissive.cnf"
    conf.write_text(PERMISSIVE_CONF)
    try:
        listener = TLSListener(str(pki / "server.pem"), str(pki / "server.key"), old_tls_only=True).start()
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"this Python/OpenSSL cannot serve TLS 1.1: {e}")
    try:
        url = f"https://127.0.0.1:{listener.port}"
        out = run_child(f"""
            import socket, ssl, appnorth
            # The control: under this configuration, TLS 1.1 is possible.
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.load_verify_locations({str(pki / 'ca.pem')!r})
            ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
            import warnings
            warnings.simplefilter("ignore", DeprecationWarning)
            ctx.minimum_version = ssl.TLSVersion.TLSv1
            try:
                with socket.create_connection(("127.0.0.1", {listener.port})) as raw:
                    with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                        print("control negotiated", tls.version())
            except ssl.SSLError as e:
                print("control failed", e)
            with appnorth.Client({url!r}, "tls-app", api_timeout_ms=15000, ca_file={str(pki / 'ca.pem')!r}) as c:
                try:
                    c.list_boards()
                except appnorth.NetworkError as e:
                    print("library refused:", e)
                except appnorth.AppNorthError as e:
                    print("library NEGOTIATED old TLS:", type(e).__name__, e)
        """, {"OPENSSL_CONF": str(conf)})
    finally:
        listener.stop()
    if "control negotiated TLSv1.1" not in out:
        pytest.skip(f"this OpenSSL refuses TLS 1.1 even when configured to allow it: {out}")
    assert "library refused:" in out, out
