"""Profiles move between nodes. Two rematd in state directories of their
own stand for two nodes: a trainer on the first collects and plans; its
profile (`remat export`) seeds the second (`remat import`, or
`rematd --import` at start), where a trainer plans from its first step,
with no COLLECT for lengths the profile covers, within budget. Import is
idempotent, refuses another device type unless forced, and refuses a
newer format."""

import json
import os
import subprocess
import tempfile

import pytest
import torch

import remat
from conftest import ROOT, Daemon
from remat.torch import apply, memory_source_for

pytest.importorskip("transformers")
from test_apply import K, llama, text_batch  # noqa: E402

NAME = "llama-profile"
TRAINED = [16, 64, 24, 48, 32, 56, 40]  # what the first node sees
COVERED = [20, 60, 36, 52, 28, 44]      # within it


def cli(*args: str) -> subprocess.CompletedProcess:
    binary = os.environ.get("REMAT_CLI",
                            os.path.join(ROOT, "bazel-bin", "client", "remat"))
    return subprocess.run([binary, *args], capture_output=True, text=True,
                          timeout=60)


def ok(*args: str) -> str:
    done = cli(*args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def samples_on(daemon: Daemon, device: str = "cpu") -> int:
    state = json.loads(ok("model", NAME, "--device", device, "--address",
                          daemon.address, "-o", "json"))
    return int(state["num_samples"])


class Trainer:
    """The same model on every node (same seed), planned by that node's
    rematd, measured on the CPU: its profile is "cpu"'s."""

    def __init__(self, daemon: Daemon) -> None:
        torch.manual_seed(0)
        self.model, blocks = llama()
        self.handle = apply(blocks, model=self.model, name=NAME,
                            planner=remat.RemotePlanner(daemon.address),
                            feature_names=["batch", "seq"],
                            memory=memory_source_for("cpu"))
        longest = text_batch(2, 64, 0)
        # 3/4 of the longest batch's peak with every block kept: long
        # batches must recompute.
        self.budget = self.handle.measure_peak_bytes(
            lambda: self.model(**longest).loss.backward(), [K] * 3,
            inputs=longest) * 3 // 4
        self.model.zero_grad(set_to_none=True)

    def run(self, lengths) -> tuple:
        """(collect steps, planned steps over budget) over `lengths`."""
        collects = over = 0
        for k, seq in enumerate(lengths):
            batch = text_batch(2, seq, k)
            with self.handle.step({"batch": 2, "seq": seq}, self.budget,
                                  inputs=batch) as s:
                self.model(**batch).loss.backward()
            self.model.zero_grad(set_to_none=True)
            collects += s.collect
            over += not s.collect and s.measured_peak_bytes > self.budget
        return collects, over


def test_a_profile_exported_from_one_node_seeds_another():
    with tempfile.TemporaryDirectory(prefix="remat", dir="/tmp") as d:
        first = Daemon(os.path.join(d, "a"))
        second = Daemon(os.path.join(d, "b"))
        cold = Daemon(os.path.join(d, "c"))
        for daemon in (first, second, cold):
            os.mkdir(daemon.dir)
            daemon.start()
        try:
            collects, over = Trainer(first).run(TRAINED * 2)
            assert collects > 0 and over == 0
            held = samples_on(first)
            assert held == collects - 1  # the first step warms up

            os.mkdir(os.path.join(d, "profiles"))
            profile = os.path.join(d, "profiles", "llama.profile")
            out = ok("export", NAME, "--device", "cpu", "-o", profile,
                     "--address", first.address)
            assert f"{held} samples" in out
            out = ok("import", profile, "--address", second.address)
            assert f"{held} samples added" in out and "registered" in out
            assert samples_on(second) == held
            # Idempotent: the same file again adds nothing.
            out = ok("import", profile, "--address", second.address)
            assert "0 samples added" in out and f"{held} held already" in out
            assert samples_on(second) == held
            # Durable: a restart replays what was imported.
            second.stop()
            second.start()
            assert samples_on(second) == held

            # A node without the profile collects; with it, none.
            cold_collects, _ = Trainer(cold).run(COVERED)
            assert cold_collects > 0
            seeded_collects, seeded_over = Trainer(second).run(COVERED)
            assert seeded_collects == 0 and seeded_over == 0
            print(f"first node: {collects} collect steps of "
                  f"{2 * len(TRAINED)}, {held} samples exported; second "
                  f"node, {len(COVERED)} steps: {cold_collects} collect "
                  f"steps without the profile, {seeded_collects} with it")

            # Another device type is refused unless forced.
            refused = cli("import", profile, "--device", "NVIDIA H100",
                          "--address", second.address)
            assert refused.returncode == 5
            assert "device: the profile was measured on \"cpu\"" in \
                refused.stderr
            ok("import", profile, "--device", "other", "--force-device",
               "--address", second.address)
            assert samples_on(second, "other") == held

            # A newer format than rematd reads is refused, naming it.
            data = open(profile, "rb").read()
            assert data[:2] == b"\x08\x01"  # format_version = 1, first
            newer = os.path.join(d, "newer.profile")
            open(newer, "wb").write(b"\x08\x02" + data[2:])
            refused = cli("import", newer, "--address", second.address)
            assert refused.returncode == 5
            assert "profile.format_version: 2 is newer" in refused.stderr
        finally:
            for daemon in (first, second, cold):
                daemon.stop()

        # rematd --import seeds a node at start (from a directory of
        # profiles, as a DaemonSet mounts one), and after a restart adds
        # nothing.
        seeded = Daemon(os.path.join(d, "d"), "--import",
                        os.path.dirname(profile))
        os.mkdir(seeded.dir)
        seeded.start()
        try:
            assert samples_on(seeded) == held
            seeded.stop()
            seeded.start()
            assert samples_on(seeded) == held
            collects, over = Trainer(seeded).run(COVERED)
            assert collects == 0 and over == 0
        finally:
            seeded.stop()
        bad = Daemon(os.path.join(d, "e"), "--import", newer)
        os.mkdir(bad.dir)
        with pytest.raises(RuntimeError, match="format_version: 2"):
            bad.start()
