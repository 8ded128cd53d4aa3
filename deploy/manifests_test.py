#!/usr/bin/python3
"""Checks that the deployment files agree with each other and with rematd.

* The ConfigMap's config (deploy/k8s/configmap.yaml) is valid for the real
  rematd (`rematd --validate-config`), and rematd starts with it.
* Its metrics port and address, unix socket (path and mode), state directory,
  TCP port (when it has one) and health listener port agree with the
  DaemonSet's container ports, probes, scrape annotations, config mount and
  host directories, and with the example trainer pod's socket address and
  groups. gRPC probes dial the health listener (health_listen, plaintext
  and health only) and ask for service names rematd registers.
* Every probe passes against the running rematd: exec probes run their own
  `remat health` command (on the test's socket), gRPC probes are asked with
  `remat health --address 127.0.0.1:PORT --service S` on the started
  daemon's health listener (the config's host, port 0), which must not
  serve the Planner.
* The systemd unit has its hardening keys, its directories agree with
  deploy/rematd.example.json, and `systemd-analyze verify` (when present)
  has nothing to say about it.
* Every metric the Grafana dashboard queries (and every label it selects or
  groups by) is one the running rematd exports on /metrics.

Usage: manifests_test.py [--root DIR] [--rematd PATH] [--remat PATH]
(defaults: the Bazel runfiles layout). Exit 0 when every check passes, 1
otherwise; each failure is printed as "FAIL: ...".
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

try:
    import yaml
except ImportError:
    sys.exit("FAIL: no PyYAML for /usr/bin/python3: install python3-yaml (./setup.sh)")

# Config keys in which the ConfigMap may differ from rematd.example.json.
K8S_ONLY = ("allow_remote", "metrics_address", "unix_socket_mode",
            "health_listen")
# The health service names rematd registers (planner/service/daemon.cc):
# "" is the whole server.
HEALTH_SERVICES = ("", "remat.v1.Planner")
FAILURES = []


def fail(message):
    FAILURES.append(message)
    print("FAIL: " + message, flush=True)


def check(condition, message):
    if not condition:
        fail(message)
    return condition


def load_yaml(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def one(docs, kind, path):
    found = [d for d in docs if d.get("kind") == kind]
    if len(found) != 1:
        raise SystemExit(f"FAIL: {path}: expected one {kind}, found {len(found)}")
    return found[0]


def split_host_port(address):
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


def is_loopback(host):
    return host in ("localhost", "::1") or host.startswith("127.")


def container(pod_spec, name):
    for c in pod_spec.get("containers", []):
        if c.get("name") == name:
            return c
    return None


def flag_value(args, flag):
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(flag + "="):
            return a[len(flag) + 1:]
    return None


def mount_at(c, path):
    for m in c.get("volumeMounts", []):
        if m.get("mountPath") == path:
            return m
    return None


def volume(pod_spec, name):
    for v in pod_spec.get("volumes", []):
        if v.get("name") == name:
            return v
    return None


# --- the running daemon -----------------------------------------------------


class Rematd:
    """The real rematd, started with a config file plus overrides."""

    def __init__(self, binary, config_path, tmp, tcp, health_host=None):
        self.tmp = tmp
        self.port_file = os.path.join(tmp, "ports.json")
        self.socket = os.path.join(tmp, "rematd.sock")
        self.log_path = os.path.join(tmp, "rematd.log")
        self.log = open(self.log_path, "w")
        # The config's paths are the node's (/run/rematd, /var/lib/rematd);
        # the test's own stand in for them, and ports are picked free.
        cmd = [binary, "--config", config_path,
               "--unix-socket", self.socket, "--metrics-port", "0",
               "--state-dir", os.path.join(tmp, "state"),
               "--port-file", self.port_file]
        if tcp:
            cmd += ["--listen", "127.0.0.1:0"]
        if health_host is not None:
            # The config's host (0.0.0.0: no --allow-remote or TLS needed),
            # a free port.
            h = f"[{health_host}]" if ":" in health_host else health_host
            cmd += ["--health-listen", f"{h}:0"]
        self.proc = subprocess.Popen(cmd, stdout=self.log,
                                     stderr=subprocess.STDOUT)
        self.ports = None

    def wait_serving(self, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                with open(self.port_file) as f:
                    self.ports = json.load(f)
                return True
            except (OSError, ValueError):
                time.sleep(0.05)
        return False

    def log_text(self):
        self.log.flush()
        with open(self.log_path) as f:
            return f.read()

    def stop(self, timeout=20):
        """SIGTERM, as the kubelet and systemd stop it; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                return None
        self.log.close()
        return self.proc.returncode


def run(cmd, timeout=30):
    try:
        return subprocess.run(cmd, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(cmd, 124, f"timed out after {timeout}s")


SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+\S+")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_exposition(text):
    """{sample name: {label: set(values)}} from Prometheus text, with the
    _bucket/_sum/_count names of every declared histogram and the names of
    declared families that have no sample yet."""
    exported = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(None, 3)
            names = [name]
            if kind.strip() == "histogram":
                names = [name + "_bucket", name + "_sum", name + "_count"]
            elif kind.strip() == "summary":
                names = [name, name + "_sum", name + "_count"]
            for n in names:
                exported.setdefault(n, {})
            continue
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        if not m:
            continue
        labels = exported.setdefault(m.group(1), {})
        for k, v in LABEL.findall(m.group(2) or ""):
            labels.setdefault(k, set()).add(v)
    return exported


# --- the dashboard ----------------------------------------------------------


def dashboard_exprs(node, out):
    if isinstance(node, dict):
        for k, v in node.items():
            if k in ("expr", "definition") and isinstance(v, str):
                out.append(v)
            elif k == "query" and isinstance(v, str):
                out.append(v)
            else:
                dashboard_exprs(v, out)
    elif isinstance(node, list):
        for v in node:
            dashboard_exprs(v, out)
    return out


METRIC_REF = re.compile(r"\b(rematd_[a-zA-Z0-9_]+)\b(\{[^}]*\})?")
MATCHER = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')
GROUPING = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")
# Labels Prometheus attaches when it scrapes, not rematd.
TARGET_LABELS = {"instance", "job"}


def check_dashboard(path, exported):
    with open(path) as f:
        dash = json.load(f)
    exprs = [e for e in dashboard_exprs(dash, []) if "rematd_" in e]
    check(exprs, f"{path}: no query names a rematd metric")
    used = set()
    for expr in exprs:
        families = set()
        for m in METRIC_REF.finditer(expr):
            name, selector = m.group(1), m.group(2) or ""
            used.add(name)
            if not check(name in exported,
                         f"{path}: queries {name}, which rematd does not export "
                         f"(it exports: {', '.join(sorted(exported))})"):
                continue
            labels = exported[name]
            families.add(name)
            for label, op, value in MATCHER.findall(selector):
                if label in TARGET_LABELS:
                    continue
                if not check(label in labels,
                             f"{path}: {name} has no label {label} "
                             f"(labels: {sorted(labels)}) in: {expr}"):
                    continue
                if op == "=":
                    check(value in labels[label],
                          f'{path}: {name}{{{label}="{value}"}} matches nothing '
                          f"rematd exports ({sorted(labels[label])})")
        known = set(TARGET_LABELS)
        for name in families:
            known |= set(exported[name])
        for group in GROUPING.findall(expr):
            for label in (x.strip() for x in group.split(",")):
                if label:
                    check(label in known,
                          f"{path}: groups by {label}, which none of "
                          f"{sorted(families)} has, in: {expr}")
    for needed in ("rematd_requests_total", "rematd_plan_cache_hits_total",
                   "rematd_plan_cache_misses_total",
                   "rematd_plan_latency_seconds_bucket",
                   "rematd_peak_ratio_bucket", "rematd_outcomes_total",
                   "rematd_oom_reports_total", "rematd_outcomes_by_source_total",
                   "rematd_copy_wait_seconds_total", "rematd_wal_bytes"):
        check(needed in used, f"{path}: no panel shows {needed}")


# --- the systemd unit -------------------------------------------------------


def parse_unit(path):
    """[(section, key, value)] of a systemd unit file."""
    entries, section = [], None
    with open(path) as f:
        for raw in f:
            line = raw.strip()
            if not line or line[0] in "#;":
                continue
            if line.startswith("[") and line.endswith("]"):
                section = line[1:-1]
                continue
            key, sep, value = line.partition("=")
            check(sep == "=" and section is not None,
                  f"{path}: not key=value in a section: {line!r}")
            entries.append((section, key.strip(), value.strip()))
    return entries


def check_unit(path, example, rematd, tmp):
    entries = parse_unit(path)
    service = {}
    for section, key, value in entries:
        if section == "Service":
            service.setdefault(key, []).append(value)
    for key, want in (("NoNewPrivileges", "yes"), ("ProtectSystem", "strict"),
                      ("StateDirectory", "rematd"),
                      ("RuntimeDirectory", "rematd")):
        check(service.get(key, [None])[-1] == want,
              f"{path}: [Service] {key}={want} missing (has {service.get(key)})")
    exec_start = service.get("ExecStart", [""])[-1].split()
    config_path = flag_value(exec_start, "--config")
    check(config_path == "/etc/rematd/rematd.json",
          f"{path}: ExecStart has --config {config_path}, README installs "
          "/etc/rematd/rematd.json")
    state = "/var/lib/" + service.get("StateDirectory", ["?"])[-1]
    run_dir = "/run/" + service.get("RuntimeDirectory", ["?"])[-1]
    check(example.get("state_dir") == state,
          f"{path}: StateDirectory is {state}, rematd.example.json's state_dir "
          f"is {example.get('state_dir')}")
    check(os.path.dirname(example.get("unix_socket", "")) == run_dir,
          f"{path}: RuntimeDirectory is {run_dir}, rematd.example.json's "
          f"unix_socket is {example.get('unix_socket')}")

    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        print("note: systemd-analyze not found; unit syntax checked by hand")
        return
    # verify insists that the binaries exist: point them at the real rematd.
    unit_dir = os.path.join(tmp, "unit")
    os.makedirs(unit_dir, exist_ok=True)
    copy = os.path.join(unit_dir, "rematd.service")
    with open(path) as f:
        text = f.read()
    with open(copy, "w") as f:
        f.write(text.replace("/usr/local/bin/rematd", os.path.abspath(rematd)))
    r = run([analyze, "verify", copy], timeout=20)
    print(f"checked: systemd-analyze verify {path}")
    complaints = [l for l in r.stdout.splitlines() if "rematd.service" in l]
    check(not complaints and r.returncode == 0,
          f"{path}: systemd-analyze verify (exit {r.returncode}): "
          + "; ".join(complaints or r.stdout.splitlines()[-3:]))


# --- the manifests ----------------------------------------------------------


def probe_health_command(probe):
    """(address, service) asked by an exec probe that runs `remat health`."""
    cmd = probe.get("exec", {}).get("command", [])
    if len(cmd) < 2 or os.path.basename(cmd[0]) != "remat" or cmd[1] != "health":
        return None
    return flag_value(cmd, "--address"), flag_value(cmd, "--service") or ""


def check_manifests(k8s, config, cm, ds, trainers, netpol):
    """Returns {probe kind: (command or None, service)} for the live checks."""
    listen = config.get("listen", "127.0.0.1:7421")
    listen_port = split_host_port(listen)[1] if listen else None
    health_listen = config.get("health_listen", "")
    health_host, health_port = (split_host_port(health_listen)
                                if health_listen else (None, None))
    metrics_port = config["metrics_port"]
    metrics_address = config.get("metrics_address", "127.0.0.1")
    socket_path = config["unix_socket"]
    if socket_path.startswith("unix:"):
        socket_path = socket_path[len("unix:"):]
    socket_dir = os.path.dirname(socket_path)
    state_dir = config["state_dir"]

    check(metrics_port > 0, f"configmap: metrics_port {metrics_port} is not a "
          "fixed port; the scrape annotation needs one")
    # Prometheus scrapes the pod IP: a loopback metrics server is out of reach.
    check(not is_loopback(metrics_address),
          f"configmap: metrics_address {metrics_address} is loopback; "
          "Prometheus scrapes the pod IP")
    mode = int(config.get("unix_socket_mode", "0660"), 8)
    check(mode & 0o060 == 0o060,
          f"configmap: unix_socket_mode {config.get('unix_socket_mode')} does "
          "not let rematd's group (the trainers) connect")

    namespace = cm["metadata"].get("namespace")
    for doc, what in ((ds, "daemonset"), (netpol, "networkpolicy")):
        check(doc["metadata"].get("namespace") == namespace,
              f"{what}: namespace {doc['metadata'].get('namespace')} is not "
              f"the ConfigMap's {namespace}")

    spec = ds["spec"]["template"]["spec"]
    labels = ds["spec"]["template"]["metadata"].get("labels", {})
    for k, v in ds["spec"]["selector"]["matchLabels"].items():
        check(labels.get(k) == v, f"daemonset: selector {k}={v} does not match "
              "the pod template's labels")
    check(not spec.get("hostNetwork", False),
          "daemonset: hostNetwork: the metrics port and any gRPC probe would "
          "be the node's (see configmap.yaml)")

    rematd = container(spec, "rematd")
    if not check(rematd is not None, "daemonset: no container named rematd"):
        return {}
    args = list(rematd.get("command", [])) + list(rematd.get("args", []))
    config_flag = flag_value(args, "--config")
    config_mount = None
    for m in rematd.get("volumeMounts", []):
        if config_flag and config_flag.startswith(m["mountPath"].rstrip("/") + "/"):
            config_mount = m
    if check(config_mount is not None,
             f"daemonset: --config {config_flag} is under no volume mount"):
        v = volume(spec, config_mount["name"]) or {}
        cmv = v.get("configMap", {})
        check(cmv.get("name") == cm["metadata"]["name"],
              f"daemonset: --config's volume is not ConfigMap "
              f"{cm['metadata']['name']}")
        rel = config_flag[len(config_mount["mountPath"].rstrip("/")) + 1:]
        items = {i["path"]: i["key"] for i in cmv.get("items", [])}
        key = items.get(rel, rel if not items else None)
        check(key in cm.get("data", {}),
              f"daemonset: --config {config_flag} is key {key} of the "
              f"ConfigMap, which has {sorted(cm.get('data', {}))}")

    ports = {p.get("containerPort"): p for p in rematd.get("ports", [])}
    check(metrics_port in ports,
          f"daemonset: rematd does not declare containerPort {metrics_port} "
          f"(metrics_port); it declares {sorted(ports)}")
    if listen_port is not None:
        check(listen_port in ports,
              f"daemonset: rematd does not declare containerPort {listen_port} "
              f"(listen {listen})")
    if health_port is not None:
        check(health_port > 0,
              f"configmap: health_listen {health_listen} is not a fixed port; "
              "the gRPC probes need one")
        check(health_port in ports,
              f"daemonset: rematd does not declare containerPort {health_port} "
              f"(health_listen {health_listen})")
        # Kubelet dials the pod IP.
        check(not is_loopback(health_host),
              f"configmap: health_listen {health_listen} is loopback; kubelet's "
              "gRPC probes dial the pod IP")

    probes = {}
    for kind in ("startupProbe", "livenessProbe", "readinessProbe"):
        probe = rematd.get(kind)
        if not check(probe is not None, f"daemonset: rematd has no {kind}"):
            continue
        if "grpc" in probe:
            # Kubelet dials in plaintext, which only the health listener
            # answers on a non-loopback address (a remote listen needs TLS).
            g = probe["grpc"]
            check(health_port is not None and g.get("port") == health_port,
                  f"daemonset: {kind} is a gRPC probe on port {g.get('port')}, "
                  f"but health_listen is {health_listen!r}: kubelet dials the "
                  "pod IP in plaintext, which only the health listener answers")
            service = g.get("service", "")
            check(service in HEALTH_SERVICES,
                  f"daemonset: {kind} asks for service {service!r}; rematd "
                  f"registers {list(HEALTH_SERVICES)}")
            probes[kind] = (None, service, probe.get("timeoutSeconds", 1))
            continue
        asked = probe_health_command(probe)
        if not check(asked is not None,
                     f"daemonset: {kind} is neither a gRPC probe nor "
                     "`remat health`"):
            continue
        address, service = asked
        check(address == "unix:" + socket_path,
              f"daemonset: {kind} asks {address}, rematd's socket is "
              f"unix:{socket_path}")
        check(service in HEALTH_SERVICES,
              f"daemonset: {kind} asks for service {service!r}; rematd "
              f"registers {list(HEALTH_SERVICES)}")
        probes[kind] = (probe["exec"]["command"], service, None)
    check(probes.get("readinessProbe", (None, None))[1] == "remat.v1.Planner",
          "daemonset: readiness should ask for remat.v1.Planner, got "
          f"{probes.get('readinessProbe', (None, None))[1]!r}")
    for kind in ("startupProbe", "livenessProbe"):
        check(probes.get(kind, (None, None))[1] == "",
              f"daemonset: {kind} should ask for the whole server (\"\"), got "
              f"{probes.get(kind, (None, None))[1]!r}")

    for path, what in ((state_dir, "state_dir"), (socket_dir, "unix_socket's directory")):
        m = mount_at(rematd, path)
        if check(m is not None, f"daemonset: {what} {path} is not mounted in rematd"):
            v = volume(spec, m["name"]) or {}
            check("hostPath" in v, f"daemonset: {what} {path} is not a hostPath")
    run_mount = mount_at(rematd, socket_dir)
    run_volume = volume(spec, run_mount["name"]) if run_mount else None
    host_socket_dir = (run_volume or {}).get("hostPath", {}).get("path")

    grace = config.get("grace_seconds", 5)
    check(spec.get("terminationGracePeriodSeconds", 30) > grace,
          f"daemonset: terminationGracePeriodSeconds is not above grace_seconds {grace}")

    annotations = ds["spec"]["template"]["metadata"].get("annotations", {})
    check(annotations.get("prometheus.io/scrape") == "true",
          "daemonset: prometheus.io/scrape is not \"true\"")
    check(annotations.get("prometheus.io/port") == str(metrics_port),
          f"daemonset: prometheus.io/port {annotations.get('prometheus.io/port')} "
          f"is not metrics_port {metrics_port}")
    check(annotations.get("prometheus.io/path") == "/metrics",
          "daemonset: prometheus.io/path is not /metrics")

    for c in spec.get("initContainers", []) + spec.get("containers", []):
        res = c.get("resources", {})
        for part in ("requests", "limits"):
            for r in ("cpu", "memory"):
                check(r in res.get(part, {}),
                      f"daemonset: container {c.get('name')} has no {part}.{r}")

    # NetworkPolicy: admits the metrics port, not the gRPC port.
    sel = netpol["spec"]["podSelector"].get("matchLabels", {})
    check(sel and all(labels.get(k) == v for k, v in sel.items()),
          "networkpolicy: does not select rematd's pods")
    open_ports = [p.get("port") for rule in netpol["spec"].get("ingress", [])
                  for p in rule.get("ports", [])]
    check(metrics_port in open_ports,
          f"networkpolicy: metrics port {metrics_port} is not admitted")
    if listen_port is not None:
        check(listen_port not in open_ports,
              f"networkpolicy: admits the gRPC port {listen_port} to other pods")

    # Profiles rematd imports at start: a read-only mount.
    imported = flag_value(args, "--import")
    if imported is not None:
        m = mount_at(rematd, imported)
        if check(m is not None,
                 f"daemonset: --import {imported} is not mounted in rematd"):
            check(m.get("readOnly") is True,
                  f"daemonset: --import {imported} is mounted writable")

    # The example trainers: a pod, and a job's pod per GPU.
    group = (rematd.get("securityContext") or {}).get("runAsGroup")
    for what, tspec in trainers:
        train = tspec["containers"][0]
        env = {e["name"]: e.get("value") for e in train.get("env", [])}
        check(env.get("REMAT_ADDRESS") == "unix:" + socket_path,
              f"{what}: REMAT_ADDRESS {env.get('REMAT_ADDRESS')} is not "
              f"unix:{socket_path}")
        targs = list(train.get("command", [])) + list(train.get("args", []))
        check(flag_value(targs, "--planner") == "$(REMAT_ADDRESS)",
              f"{what}: the trainer is not given --planner $(REMAT_ADDRESS)")
        tm = mount_at(train, socket_dir)
        if check(tm is not None, f"{what}: {socket_dir} is not mounted"):
            tv = volume(tspec, tm["name"]) or {}
            check(tv.get("hostPath", {}).get("path") == host_socket_dir,
                  f"{what}: mounts host {tv.get('hostPath', {}).get('path')}, "
                  f"rematd's socket directory is host {host_socket_dir}")
        check(group is not None
              and group in tspec.get("securityContext", {}).get(
                  "supplementalGroups", []),
              f"{what}: not in rematd's group {group}, which the socket's "
              "mode lets connect")

    with open(os.path.join(k8s, "kustomization.yaml")) as f:
        kust = yaml.safe_load(f)
    for r in kust.get("resources", []):
        check(os.path.exists(os.path.join(k8s, r)),
              f"kustomization: {r} does not exist")
    return probes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=".")
    ap.add_argument("--rematd", default="planner/service/rematd")
    ap.add_argument("--remat", default="client/remat")
    a = ap.parse_args()
    deploy = os.path.join(a.root, "deploy")
    k8s = os.path.join(deploy, "k8s")

    cm = one(load_yaml(os.path.join(k8s, "configmap.yaml")), "ConfigMap", "configmap.yaml")
    ds = one(load_yaml(os.path.join(k8s, "daemonset.yaml")), "DaemonSet", "daemonset.yaml")
    trainer = one(load_yaml(os.path.join(k8s, "trainer-pod.yaml")), "Pod", "trainer-pod.yaml")
    job = one(load_yaml(os.path.join(k8s, "trainer-job.yaml")), "Job", "trainer-job.yaml")
    trainers = [("trainer-pod", trainer["spec"]),
                ("trainer-job", job["spec"]["template"]["spec"])]
    netpol = one(load_yaml(os.path.join(k8s, "networkpolicy.yaml")),
                 "NetworkPolicy", "networkpolicy.yaml")
    config_text = cm["data"]["rematd.json"]
    config = json.loads(config_text)
    with open(os.path.join(deploy, "rematd.example.json")) as f:
        example = json.load(f)

    # The Kubernetes config is the example config plus what Kubernetes needs
    # (see configmap.yaml).
    for key in sorted(set(config) | set(example)):
        if key in K8S_ONLY:
            continue
        check(config.get(key) == example.get(key),
              f"configmap: {key} is {config.get(key)!r}, rematd.example.json "
              f"has {example.get(key)!r}")

    probes = check_manifests(k8s, config, cm, ds, trainers, netpol) or {}

    tmp = tempfile.mkdtemp(prefix="remat-manifests.", dir="/tmp")  # short: socket path
    daemon = None
    try:
        config_path = os.path.join(tmp, "rematd.json")
        with open(config_path, "w") as f:
            f.write(config_text)
        r = run([a.rematd, "--validate-config", "--config", config_path])
        check(r.returncode == 0,
              f"rematd --validate-config rejects the ConfigMap's config "
              f"(exit {r.returncode}): {r.stdout.strip()}")

        check_unit(os.path.join(deploy, "rematd.service"), example, a.rematd, tmp)

        health_listen = config.get("health_listen", "")
        daemon = Rematd(a.rematd, config_path, tmp, bool(config.get("listen")),
                        split_host_port(health_listen)[0] if health_listen else None)
        if not daemon.wait_serving():
            fail("rematd did not start with the ConfigMap's config:\n"
                 + daemon.log_text())
            return
        health_port = daemon.ports.get("health_port", 0)
        if health_listen:
            check(health_port > 0,
                  f"rematd's port file names no health port: {daemon.ports}")
            check("health_listening" in daemon.log_text(),
                  "rematd logged no health_listening line")
            # The probes' port exposes no Planner.
            r = run([a.remat, "models", "--address", f"127.0.0.1:{health_port}"])
            check(r.returncode != 0 and "UNIMPLEMENTED" in r.stdout.upper(),
                  f"remat models on the health port {health_port} did not fail "
                  f"UNIMPLEMENTED: exit {r.returncode}: {r.stdout.strip()}")
        for kind, (command, service, timeout_s) in sorted(probes.items()):
            if command is None:  # a gRPC probe: ask the health listener
                cmd = [a.remat, "health", "--address",
                       f"127.0.0.1:{health_port}", "--service", service,
                       "--timeout-ms", str(int(timeout_s * 1000))]
            else:  # the probe's own command, on the test's socket
                cmd = [a.remat] + list(command[1:])
                cmd[cmd.index("--address") + 1] = "unix:" + daemon.socket
            r = run(cmd)
            check(r.returncode == 0,
                  f"daemonset: {kind} (service {service!r}) does not pass "
                  f"against rematd: exit {r.returncode}: {r.stdout.strip()}")
        # The address the trainer is given, over the daemon's socket.
        r = run([a.remat, "health", "--address", "unix:" + daemon.socket])
        check(r.returncode == 0, f"remat health over the unix socket: {r.stdout.strip()}")
        # One request, so that requests_total has its labels.
        r = run([a.remat, "models", "--address", "unix:" + daemon.socket])
        check(r.returncode == 0, f"remat models: {r.stdout.strip()}")

        url = f"http://127.0.0.1:{daemon.ports['metrics_port']}/metrics"
        with urllib.request.urlopen(url, timeout=10) as resp:
            exported = parse_exposition(resp.read().decode())
        check(len(exported) > 5, f"{url}: only {sorted(exported)}")
        check_dashboard(os.path.join(deploy, "grafana", "rematd.json"), exported)
        print(f"checked: {len(probes)} probes against rematd, dashboard "
              f"queries against {len(exported)} exported series names")

        code = daemon.stop()
        daemon = None
        check(code == 0, f"rematd exited {code} after SIGTERM (want 0)")
    finally:
        if daemon is not None:
            daemon.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # a malformed manifest is a failure, not a crash
        fail(f"{type(e).__name__}: {e}")
        raise
    finally:
        print(f"manifests_test: {len(FAILURES)} failure(s)")
    sys.exit(1 if FAILURES else 0)
