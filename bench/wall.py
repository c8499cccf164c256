#!/usr/bin/python3
"""The engine wall's costs for a huge model (docs/ENGINE_ISOLATION.md,
docs/BENCHMARKS.md "Engine wall"). `make bench-wall` runs it.

    /usr/bin/python3 bench/wall.py [--size BYTES] [--runs N]

For --runs rounds (default 2), with the wall on (engine-isolation
per-tenant, the default) and off (ONNX Runtime in the server process),
in alternating order, a fresh server gets the --size model (default
1.3 GB, redis_tests/models/huge_model.py, three chunks) by AI.MODELSTORE:

  - seconds from the first byte sent to OK (the session made, runnable);
  - peak memory: the server's VmHWM growth, the worker's VmHWM, and their
    sum less the worker's RssShmem (the model's pages the worker maps are
    the server's memfd, counted in both VmHWMs), as a multiple of the model;
  - with the wall on, the worker is then killed with SIGKILL and the time
    from the kill to the next successful AI.MODELEXECUTE is taken (a new
    worker started and the session recreated from the shared buffer, no
    re-upload), with the server's own figure (INFO
    engine_worker_last_restart_us: from the death to the session made).

The server is $ENCLAVEAI_SERVER, else bin/enclaveai-server. Run under
`flock /tmp/enclaveai-bench.lock` on a shared machine.
"""

import argparse
import os
import signal
import statistics
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "bench"))
sys.path.insert(0, os.path.join(REPO, "redis_tests", "models"))
sys.path.insert(0, os.path.join(REPO, "redis_tests"))
import huge_model  # noqa: E402
from harness import poll, proc_status, reset_peak  # noqa: E402
from huge import Proc, check_model, send_command, SERVER  # noqa: E402


def children(pid):
    kids = []
    for tid in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/children" % (pid, tid)) as f:
            kids += [int(k) for k in f.read().split()]
    return kids


def info_field(c, name):
    text = c.cmd("INFO", "engine")
    text = text.decode() if isinstance(text, bytes) else str(text)
    for line in text.splitlines():
        if line.startswith(name + ":"):
            return int(line.split(":", 1)[1])
    return None


def one(scratch, chunks, size, model, wall):
    args = [SERVER, "--save", ""] + ([] if wall else ["--engine-isolation", "off"])
    pr = Proc(args, scratch)
    try:
        c = pr.conn()
        # A worker starts with the first model: start it now, so that the
        # figures below are the huge model's.
        with open(os.path.join(REPO, "redis_tests", "models", "linear.onnx"), "rb") as f:
            assert c.cmd("AI.MODELSTORE", "lin", "ONNX", "CPU", "BLOB", f.read()) == "OK"
        pid = pr.proc.pid
        workers = children(pid) if wall else []
        before = proc_status(pid, "VmRSS")
        reset_peak(pid)
        for w in workers:
            reset_peak(w)
        t0 = time.perf_counter()
        send_command(c.sock, ["AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB"], chunks)
        reply = c.read_reply()
        secs = time.perf_counter() - t0
        assert reply == "OK", reply
        m = {"seconds": secs, "server_peak": (proc_status(pid, "VmHWM") - before) / size}
        info = c.cmd("AI.MODELINFO", "m")
        m["weights"] = dict(zip(info[::2], info[1::2]))[b"weights"].decode()
        check_model(c, model)
        if wall:
            w = workers[0]
            wpeak = proc_status(w, "VmHWM")
            shm = proc_status(w, "RssShmem")
            m["worker_peak"] = wpeak / size
            m["combined_peak"] = (proc_status(pid, "VmHWM") - before + wpeak - shm) / size
            os.kill(w, signal.SIGKILL)
            t1 = time.perf_counter()
            poll(lambda: w not in children(pid), timeout=30, what="the worker to go")
            while True:
                try:
                    if c.cmd("AI.MODELEXECUTE", "m", "INPUTS", 1, "x", "OUTPUTS", 1, "y") == "OK":
                        break
                except Exception:
                    pass
                time.sleep(0.005)
            m["restart_s"] = time.perf_counter() - t1
            m["restart_server_s"] = info_field(c, "engine_worker_last_restart_us") / 1e6
        c.close()
        return m
    finally:
        pr.stop()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--size", type=int, default=int(os.environ.get("BENCH_WALL_SIZE", 1_300_000_000)))
    p.add_argument("--runs", type=int, default=int(os.environ.get("BENCH_WALL_RUNS", 2)))
    args = p.parse_args()
    model = huge_model.build(args.size)
    size = len(model.data)
    chunks = huge_model.chunks(model.data, 3)
    res = {True: [], False: []}
    with tempfile.TemporaryDirectory() as scratch:
        for r in range(args.runs):
            for wall in ((True, False) if r % 2 == 0 else (False, True)):
                m = one(scratch, chunks, size, model, wall)
                res[wall].append(m)
                print("run %d wall %s: %s" % (r + 1, "on " if wall else "off",
                                             " ".join("%s=%s" % (k, round(v, 3) if isinstance(v, float) else v)
                                                      for k, v in m.items())), flush=True)
    print("model: %d bytes" % size)
    for wall in (True, False):
        ms = res[wall]
        keys = [k for k in ms[0] if isinstance(ms[0][k], float)]
        print("median wall %s: %s" % ("on " if wall else "off", " ".join(
            "%s=%.3f" % (k, statistics.median(m[k] for m in ms)) for k in keys)))


if __name__ == "__main__":
    main()
