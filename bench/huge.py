#!/usr/bin/python3
"""A huge model's upload against Redis's RPUSH of the same chunks, and its
session creation against onnxruntime_go's, measured in the same run
(docs/BENCHMARKS.md, "Huge models"). `make bench-huge` runs it.

    /usr/bin/python3 bench/huge.py [--size BYTES] [--runs N] [--doc docs/BENCHMARKS.md]

Steps:

  1. The model: redis_tests/models/huge_model.py builds an ONNX model of
     about --size bytes (default 1.3 GB: two MatMul weights) in memory, with
     its reference output, and splits it into three chunks (500 MB, 500 MB
     and the rest), as a client script uploading it would.
  2. Redis 7 (Debian's redis-server, no persistence, default limits): one
     RPUSH key c1 c2 c3 from a raw socket.
  3. EnclaveAI (bin/enclaveai-server, default settings): AI.MODELSTORE m
     ONNX CPU BLOB c1 c2 c3 from the same kind of socket; then AI.MODELINFO
     (weights shared or copied) and AI.MODELEXECUTE checked against numpy.
  4. EnclaveAI again, after both, while another process (its own interpreter, so that
     neither waits for the other's lock) sends PING, AI.TENSORGET and
     AI.MODELEXECUTE of a small model one after the other, timing each.
  5. The floor: the same bytes sent to a Python process that only reads
     them into one reused 64 MiB buffer and answers +OK (loopback TCP and
     the client's own cost, no memory to fill); a reference, not a strict
     bound: a faster reader can beat it.
  0. Before each run, what first-touch faults cost at the time: a fresh
     process maps 512 MiB of anonymous memory and writes one byte per
     4 KiB page, once with 4 KiB pages and once advised for huge pages.
     The ratio to Redis swings with it (a VM whose memory the host must
     back anew pays far more per fault than one whose memory is warm).

For steps 2 and 3 the figures are the time from the first byte sent to the
reply (for EnclaveAI, OK means the model is stored and its session made:
runnable), and the server's RSS growth over its RSS before the upload: at
the peak (VmHWM, reset just before) and once the reply is in (after the
first inference for EnclaveAI). Each server is a fresh process; steps 2-5
are repeated --runs times (default 4), steps 2 and 3 in alternating order,
and medians reported.

  6. Session creation alone (bench/hugesession, one process per way, the
     model read from a file first): onnxruntime_go's
     NewDynamicAdvancedSessionWithONNXData from the bytes, against
     modelstore.NewSharedSession over a ModelBuffer (what the server does).

The server is $ENCLAVEAI_SERVER, else bin/enclaveai-server. MB are 10^6
bytes. With --doc the "Huge models" section of that file is rewritten with
the results.
"""

import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "redis_tests", "models"))
sys.path.insert(0, os.path.join(REPO, "redis_tests"))
import huge_model  # noqa: E402
from harness import RawConn, free_port, poll, proc_status, reset_peak  # noqa: E402
from benchdoc import write_section  # noqa: E402

SERVER = os.environ.get("ENCLAVEAI_SERVER") or os.path.join(REPO, "bin", "enclaveai-server")
CHUNK = 500_000_000
TIMEOUT = 600.0
COMMAND = "make bench-huge"


class Proc:
    """A server process (redis-server or enclaveai-server) on a free port."""

    def __init__(self, argv, scratch):
        self.port = free_port()
        self.dir = tempfile.mkdtemp(dir=scratch)
        self.log = open(os.path.join(self.dir, "log"), "wb")
        self.proc = subprocess.Popen(argv + ["--port", str(self.port), "--dir", self.dir],
                                     stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log)
        poll(self._ready, timeout=30, what="%s to answer" % argv[0])

    def _ready(self):
        if self.proc.poll() is not None:
            raise RuntimeError("%s exited" % self.proc.args[0])
        try:
            with RawConn(self.port, timeout=2) as c:
                return c.cmd("PING") == "PONG"
        except OSError:
            return False

    def conn(self):
        return RawConn(self.port, timeout=TIMEOUT)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def send_command(sock, words, chunks):
    """Writes one command: words, then the chunks (memoryviews, never
    copied)."""
    head = [b"*%d\r\n" % (len(words) + len(chunks))]
    for w in words:
        w = w.encode()
        head.append(b"$%d\r\n%s\r\n" % (len(w), w))
    sock.sendall(b"".join(head))
    for ch in chunks:
        sock.sendall(b"$%d\r\n" % len(ch))
        sock.sendall(ch)
        sock.sendall(b"\r\n")


def upload(pr, words, chunks, size):
    """Sends the command; returns the reply and the measurements."""
    pid = pr.proc.pid
    c = pr.conn()
    before = proc_status(pid, "VmRSS")
    reset_peak(pid)
    t0 = time.perf_counter()
    send_command(c.sock, words, chunks)
    sent = time.perf_counter() - t0
    reply = c.read_reply()
    secs = time.perf_counter() - t0
    peak = proc_status(pid, "VmHWM") - before
    return c, reply, {"seconds": secs, "sent_s": sent, "peak": peak / size, "before": before}


def steady(pr, m):
    """RSS growth over the RSS before the upload, once the server settled."""
    time.sleep(1.0)
    return proc_status(pr.proc.pid, "VmRSS") - m["before"]


def run_redis(scratch, chunks, size):
    pr = Proc(["redis-server", "--save", "", "--appendonly", "no"], scratch)
    try:
        c, reply, m = upload(pr, ["RPUSH", "m"], chunks, size)
        assert reply == len(chunks), reply
        m["steady"] = steady(pr, m) / size
        c.close()
        return m
    finally:
        pr.stop()


def check_model(c, model):
    assert c.cmd("AI.TENSORSET", "x", "FLOAT", 1, huge_model.K, "BLOB", model.x.tobytes()) == "OK"
    assert c.cmd("AI.MODELEXECUTE", "m", "INPUTS", 1, "x", "OUTPUTS", 1, "y") == "OK"
    y = np.frombuffer(c.cmd("AI.TENSORGET", "y", "BLOB"), np.float32).reshape(model.y.shape)
    np.testing.assert_allclose(y, model.y, rtol=1e-3, atol=1e-4)


def run_enclaveai(scratch, chunks, size, model, probe=False):
    pr = Proc([SERVER, "--save", ""], scratch)
    prober = None
    try:
        if probe:
            setup = pr.conn()
            with open(os.path.join(REPO, "redis_tests", "models", "linear.onnx"), "rb") as f:
                assert setup.cmd("AI.MODELSTORE", "lin", "ONNX", "CPU", "BLOB", f.read()) == "OK"
            assert setup.cmd("AI.TENSORSET", "a", "FLOAT", 1, 4, "VALUES", 1, 2, 3, 4) == "OK"
            setup.close()
            prober = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--probe", str(pr.port)],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            assert prober.stdout.readline().strip() == b"ready"
        c, reply, m = upload(pr, ["AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB"], chunks, size)
        if prober:
            prober.stdin.close()
            lat = json.loads(prober.stdout.read())
            prober.wait()
            prober = None
            m["probes"] = lat
        assert reply == "OK", reply
        info = c.cmd("AI.MODELINFO", "m")
        m["weights"] = dict(zip(info[::2], info[1::2]))[b"weights"].decode()
        check_model(c, model)
        m["steady"] = steady(pr, m) / size
        m["hugepages"] = anon_huge(pr.proc.pid)
        c.close()
        return m
    finally:
        if prober:
            prober.kill()
        pr.stop()


def anon_huge(pid):
    with open("/proc/%d/smaps_rollup" % pid) as f:
        for line in f:
            if line.startswith("AnonHugePages:"):
                return int(line.split()[1]) * 1024
    return 0


def probe(port):
    """Runs in its own process: PING, AI.TENSORGET, AI.MODELEXECUTE in turn
    until stdin closes; prints the latencies (seconds) per command."""
    import threading
    c = RawConn(port, timeout=10)
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    cmds = {"PING": ("PING",), "AI.TENSORGET": ("AI.TENSORGET", "a", "VALUES"),
            "AI.MODELEXECUTE": ("AI.MODELEXECUTE", "lin", "INPUTS", 1, "a", "OUTPUTS", 1, "b")}
    lat = {k: [] for k in cmds}
    print("ready", flush=True)
    while not stop.is_set():
        for name, cmd in cmds.items():
            t0 = time.perf_counter()
            r = c.cmd(*cmd)
            lat[name].append(time.perf_counter() - t0)
            assert not isinstance(r, Exception), r
    print(json.dumps(lat), flush=True)


def sink(port, total):
    """Runs in its own process: reads total bytes from one connection into
    a reused buffer, then answers +OK."""
    ln = socket.socket()
    ln.bind(("127.0.0.1", port))
    ln.listen(1)
    print("ready", flush=True)
    c, _ = ln.accept()
    buf = bytearray(64 << 20)
    mv = memoryview(buf)
    got = 0
    while got < total:
        n = c.recv_into(mv[:min(len(buf), total - got)])
        if not n:
            break
        got += n
    c.sendall(b"+OK\r\n")
    c.close()


def first_touch():
    """Runs in its own process: prints the cost of writing fresh anonymous
    memory, per 4 KiB page (microseconds) and as GB/s with huge pages."""
    import mmap
    n = 512 << 20
    out = {}
    for name, huge in (("small", False), ("huge", True)):
        m = mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        if huge:
            m.madvise(mmap.MADV_HUGEPAGE)
        a = np.frombuffer(m, np.uint8)
        t0 = time.perf_counter()
        a[::4096] = 1
        out[name] = time.perf_counter() - t0
        del a
        m.close()
    print(json.dumps({"us_per_4k_page": out["small"] / (n / 4096) * 1e6, "huge_gb_s": n / out["huge"] / 1e9}))


def run_first_touch():
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--first-touch"],
                       stdout=subprocess.PIPE, check=True)
    return json.loads(r.stdout)


def run_floor(chunks):
    total = len(b"*%d\r\n$5\r\nRPUSH\r\n$1\r\nm\r\n" % (len(chunks) + 2))
    total += sum(len(ch) + len(b"$%d\r\n\r\n" % len(ch)) for ch in chunks)
    port = free_port()
    p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--sink", str(port), str(total)],
                         stdout=subprocess.PIPE)
    try:
        assert p.stdout.readline().strip() == b"ready"
        c = RawConn(port, timeout=TIMEOUT)
        t0 = time.perf_counter()
        send_command(c.sock, ["RPUSH", "m"], chunks)
        reply = c.read_reply()
        secs = time.perf_counter() - t0
        assert reply == "OK", reply
        c.close()
        return secs
    finally:
        p.wait(30)


def run_sessions(scratch, model_path):
    exe = os.path.join(scratch, "hugesession")
    subprocess.run(["go", "build", "-o", exe, "./bench/hugesession"], cwd=REPO, check=True)
    out = {}
    for mode in ("ort", "shared"):
        r = subprocess.run([exe, "-model", model_path, "-mode", mode], stdout=subprocess.PIPE, check=True)
        out[mode] = json.loads(r.stdout)
    return out


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * q))]


def uptime():
    return subprocess.run(["uptime"], stdout=subprocess.PIPE, text=True).stdout.strip()


def machine():
    def read(p):
        try:
            with open(p) as f:
                return f.read().strip()
        except OSError:
            return "?"
    mem = read("/proc/meminfo").splitlines()[0].split()[1]
    thp = re.search(r"\[(\w+)\]", read("/sys/kernel/mm/transparent_hugepage/enabled"))
    redis_v = subprocess.run(["redis-server", "--version"], stdout=subprocess.PIPE, text=True).stdout.split()[2]
    return "%d CPUs, %.0f GiB RAM, Linux %s, THP %s, Redis %s" % (
        os.cpu_count(), int(mem) / 2**20, os.uname().release, thp.group(1) if thp else "?", redis_v.split("=")[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--size", type=int, default=int(os.environ.get("BENCH_HUGE_SIZE", 1_300_000_000)))
    p.add_argument("--runs", type=int, default=int(os.environ.get("BENCH_HUGE_RUNS", 4)))
    p.add_argument("--doc", help="rewrite the Huge models section of this file")
    p.add_argument("--probe", type=int, help=argparse.SUPPRESS)
    p.add_argument("--sink", type=int, nargs=2, help=argparse.SUPPRESS)
    p.add_argument("--first-touch", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.first_touch:
        return first_touch()
    if args.probe:
        return probe(args.probe)
    if args.sink:
        return sink(*args.sink)

    res = {"machine": machine(), "load_before": uptime()}
    print(res["machine"], "|", res["load_before"], flush=True)
    scratch = tempfile.mkdtemp(prefix="enclaveai-bench-huge-")
    try:
        t0 = time.perf_counter()
        model = huge_model.build(args.size)
        size = len(model.data)
        mv = memoryview(model.data)
        chunks = [mv[i:i + CHUNK] for i in range(0, size, CHUNK)]
        res["size"], res["chunks"] = size, [len(c) for c in chunks]
        print("model: %d bytes in %d chunks, built in %.1f s" % (size, len(chunks), time.perf_counter() - t0), flush=True)

        runs = {"redis": [], "enclaveai": [], "probed": [], "floor": [], "touch": []}
        for i in range(args.runs):
            runs["touch"].append(run_first_touch())
            runs["floor"].append(run_floor(chunks))
            # Which server goes first alternates: a process that faults in
            # memory another one freed moments before pays less than one
            # faulting memory the host must back anew.
            steps = [lambda: runs["redis"].append(run_redis(scratch, chunks, size)),
                     lambda: runs["enclaveai"].append(run_enclaveai(scratch, chunks, size, model))]
            for step in steps[::1 if i % 2 == 0 else -1]:
                step()
            runs["probed"].append(run_enclaveai(scratch, chunks, size, model, probe=True))
            print("run %d: first touch %.1f us/4k page, %.2f GB/s huge; floor %.2f s, redis %.2f s, "
                  "enclaveai %.2f s, with probes %.2f s" % (
                      i + 1, runs["touch"][-1]["us_per_4k_page"], runs["touch"][-1]["huge_gb_s"], runs["floor"][-1], runs["redis"][-1]["seconds"], runs["enclaveai"][-1]["seconds"],
                runs["probed"][-1]["seconds"]), flush=True)
        res["runs"] = runs

        path = os.path.join(scratch, "model.onnx")
        with open(path, "wb") as f:
            f.write(model.data)
        del mv, chunks
        model = None
        res["sessions"] = run_sessions(scratch, path)
        res["load_after"] = uptime()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    text = report(res, args)
    print(text)
    if args.doc:
        write_section(args.doc, "Huge models", text)


def report(res, args):
    size = res["size"]
    med = lambda name, k: statistics.median(r[k] for r in res["runs"][name])  # noqa: E731
    rs, es, ps = med("redis", "seconds"), med("enclaveai", "seconds"), med("probed", "seconds")
    lat = {}
    for r in res["runs"]["probed"]:
        for k, v in r["probes"].items():
            lat.setdefault(k, []).extend(v)
    s = res["sessions"]
    o, sh = s["ort"], s["shared"]
    weights = sorted({r["weights"] for r in res["runs"]["enclaveai"] + res["runs"]["probed"]})
    lines = []
    add = lines.append
    add("## Huge models: a %.1f GB model uploaded in %d chunks" % (size / 1e9, len(res["chunks"])))
    add("")
    add("`%s` (bench/huge.py; `BENCH_HUGE_SIZE`, `BENCH_HUGE_RUNS`), %d runs, medians." % (COMMAND, args.runs))
    add("Machine: %s. Load before: `%s`; after: `%s`." % (res["machine"], res["load_before"], res["load_after"]))
    add("")
    add("A generated ONNX model of %d bytes (two MatMul weights, redis_tests/models/huge_model.py) sent" % size)
    add("from a raw socket as `AI.MODELSTORE m ONNX CPU BLOB c1 c2 c3` (chunks of %s bytes), and the same" %
        " + ".join(str(c) for c in res["chunks"]))
    add("chunks as `RPUSH m c1 c2 c3` to Redis, each to a fresh server. Time: first byte sent to the reply")
    add("(EnclaveAI's OK means stored and its session created: runnable). RSS: the server's growth over its")
    add("RSS before the upload, at the peak (VmHWM) and after the reply (after a first inference for")
    add("EnclaveAI), over the model size.")
    add("")
    fl = statistics.median(res["runs"]["floor"])
    add("| server | time to reply (s) | peak RSS growth / model | steady RSS growth / model |")
    add("|---|---:|---:|---:|")
    add("| floor: a Python reader into one reused 64 MiB buffer | %.2f | | |" % fl)
    add("| Redis 7 RPUSH | %.2f | %.2f | %.2f |" % (rs, med("redis", "peak"), med("redis", "steady")))
    add("| EnclaveAI AI.MODELSTORE | %.2f | %.2f | %.2f |" % (es, med("enclaveai", "peak"), med("enclaveai", "steady")))
    add("| EnclaveAI, probed by a second client | %.2f | %.2f | %.2f |" % (ps, med("probed", "peak"), med("probed", "steady")))
    add("")
    add("- OK %.1fx sooner than Redis finishes the RPUSH (target: 5x); peak %.2fx and steady %.2fx the model"
        % (rs / es, med("enclaveai", "peak"), med("enclaveai", "steady")))
    add("  (targets: 1.5x, 1.25x). Weights: %s (AI.MODELINFO). Time until the client had sent the last byte:"
        % ", ".join(weights))
    add("  Redis %.2f s, EnclaveAI %.2f s. Per run (same round), Redis / EnclaveAI: %s." % (
        med("redis", "sent_s"), med("enclaveai", "sent_s"),
        ", ".join("%.1fx" % (r["seconds"] / e["seconds"]) for r, e in zip(res["runs"]["redis"], res["runs"]["enclaveai"]))))
    add("- Other clients during the upload and session creation (one request at a time, %d of them):"
        % sum(len(v) for v in lat.values()))
    for k, v in lat.items():
        add("  %s p50 %.2f ms, p99 %.2f ms, max %.2f ms;" % (k, pct(v, 0.5) * 1e3, pct(v, 0.99) * 1e3, max(v) * 1e3))
    add("  all together p99 %.2f ms (target: under 10 ms)." % (pct(sum(lat.values(), []), 0.99) * 1e3))
    touch = res["runs"]["touch"]
    add("- First-touch faults at the time (step 0, median of %d): %.1f µs per fresh 4 KiB page, %.2f GB/s into"
        % (len(touch), statistics.median(t["us_per_4k_page"] for t in touch),
           statistics.median(t["huge_gb_s"] for t in touch)))
    add("  fresh huge pages (per run: %s)." % ", ".join(
        "%.1f µs/%.2f GB/s" % (t["us_per_4k_page"], t["huge_gb_s"]) for t in touch))
    add("- All runs (s): floor %s; Redis %s; EnclaveAI %s; probed %s." % (
        ", ".join("%.2f" % x for x in res["runs"]["floor"]),
        *(", ".join("%.2f" % r["seconds"] for r in res["runs"][n]) for n in ("redis", "enclaveai", "probed"))))
    add("")
    add("Notes. Clients and servers share the machine's %d cores. Nothing in EnclaveAI's time to OK after" % os.cpu_count())
    add("the last byte is more than tens of milliseconds (the fingerprint's tail, checks, session creation); the")
    add("rest is receiving the bytes: the kernel's copy from the socket, first-touch faults of 2 MiB pages")
    add("(faulted in ahead of the reads by another thread) and a 64-bit fingerprint (hash/maphash, for")
    add("deduplication) on a third; the model's SHA-256 (AI.MODELINFO) is computed after the OK. All of it")
    add("competes with the local client for the cores. The floor is a Python reader: a reference for moving the bytes over loopback, not a strict lower bound (EnclaveAI beat it in some runs). Redis's time is the same copy")
    add("into 4 KiB pages, then a second copy of every chunk into the list (its 2x peak): the ratio to it")
    add("depends mostly on what first-touch faults cost on the machine at the time. Memory another process")
    add("freed moments before is cheap to fault again, memory the host must back anew is not: EnclaveAI's")
    add("runs right after Redis's (odd runs) are usually its fastest, those before it (even runs) its slowest,")
    add("which is why steps 2 and 3 alternate and the median is quoted with every run's ratio.")
    add("")
    add("Session creation alone, from the same bytes already in memory (bench/hugesession):")
    add("")
    add("| way | seconds | peak RSS growth / model | RSS growth after / model |")
    add("|---|---:|---:|---:|")
    for name, r in (("onnxruntime_go, NewDynamicAdvancedSessionWithONNXData, default options", o),
                    ("EnclaveAI, modelstore.NewSharedSession over a ModelBuffer (weights %s)" % sh.get("weights"), sh)):
        add("| %s | %.3f | %.2f | %.2f |" % (name, r["seconds"], (r["rss_peak"] - r["rss_before"]) / size,
                                             (r["rss_after_run"] - r["rss_before"]) / size))
    add("")
    add("Shared weights: %.0fx faster; ORT reads the initializers where the upload put them (with prepacking off,"
        % (o["seconds"] / sh["seconds"]))
    add("see modelstore/extinit.go), instead of parsing them into a copy of its own.")
    add("")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
