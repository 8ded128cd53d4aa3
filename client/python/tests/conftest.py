"""Fixtures: the real rematd on a unix socket, and the demo encoder.

The suite runs under Bazel (client/python:python_client_test, which puts the
package on PYTHONPATH and names rematd in $REMATD) or by hand from the
repository root after `pip install --no-build-isolation ./client/python`
and `bazel build //planner/service:rematd`.
"""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "examples", "python"))


class Daemon:
    """One rematd process on a unix socket, with a state directory that
    survives restarts."""

    def __init__(self, directory: str, *extra_args: str) -> None:
        self.dir = directory
        self.extra_args = list(extra_args)
        self.socket = os.path.join(directory, "rematd.sock")
        self.address = "unix:" + self.socket
        self.proc = None
        self.log_path = os.path.join(directory, "rematd.log")

    def start(self) -> None:
        port_file = os.path.join(self.dir, "ports.json")
        if os.path.exists(port_file):
            os.unlink(port_file)
        rematd = os.environ.get("REMATD",
                                os.path.join(ROOT, "bazel-bin", "planner",
                                             "service", "rematd"))
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [rematd, "--listen", "", "--unix-socket", self.socket,
             "--metrics-port", "0", "--port-file", port_file,
             "--grace-seconds", "1",
             "--state-dir", os.path.join(self.dir, "state")] +
            self.extra_args,
            stdout=subprocess.DEVNULL, stderr=log)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("rematd exited during start:\n" +
                                   open(self.log_path).read())
            try:
                with open(port_file) as f:
                    json.load(f)
                return
            except (OSError, ValueError):
                time.sleep(0.02)
        self.stop()
        raise RuntimeError("rematd did not serve within 20 s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


@pytest.fixture
def rematd():
    with tempfile.TemporaryDirectory(prefix="remat", dir="/tmp") as d:
        daemon = Daemon(d)
        daemon.start()
        try:
            yield daemon
        finally:
            daemon.stop()
