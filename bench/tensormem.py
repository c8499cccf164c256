#!/usr/bin/python3
"""Memory held for tensors that are overwritten again and again, against
Redis holding the same bytes as strings, measured in the same run
(docs/BENCHMARKS.md, "Tensor memory"). `make bench-mem` runs it.

    /usr/bin/python3 bench/tensormem.py [--keys N] [--size BYTES] [--rounds R] [--doc docs/BENCHMARKS.md]

Each server is a fresh process (snapshots off). One redis-py client writes
N keys of SIZE random bytes (default 256 x 4 MiB = 1.07 GB), pipelined,
then writes all of them again, R rounds in all (default 5): Redis with SET,
EnclaveAI with AI.TENSORSET key UINT8 SIZE BLOB. After each round the
server's RSS is read; the figures are its peak growth over its RSS before
the first write (VmHWM, reset just before), its growth after the last
round, both over the data held (N x SIZE), and the time for all rounds.

EnclaveAI runs four ways: as it starts by default (its sealed append-only
log on, appendfsync everysec); with --appendonly no, like with like against
Redis, which runs without its AOF, so that the figure is the collector's
alone (server/gc.go: GOGC off, a memory limit that follows the live heap);
and, without the log too, under GOGC=400 and GOGC=100 in its environment
(which the server then keeps), to show what that policy buys.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "redis_tests"))
import redis  # noqa: E402
from harness import free_port, poll, proc_status, reset_peak  # noqa: E402
from benchdoc import publish  # noqa: E402

SERVER = os.environ.get("ENCLAVEAI_SERVER") or os.path.join(REPO, "bin", "enclaveai-server")
COMMAND = "make bench-mem"


def measure(name, argv, env, keys, size, rounds):
    port = free_port()
    scratch = tempfile.mkdtemp(prefix="enclaveai-bench-mem-")
    full_env = {k: v for k, v in os.environ.items() if k != "GOGC"}
    full_env.update(env)
    p = subprocess.Popen(argv + ["--port", str(port), "--dir", scratch], env=full_env,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    r = redis.Redis(port=port)
    try:
        def ready():
            try:
                return r.ping()
            except redis.ConnectionError:
                return False
        poll(ready, timeout=30, what=name)
        blob = os.urandom(size)
        before = proc_status(p.pid, "VmRSS")
        reset_peak(p.pid)
        t0 = time.perf_counter()
        per_round = []
        for _ in range(rounds):
            pipe = r.pipeline(transaction=False)
            for i in range(keys):
                if name == "redis":
                    pipe.set("t%d" % i, blob)
                else:
                    pipe.execute_command("AI.TENSORSET", "t%d" % i, "UINT8", size, "BLOB", blob)
            assert all(x in (True, b"OK") for x in pipe.execute())
            per_round.append(proc_status(p.pid, "VmRSS") - before)
        secs = time.perf_counter() - t0
        assert r.dbsize() == keys
        peak = proc_status(p.pid, "VmHWM") - before
        return {"peak": peak, "after": per_round[-1], "rounds": per_round, "seconds": secs}
    finally:
        r.close()
        p.terminate()
        p.wait(30)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keys", type=int, default=256)
    ap.add_argument("--size", type=int, default=4 << 20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--doc")
    args = ap.parse_args()
    data = args.keys * args.size
    load_before = open("/proc/loadavg").read().split()[:3]
    ways = [
        ("redis", ["redis-server", "--save", "", "--appendonly", "no"], {}),
        ("EnclaveAI (default)", [SERVER, "--save", ""], {}),
        ("EnclaveAI, no log", [SERVER, "--save", "", "--appendonly", "no"], {}),
        ("EnclaveAI, no log, GOGC=400", [SERVER, "--save", "", "--appendonly", "no"], {"GOGC": "400"}),
        ("EnclaveAI, no log, GOGC=100", [SERVER, "--save", "", "--appendonly", "no"], {"GOGC": "100"}),
    ]
    res = []
    for name, argv, env in ways:
        m = measure(name, argv, env, args.keys, args.size, args.rounds)
        print("%-22s peak %.2fx, after %.2fx the data, %.1f s; per round: %s" % (
            name, m["peak"] / data, m["after"] / data, m["seconds"],
            " ".join("%.2f" % (x / data) for x in m["rounds"])), flush=True)
        res.append((name, m))
    load_after = open("/proc/loadavg").read().split()[:3]
    lines = [
        "## Tensor memory: overwritten tensors against Redis",
        "",
        "`%s` (bench/tensormem.py; its docstring has the details), %s UTC." % (
            COMMAND, time.strftime("%Y-%m-%d %H:%M", time.gmtime())),
        "%d keys of %d random bytes (%.2f GB) written %d times by one pipelined redis-py client:" % (
            args.keys, args.size, data / 1e9, args.rounds),
        "Redis with SET, EnclaveAI with AI.TENSORSET key UINT8 %d BLOB. RSS growth over the server's RSS" % args.size,
        "before the first write, over the data held. Load average before %s, after %s." % (
            " ".join(load_before), " ".join(load_after)),
        "",
        "| server | peak RSS growth / data | after the last round / data | seconds for all rounds |",
        "|---|---:|---:|---:|",
    ]
    for name, m in res:
        lines.append("| %s | %.2f | %.2f | %.1f |" % (name, m["peak"] / data, m["after"] / data, m["seconds"]))
    red, dflt, nolog = res[0][1], res[1][1], res[2][1]
    lines += [
        "",
        "EnclaveAI without its log against Redis without its AOF: peak RSS growth %.2fx Redis's, time %.2fx"
        " Redis's. With its log (the default): %.2fx and %.2fx." % (
            nolog["peak"] / red["peak"], nolog["seconds"] / red["seconds"],
            dflt["peak"] / red["peak"], dflt["seconds"] / red["seconds"]),
        "",
        "EnclaveAI's collector runs with GOGC off and a memory limit, set again after every collection,",
        "that lets the heap gather max(32 MiB, 25% of the live heap) of garbage (server/gc.go). With the",
        "log on, the peak is the log's automatic rewrite (auto-aof-rewrite-percentage): the base it writes",
        "holds the tensors as they were when it began while the rounds overwrite them, up to twice the",
        "data, as a forked Redis's copy-on-write pages can under BGREWRITEAOF. With",
        "--auto-aof-rewrite-percentage 0 the same run peaked at 1.21x (2026-12-04 12:58 UTC, by hand).",
        "",
    ]
    publish(lines, args.doc, "Tensor memory")


if __name__ == "__main__":
    main()
