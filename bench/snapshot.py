#!/usr/bin/python3
"""SAVE and load of a sealed snapshot holding one large model, against
writing and reading the same bytes raw, measured in the same run
(docs/BENCHMARKS.md, "Sealed snapshots"). `make bench-snapshot` runs it.

    /usr/bin/python3 bench/snapshot.py [--size BYTES] [--dir DIR] [--runs N]

Steps, all on one filesystem (a scratch dir under --dir, default /tmp):

  1. The model: redis_tests/models/huge_model.py builds an ONNX model of
     about --size bytes (default 1.3 GB) in memory, with its reference
     output.
  2. Raw baseline: the model's bytes written to a file and fsynced, then read
     back into memory after evicting the file from the page cache
     (POSIX_FADV_DONTNEED), as many times as --runs; best and median.
  3. Start-up baseline: an empty server's time from process start until it
     answers DBSIZE (PING answers while a snapshot still loads), median of 5.
  4. The server (--dir scratch, --save ""): AI.MODELSTORE in chunks of
     500 MB through redis-py, AI.MODELEXECUTE checked against the reference,
     then SAVE --runs times; each SAVE is timed by the wall clock of its
     reply, which arrives after the file is fsynced and renamed.
  5. Load: SHUTDOWN NOSAVE, the snapshot evicted from the page cache, a new
     server on the same dir: time until it answers DBSIZE, minus the
     start-up baseline. The model is checked again. --runs times.
  6. For comparison, the same start with `loadmodel` from the raw .onnx file
     (also evicted): the server's other way to get the model, without a
     snapshot: read the file, hash, compile.

The server is $ENCLAVEAI_SERVER, else bin/enclaveai-server; settings may also
come from BENCH_SNAPSHOT_SIZE, BENCH_SNAPSHOT_DIR and BENCH_SNAPSHOT_RUNS.
Loading includes compiling the model with ONNX Runtime, which raw reading
does not; the server log's own "snapshot loaded ... seconds" is reported
too. MB are 10^6 bytes.
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import redis

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "redis_tests", "models"))
sys.path.insert(0, os.path.join(REPO, "redis_tests"))
import huge_model  # noqa: E402
from harness import RawConn, free_port  # noqa: E402

SERVER = os.environ.get("ENCLAVEAI_SERVER") or os.path.join(REPO, "bin", "enclaveai-server")
CHUNK = 500_000_000
START_LIMIT = 600.0


def mb_s(nbytes, secs):
    return nbytes / secs / 1e6


def evict(path):
    """Drops path's pages from the page cache (they are clean: fsynced)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def raw_write(path, data):
    t0 = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        mv = memoryview(data)
        off = 0
        while off < len(mv):
            off += os.write(fd, mv[off:off + (64 << 20)])
        os.fsync(fd)
    finally:
        os.close(fd)
    return time.perf_counter() - t0


def raw_read(path, buf):
    """Reads path into buf (preallocated, so that no page faults of fresh
    memory are counted); returns seconds."""
    mv = memoryview(buf)
    t0 = time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        off = 0
        while off < len(mv):
            n = f.readinto(mv[off:off + (64 << 20)])
            if not n:
                break
            off += n
    secs = time.perf_counter() - t0
    assert off == len(mv), (off, len(mv))
    return secs


class Proc:
    """One server process on dir; log to logdir."""

    def __init__(self, dir, logdir, *args):
        self.port = free_port()
        self.log_path = os.path.join(logdir, "server-%d.log" % time.monotonic_ns())
        self.t0 = time.perf_counter()
        with open(self.log_path, "wb") as f:
            self.proc = subprocess.Popen([SERVER, "--port", str(self.port), "--dir", dir, "--save", ""] + list(args),
                                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=f)
        self.ready_s = self._wait_ready()

    def _wait_ready(self):
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError("server exited with %s:\n%s" % (self.proc.returncode, self.log()[-3000:]))
            try:
                with RawConn(self.port, timeout=5) as c:
                    while True:
                        if isinstance(c.cmd("DBSIZE"), int):
                            return time.perf_counter() - self.t0
                        time.sleep(0.005)
            except (OSError, ConnectionError):
                pass
            if time.perf_counter() - self.t0 > START_LIMIT:
                self.proc.kill()
                raise RuntimeError("server not ready after %.0f s" % START_LIMIT)
            time.sleep(0.005)

    def log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def client(self):
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=START_LIMIT)

    def stop(self):
        if self.proc.poll() is None:
            try:
                with RawConn(self.port, timeout=60) as c:
                    c.send(RawConn.encode("SHUTDOWN", "NOSAVE"))
                    c.read_until_closed(timeout=60)
            except (OSError, AssertionError):
                pass
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def check_model(r, key, model):
    r.execute_command("AI.TENSORSET", "x", "FLOAT", *model.x.shape, "BLOB", model.x.tobytes())
    r.execute_command("AI.MODELEXECUTE", key, "INPUTS", 1, "x", "OUTPUTS", 1, "y")
    y = np.frombuffer(r.execute_command("AI.TENSORGET", "y", "BLOB"), np.float32).reshape(model.y.shape)
    np.testing.assert_allclose(y, model.y, rtol=1e-3, atol=1e-3)


def log_seconds(text, msg):
    m = re.findall(r'msg="%s".*? seconds=([0-9.e+-]+)' % re.escape(msg), text)
    return float(m[-1]) if m else None


def uptime():
    return subprocess.run(["uptime"], stdout=subprocess.PIPE, text=True).stdout.strip()


def summary(xs):
    return {"best": min(xs), "median": statistics.median(xs), "all": xs}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--size", type=int, default=int(os.environ.get("BENCH_SNAPSHOT_SIZE", 1_300_000_000)))
    p.add_argument("--dir", default=os.environ.get("BENCH_SNAPSHOT_DIR", "/tmp"))
    p.add_argument("--runs", type=int, default=int(os.environ.get("BENCH_SNAPSHOT_RUNS", 3)))
    p.add_argument("--json", help="also write the results here")
    args = p.parse_args()

    res = {"uptime_before": uptime(), "nproc": os.cpu_count()}
    print("load:", res["uptime_before"], "| cpus:", os.cpu_count(), flush=True)
    scratch = tempfile.mkdtemp(prefix="enclaveai-bench-snapshot-", dir=args.dir)
    data_dir = os.path.join(scratch, "data")
    logs = os.path.join(scratch, "logs")
    os.makedirs(logs)
    procs = []
    try:
        t0 = time.perf_counter()
        model = huge_model.build(args.size)
        size = len(model.data)
        res["model_bytes"] = size
        print("model: %d bytes, built in %.1f s" % (size, time.perf_counter() - t0), flush=True)
        fs = subprocess.run(["df", "-T", scratch], stdout=subprocess.PIPE, text=True).stdout.splitlines()[-1]
        res["filesystem"] = " ".join(fs.split()[:2])

        # 2. Raw write + fsync and cold read of the same bytes.
        raw = os.path.join(scratch, "model.onnx")
        buf = huge_model.alloc(size)
        np.frombuffer(buf, np.uint8)[:] = 1  # commit the buffer's pages before timing
        writes, reads = [], []
        for _ in range(args.runs):
            writes.append(raw_write(raw, model.data))
            evict(raw)
            reads.append(raw_read(raw, buf))
        assert buf[:4096] == model.data[:4096] and buf[-4096:] == model.data[-4096:]
        del buf
        res["raw_write_s"], res["raw_read_cold_s"] = summary(writes), summary(reads)
        print("raw write+fsync: %s s; raw read (evicted): %s s" % (writes, reads), flush=True)

        # 3. Empty-server start-up.
        empty_dir = os.path.join(scratch, "empty")
        starts = []
        for _ in range(5):
            pr = Proc(empty_dir, logs)
            starts.append(pr.ready_s)
            pr.stop()
        base = statistics.median(starts)
        res["empty_start_s"] = summary(starts)
        print("empty start: %s s" % starts, flush=True)

        # 4. Upload and SAVE.
        pr = Proc(data_dir, logs)
        procs.append(pr)
        r = pr.client()
        mv = memoryview(model.data)
        chunks = [mv[i:i + CHUNK] for i in range(0, size, CHUNK)]
        t0 = time.perf_counter()
        assert r.execute_command("AI.MODELSTORE", "huge", "ONNX", "CPU", "BLOB", *chunks) == b"OK"
        res["modelstore_s"] = time.perf_counter() - t0
        res["chunks"] = len(chunks)
        print("MODELSTORE: %.2f s in %d chunks" % (res["modelstore_s"], len(chunks)), flush=True)
        check_model(r, "huge", model)
        r.execute_command("DEL", "x", "y")
        saves = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            assert r.execute_command("SAVE") in (True, b"OK")
            saves.append(time.perf_counter() - t0)
        res["save_s"] = summary(saves)
        res["save_log_s"] = log_seconds(pr.log(), "snapshot saved")
        dump = os.path.join(data_dir, "dump.aidb")
        res["snapshot_bytes"] = os.path.getsize(dump)
        print("SAVE: %s s; snapshot %d bytes" % (saves, res["snapshot_bytes"]), flush=True)
        r.close()
        pr.stop()
        procs.remove(pr)

        # 5. Load from the snapshot.
        loads, load_logs = [], []
        for _ in range(args.runs):
            evict(dump)
            pr = Proc(data_dir, logs)
            procs.append(pr)
            loads.append(pr.ready_s)
            load_logs.append(log_seconds(pr.log(), "snapshot loaded"))
            r = pr.client()
            assert r.dbsize() == 1
            r.close()
            pr.stop()
            procs.remove(pr)
        res["load_s"] = summary(loads)
        res["load_log_s"] = summary(load_logs)
        print("load: %s s (server log: %s s)" % (loads, load_logs), flush=True)
        pr = Proc(data_dir, logs)
        procs.append(pr)
        r = pr.client()
        check_model(r, "huge", model)
        r.close()
        pr.stop()
        procs.remove(pr)

        # 6. Start with loadmodel from the raw file.
        lm = []
        lm_dir = os.path.join(scratch, "loadmodel")
        for _ in range(args.runs):
            evict(raw)
            pr = Proc(lm_dir, logs, "--loadmodel", "huge", "ONNX", "CPU", raw)
            procs.append(pr)
            lm.append(pr.ready_s)
            pr.stop()
            procs.remove(pr)
        res["loadmodel_start_s"] = summary(lm)
        print("loadmodel start: %s s" % lm, flush=True)
        res["uptime_after"] = uptime()
    finally:
        for pr in procs:
            pr.stop()
        shutil.rmtree(scratch, ignore_errors=True)

    report(res, base, args)


def report(res, base, args):
    size = res["model_bytes"]
    snap = res["snapshot_bytes"]
    w = res["raw_write_s"]["best"]
    rd = res["raw_read_cold_s"]["best"]
    sv = res["save_s"]["best"]
    ld = res["load_s"]["best"] - base
    lm = res["loadmodel_start_s"]["best"] - base
    rows = [
        ("raw write + fsync", w, mb_s(size, w), 1.0),
        ("SAVE (reply wall clock)", sv, mb_s(size, sv), w / sv),
        ("raw read (evicted from page cache)", rd, mb_s(size, rd), 1.0),
        ("load: start until DBSIZE answers, minus empty start", ld, mb_s(size, ld), rd / ld),
        ("  of which the server log's \"snapshot loaded\"", res["load_log_s"]["best"],
         mb_s(size, res["load_log_s"]["best"]), rd / res["load_log_s"]["best"]),
        ("start with loadmodel from the raw .onnx, minus empty start", lm, mb_s(size, lm), rd / lm),
    ]
    print()
    print("model %d bytes (%.2f GB), snapshot %d bytes: snapshot / model = %.4f"
          % (size, size / 1e9, snap, snap / size))
    print("empty server start (median of 5): %.3f s; MODELSTORE upload: %.2f s" % (base, res["modelstore_s"]))
    print()
    print("| operation | seconds (best of %d) | MB/s | speed vs raw |" % args.runs)
    print("|---|---:|---:|---:|")
    for name, s, rate, ratio in rows:
        print("| %s | %.2f | %.0f | %.2f |" % (name, s, rate, ratio))
    print()
    for k in ("raw_write_s", "save_s", "raw_read_cold_s", "load_s", "load_log_s", "loadmodel_start_s"):
        print("%s: %s" % (k, ", ".join("%.2f" % x for x in res[k]["all"])))
    print("filesystem:", res["filesystem"])
    print("load before:", res["uptime_before"])
    print("load after: ", res["uptime_after"])
    if args.json:
        res["empty_start_median_s"] = base
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
