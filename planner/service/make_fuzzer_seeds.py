#!/usr/bin/env python3
"""Writes the seed corpora of wal_fuzzer and service_fuzzer.

Messages are written in protobuf's text format and encoded with the system
protoc (--encode), so this needs no Python protobuf package. Run from the
repository root:  python3 planner/service/make_fuzzer_seeds.py
Existing seeds (crash regressions among them) are left alone; these files
are overwritten.
"""
import os
import struct
import subprocess

WAL_DIR = "planner/service/wal_fuzzer_corpus"
SERVICE_DIR = "planner/service/service_fuzzer_corpus"
SEPARATOR = b"--rec--"

# RPC selectors of service_fuzzer.cc.
REGISTER, SAMPLES, PLAN, OUTCOME, EXPLAIN, STATE, LIST = range(7)
MESSAGES = {
    REGISTER: "RegisterModelRequest",
    SAMPLES: "ReportSamplesRequest",
    PLAN: "GetPlanRequest",
    OUTCOME: "ReportOutcomeRequest",
    EXPLAIN: "ExplainPlanRequest",
    STATE: "GetModelStateRequest",
    LIST: "ListModelsRequest",
}


def encode(message, text):
    return subprocess.run(
        ["protoc", "-I.", "--encode=remat.v1." + message, "proto/wal.proto"],
        input=text.encode(), stdout=subprocess.PIPE, check=True).stdout


MODEL = """name: "bert" feature_names: "batch" feature_names: "seq"
blocks { name: "emb" checkpointable: false }
blocks { name: "l0" checkpointable: true }
blocks { name: "l1" checkpointable: true }
blocks { name: "head" checkpointable: true }"""


def sample(batch, seq, peak=True):
    blocks = "".join(
        "blocks { act_bytes: %d input_bytes: %d forward_ns: %d }" %
        (batch * seq * 1000 * (i + 1), batch * seq * 10, 100000 * (i + 1))
        for i in range(4))
    extra = " base_bytes: 1000000"
    if peak:
        extra += " peak_bytes: %d" % (batch * seq * 12000 + 1000000)
    return ('samples { features { key: "batch" value: %d } '
            'features { key: "seq" value: %d } %s%s }' %
            (batch, seq, blocks, extra))


def samples_request(pairs, model="bert"):
    return 'model: "%s" %s' % (model, " ".join(sample(b, s) for b, s in pairs))


PAIRS = [(8, s) for s in (32, 64, 96, 128, 160, 192, 256, 320, 384, 512)]
FEATURES = 'features { key: "batch" value: 8 } features { key: "seq" value: %d }'


def plan(seq, budget, solver="", reasons=False):
    return 'model: "bert" %s budget_bytes: %d solver: "%s" include_reasons: %s' % (
        FEATURES % seq, budget, solver, "true" if reasons else "false")


def outcome(seq, peak, oom=False):
    return ('model: "bert" %s actions: KEEP actions: RECOMPUTE actions: KEEP '
            'actions: RECOMPUTE measured_peak_bytes: %d step_ns: 1000000 '
            'out_of_memory: %s predicted_peak_bytes: %d' %
            (FEATURES % seq, peak, "true" if oom else "false", peak))


def calls(*items):
    out = b""
    for selector, text in items:
        payload = encode(MESSAGES[selector], text)
        out += bytes([selector]) + struct.pack("<H", len(payload)) + payload
    return out


def write(directory, name, data):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, name), "wb") as f:
        f.write(data)


def wal_records(*records):
    return [encode("WalRecord", r) for r in records]


def main():
    reg = "register_model { %s }" % MODEL
    smp = "samples { %s }" % samples_request(PAIRS)
    out = "outcome { %s }" % outcome(256, 90000000)
    oom = "outcome { %s }" % outcome(512, 200000000, oom=True)
    tally = 'outcome_tally { model: "bert" outcomes: 5 out_of_memory: 2 }'
    other = ('register_model { name: "vit" feature_names: "image_size" '
             'blocks { name: "b0" checkpointable: true } }')
    one = 'samples { model: "vit" samples { features { key: "image_size" value: 224 } blocks { act_bytes: 5 input_bytes: 1 forward_ns: 2 } } }'
    # Mode 1: payloads framed by the fuzzer; 3: last piece an unframed tail;
    # 0: the raw file.
    full = wal_records(reg, smp, out, oom, tally, other, one)
    write(WAL_DIR, "framed_full", b"\x01" + SEPARATOR.join(full))
    write(WAL_DIR, "framed_outcomes_first",
          b"\x01" + SEPARATOR.join(wal_records(out, tally, reg, out, smp)))
    write(WAL_DIR, "framed_torn_tail",
          b"\x03" + SEPARATOR.join(full[:3] + [b"\x10\x00\x00\x00garbage"]))
    write(WAL_DIR, "framed_empty_payloads", b"\x01" + SEPARATOR * 3)
    raw = b"RMTWAL01"
    for p in full[:2]:
        raw += struct.pack("<I", len(p)) + b"\0\0\0\0" + p  # bad checksums
    write(WAL_DIR, "raw_bad_checksum", b"\x00" + raw)
    write(WAL_DIR, "raw_bad_magic", b"\x00" + b"NOTAWAL!" + b"\0" * 8)
    write(WAL_DIR, "raw_torn_magic", b"\x00" + b"RMTWA")
    write(WAL_DIR, "raw_huge_length", b"\x00RMTWAL01\xff\xff\xff\xff\0\0\0\0")

    collected = calls(
        (REGISTER, MODEL.join(["model { ", " }"])),
        (SAMPLES, samples_request(PAIRS[:5])),
        (SAMPLES, samples_request(PAIRS[5:])),
        (PLAN, plan(200, 400000000)),
        (PLAN, plan(200, 400000000)),
        (PLAN, plan(512, 60000000, reasons=True)),
        (PLAN, plan(100, 1)),
        (EXPLAIN, plan(300, 50000000).replace(" include_reasons: false", "")),
        (OUTCOME, outcome(200, 90000000)),
        (OUTCOME, outcome(512, 300000000, oom=True)),
        (STATE, 'model: "bert"'),
        (LIST, ""),
    )
    write(SERVICE_DIR, "plan_after_samples", collected)
    solvers = [(PLAN, plan(256, 200000000, solver=s))
               for s in ("exact", "none", "all", "sqrt", "static_max",
                         "mimose_greedy", "nope")]
    write(SERVICE_DIR, "every_solver",
          calls((REGISTER, MODEL.join(["model { ", " }"])),
                (SAMPLES, samples_request(PAIRS)), *solvers))
    write(SERVICE_DIR, "collect_first",
          calls((REGISTER, MODEL.join(["model { ", " }"])),
                (PLAN, plan(128, 400000000)),
                (EXPLAIN, plan(128, 400000000).replace(" include_reasons: false", "")),
                (SAMPLES, samples_request(PAIRS[:1])),
                (PLAN, plan(128, 400000000))))
    write(SERVICE_DIR, "rejections",
          calls((REGISTER, 'model { name: "" }'),
                (REGISTER, MODEL.join(["model { ", " }"])),
                (REGISTER, 'model { name: "bert" feature_names: "x" blocks { name: "a" } }'),
                (SAMPLES, 'model: "bert"'),
                (SAMPLES, samples_request(PAIRS[:1], model="nope")),
                (SAMPLES, 'model: "bert" samples { features { key: "batch" value: -1 } }'),
                (PLAN, 'model: "bert" budget_bytes: 0'),
                (PLAN, 'model: "bert" features { key: "seq" value: 1 } budget_bytes: 5'),
                (OUTCOME, 'model: "bert" measured_peak_bytes: -1'),
                (OUTCOME, 'model: "bert" actions: OFFLOAD'),
                (STATE, 'model: "nope"')))
    write(SERVICE_DIR, "two_models",
          calls((REGISTER, MODEL.join(["model { ", " }"])),
                (REGISTER, 'model { name: "vit" feature_names: "image_size" blocks { name: "b0" checkpointable: true } blocks { name: "b1" checkpointable: true } }'),
                (SAMPLES, 'model: "vit" samples { features { key: "image_size" value: 224 } blocks { act_bytes: 5000 input_bytes: 100 forward_ns: 2 } blocks { act_bytes: 7000 input_bytes: 100 forward_ns: 3 } base_bytes: 10 peak_bytes: 12345 }'),
                (PLAN, 'model: "vit" features { key: "image_size" value: 224 } budget_bytes: 9000'),
                (LIST, "")))


if __name__ == "__main__":
    main()
