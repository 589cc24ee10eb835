"""Runs devserver/h2front (Go): an HTTPS front that speaks HTTP/2, with
HTTP/1.1 for clients that do not offer h2, forwarding every request to a
plain-HTTP dev server. Python's http.server cannot speak HTTP/2.

    with H2Front("http://127.0.0.1:8080", "server.pem", "server.key") as front:
        front.url        # https://127.0.0.1:PORT
        front.lines()    # ["HTTP/2.0 GET /v1/apps/demo/boards conn=1", ...]

The binary is built with `go build` (golang-go, installed by
scripts/ensure-deps.sh) into a temporary folder on start. `h1_only=True`
serves HTTP/1.1 only, for comparisons.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import List, Optional

SOURCE = Path(__file__).resolve().parent / "h2front" / "main.go"


def build(folder: Path) -> Path:
    """Builds the front into `folder` and returns the binary's path."""
    go = shutil.which("go")
    if go is None:
        raise RuntimeError("go is not on PATH: run scripts/ensure-deps.sh (golang-go)")
    binary = folder / "h2front"
    subprocess.run([go, "build", "-o", str(binary), str(SOURCE)], check=True, timeout=600,
                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    return binary


class H2Front:
    def __init__(self, upstream: str, cert: str, key: str, h1_only: bool = False,
                 binary: Optional[Path] = None) -> None:
        self.upstream, self.cert, self.key, self.h1_only = upstream, cert, key, h1_only
        self._binary = binary
        self._work: Optional[Path] = None
        self._process: Optional[subprocess.Popen] = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        assert self._work is not None, "not started"
        return self._work / "requests.log"

    def start(self, timeout: float = 30.0) -> "H2Front":
        self._work = Path(tempfile.mkdtemp(prefix="appnorth-h2front-"))
        binary = self._binary or build(self._work)
        port_file = self._work / "port"
        args = [str(binary), "--upstream", self.upstream, "--tls-cert", self.cert, "--tls-key", self.key,
                "--port-file", str(port_file), "--log-file", str(self.log_path)]
        if self.h1_only:
            args.append("--h1-only")
        self._process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + timeout
        while not port_file.is_file() or not port_file.read_text().strip():
            if self._process.poll() is not None:
                error = self._process.stderr.read().decode(errors="replace") if self._process.stderr else ""
                raise RuntimeError(f"h2front exited with {self._process.returncode}: {error}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"h2front did not start within {timeout} s")
            time.sleep(0.02)
        self.port = int(port_file.read_text().strip())
        return self

    def lines(self) -> List[str]:
        """The requests the front has forwarded, one "PROTO METHOD PATH conn=N" each."""
        try:
            return self.log_path.read_text().splitlines()
        except FileNotFoundError:
            return []

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            if self._process.stderr:
                self._process.stderr.close()
            self._process = None
        if self._work is not None:
            shutil.rmtree(self._work, ignore_errors=True)
            self._work = None

    def __enter__(self) -> "H2Front":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
