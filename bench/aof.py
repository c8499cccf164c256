#!/usr/bin/python3
"""What the append-only log costs (docs/BENCHMARKS.md, "Append-only log";
docs/DURABILITY.md). `make bench-aof` runs it.

    /usr/bin/python3 bench/aof.py [--size BYTES] [--runs N] [--requests N] [--doc docs/BENCHMARKS.md]

  1. A huge model's time to OK (first byte sent to the reply) with
     `--appendonly no` against the default `--appendonly yes --appendfsync
     everysec`: the model of bench/huge.py (default 1.3 GB, three chunks),
     each run a fresh server on a fresh directory, the two alternating.
  2. Small-tensor write throughput: redis-benchmark -c 50 -P 16
     AI.TENSORSET of a 3136-byte FLOAT tensor (bench/run.sh's core
     command), log off, everysec and always, interleaved per round; and,
     in the same rounds, what Redis's own append-only file costs on the
     same benchmark (SET of 3136 bytes, `--appendonly no` against
     `--appendonly yes --appendfsync everysec`): the reference for what a
     log can keep of the throughput on this machine.

Medians of --runs rounds, with every run's figure. Wrap in
`flock /tmp/enclaveai-bench.lock` on a shared machine.
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import huge  # noqa: E402
from huge import Proc, SERVER, huge_model, upload  # noqa: E402
from benchdoc import publish  # noqa: E402

COMMAND = "make bench-aof"
VALUE = "x" * 3136


def upload_time(scratch, chunks, size, flags):
    pr = Proc([SERVER, "--save", ""] + flags, scratch)
    try:
        c, reply, m = upload(pr, ["AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB"], chunks, size)
        assert reply == "OK", reply
        c.close()
        return m["seconds"]
    finally:
        pr.stop()
        shutil.rmtree(pr.dir, ignore_errors=True)


def tensorset_rps(scratch, flags, requests):
    return benchmark_rps([SERVER, "--save", ""] + flags, scratch, requests,
                         ["AI.TENSORSET", "t", "FLOAT", "784", "BLOB", VALUE])


def benchmark_rps(argv, scratch, requests, command):
    pr = Proc(argv, scratch)
    try:
        out = subprocess.run(["redis-benchmark", "-h", "127.0.0.1", "-p", str(pr.port), "-n", str(requests),
                              "-c", "50", "-P", "16", "-q"] + command,
                             capture_output=True, text=True, timeout=600).stdout
        m = re.findall(r"([\d.]+) requests per second", out)
        assert m, out
        return float(m[-1])
    finally:
        pr.stop()
        shutil.rmtree(pr.dir, ignore_errors=True)


MODES = {"off": ["--appendonly", "no"], "everysec": ["--appendfsync", "everysec"],
         "always": ["--appendfsync", "always"]}
REDIS_MODES = {"off": ["--appendonly", "no"], "everysec": ["--appendonly", "yes", "--appendfsync", "everysec"]}


def redis_set_rps(scratch, flags, requests):
    return benchmark_rps(["redis-server", "--save", ""] + flags, scratch, requests, ["SET", "t", VALUE])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=int(os.environ.get("BENCH_HUGE_SIZE", 1_300_000_000)))
    ap.add_argument("--runs", type=int, default=int(os.environ.get("BENCH_AOF_RUNS", 3)))
    ap.add_argument("--requests", type=int, default=int(os.environ.get("BENCH_AOF_REQUESTS", 300000)))
    ap.add_argument("--doc")
    args = ap.parse_args()
    scratch = tempfile.mkdtemp(prefix="enclaveai-bench-aof-")
    load_before = huge.uptime()
    rps = {k: [] for k in MODES}
    redis_rps = {k: [] for k in REDIS_MODES}
    for i in range(args.runs):
        for mode in (MODES if i % 2 == 0 else reversed(list(MODES))):
            rps[mode].append(tensorset_rps(scratch, MODES[mode], args.requests))
            print("tensorset %s: %.0f ops/s" % (mode, rps[mode][-1]), flush=True)
        for mode in (REDIS_MODES if i % 2 == 0 else reversed(list(REDIS_MODES))):
            redis_rps[mode].append(redis_set_rps(scratch, REDIS_MODES[mode], args.requests))
            print("redis set %s: %.0f ops/s" % (mode, redis_rps[mode][-1]), flush=True)
    model = huge_model.build(args.size)
    size = len(model.data)
    chunks = [memoryview(model.data)[i:i + huge.CHUNK] for i in range(0, size, huge.CHUNK)]
    up = {"off": [], "everysec": []}
    for i in range(args.runs):
        for mode in (("off", "everysec") if i % 2 == 0 else ("everysec", "off")):
            up[mode].append(upload_time(scratch, chunks, size, MODES[mode]))
            print("upload %s: %.2f s" % (mode, up[mode][-1]), flush=True)
    shutil.rmtree(scratch, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in rps.items()}
    rmed = {k: statistics.median(v) for k, v in redis_rps.items()}
    umed = {k: statistics.median(v) for k, v in up.items()}
    lines = []
    add = lines.append
    add("## Append-only log: what durability costs")
    add("")
    add("`%s` (bench/aof.py; `BENCH_HUGE_SIZE`, `BENCH_AOF_RUNS`, `BENCH_AOF_REQUESTS`), %d rounds, medians."
        % (COMMAND, args.runs))
    add("Machine: %s. Load before: `%s`; after: `%s`." % (huge.machine(), load_before, huge.uptime()))
    add("")
    add("| measure | log off | appendfsync everysec (default) | always |")
    add("|---|---:|---:|---:|")
    add("| AI.TENSORSET 3136 B, redis-benchmark -c 50 -P 16 (ops/s) | %.0f | %.0f (%.2fx) | %.0f (%.2fx) |"
        % (med["off"], med["everysec"], med["everysec"] / med["off"], med["always"], med["always"] / med["off"]))
    add("| Redis SET 3136 B, same benchmark, `--appendonly yes` (ops/s) | %.0f | %.0f (%.2fx) | |"
        % (rmed["off"], rmed["everysec"], rmed["everysec"] / rmed["off"]))
    add("| %.2f GB model, AI.MODELSTORE in %d chunks: time to OK (s) | %.2f | %.2f (%.2fx) | |"
        % (size / 1e9, len(chunks), umed["off"], umed["everysec"], umed["everysec"] / umed["off"]))
    add("")
    add("Targets: throughput with everysec >= 0.8x the log off; time to OK of the huge upload <= 1.3x.")
    add("Every run: TENSORSET off %s; everysec %s; always %s (ops/s). Redis SET off %s; everysec %s (ops/s)."
        " Upload off %s; everysec %s (s)." % (
            ", ".join("%.0f" % x for x in rps["off"]), ", ".join("%.0f" % x for x in rps["everysec"]),
            ", ".join("%.0f" % x for x in rps["always"]), ", ".join("%.0f" % x for x in redis_rps["off"]),
            ", ".join("%.0f" % x for x in redis_rps["everysec"]), ", ".join("%.2f" % x for x in up["off"]),
            ", ".join("%.2f" % x for x in up["everysec"])))
    add("Met: TENSORSET everysec %s (%.2fx), huge upload %s (%.2fx)." % (
        "yes" if med["everysec"] / med["off"] >= 0.8 else "NO", med["everysec"] / med["off"],
        "yes" if umed["everysec"] / umed["off"] <= 1.3 else "NO", umed["everysec"] / umed["off"]))
    add("With the log on, a large upload's sealed model file (AES-256-GCM, 4 MiB frames) is written as the")
    add("chunks arrive, on a goroutine of its own, into a file named by a random id: the OK waits for the")
    add("file's tail, not for the model's SHA-256, which the model computes afterwards as it does with the")
    add("log off. Every byte still goes through AES-GCM and into the file (direct I/O where the file system")
    add("takes it) before the OK, which is what makes the model survive kill -9. Why the TENSORSET target")
    add("is out of reach on this machine: docs/DURABILITY.md, Costs. Each TENSORSET's record is sealed and")
    add("written (one write(2) for every client's records queued meanwhile) before its reply; under always")
    add("it is also fsynced, one fsync per group. The load average above is that of a machine shared with")
    add("other builds and benchmarks: compare the runs of one round, not rounds.")
    publish(lines, args.doc, "Append-only log")


if __name__ == "__main__":
    main()
