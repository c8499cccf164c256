"""The engine wall (package worker, docs/ENGINE_ISOLATION.md): ONNX Runtime
runs in worker processes, so a model that crashes, hangs or bloats native
code costs one worker, never the server.

    /usr/bin/python3 -m unittest redis_tests.test_engine_workers -v

Models: redis_tests/models (gen_models.py: crash_roialign_run,
crash_roialign_store, crash_maxunpool_run, bomb, hang_store; `make
models`). The run-time crashes take the bad index as an input value, which
no static check of the model (the sanitizer) can refuse.
"""

import os
import re
import signal
import subprocess
import sys
import threading
import time
import unittest

import numpy as np
import redis

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import REPO, Server, poll, proc_status, reset_peak, rss_of  # noqa: E402

MODELS = os.path.join(REPO, "redis_tests", "models")


def model(name):
    with open(os.path.join(MODELS, name), "rb") as f:
        return f.read()


def children(pid):
    """The server's worker processes, oldest first."""
    kids = []
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/children" % (pid, tid)) as f:
                kids += [int(k) for k in f.read().split()]
        except OSError:
            pass

    def started(k):
        try:
            with open("/proc/%d/stat" % k) as f:
                return int(f.read().rsplit(")", 1)[1].split()[19])
        except OSError:
            return 0
    return sorted(set(kids), key=started)


def maps(pid):
    with open("/proc/%d/maps" % pid) as f:
        return f.read()


def start_with_env(name, value, *args):
    """A Server started with name=value in its environment."""
    os.environ[name] = value
    try:
        return Server(*args).start()
    finally:
        del os.environ[name]


def timer_slacks(pid):
    """The timer slacks (ns) of pid's threads, as a set."""
    return {int(open("/proc/%s/timerslack_ns" % tid).read()) for tid in os.listdir("/proc/%d/task" % pid)}


def set_crash_inputs(r):
    """Inputs of crash_roialign_run (rx, rrois, rbi) and crash_maxunpool_run
    (ux, ui) with the index that crashes ONNX Runtime."""
    r.execute_command("AI.TENSORSET", "rx", "FLOAT", 1, 1, 4, 4, "VALUES", *([1] * 16))
    r.execute_command("AI.TENSORSET", "rrois", "FLOAT", 1, 4, "VALUES", 0, 0, 3, 3)
    r.execute_command("AI.TENSORSET", "rbi", "INT64", 1, "VALUES", 100_000_000)
    r.execute_command("AI.TENSORSET", "ux", "FLOAT", 1, 1, 2, 2, "VALUES", 1, 2, 3, 4)
    r.execute_command("AI.TENSORSET", "ui", "INT64", 1, 1, 2, 2, "VALUES", 0, 1, 2, 100_000_000_000)


def run_roialign(r, key="crash"):
    return r.execute_command("AI.MODELEXECUTE", key, "INPUTS", 3, "rx", "rrois", "rbi", "OUTPUTS", 1, "ry")


def error_text(fn):
    try:
        fn()
    except redis.ResponseError as e:
        return str(e)
    raise AssertionError("no error")


def unix_sockets(pid):
    """The unix sockets pid's namespace knows: inode -> (type, state, flags),
    from /proc/<pid>/net/unix."""
    out = {}
    with open("/proc/%d/net/unix" % pid) as f:
        next(f)
        for line in f:
            cols = line.split()
            out[cols[6]] = (int(cols[4], 16), int(cols[5], 16), int(cols[3], 16))
    return out


class WallTest(unittest.TestCase):
    """One server with the wall on (the default) for the simple cases."""

    @classmethod
    def setUpClass(cls):
        cls.srv = Server("--engine-worker-memory", "512mb").start()
        cls.r = cls.srv.client()
        cls.r.execute_command("AI.MODELSTORE", "mlp", "ONNX", "CPU", "BLOB", model("mlp.onnx"))
        x = np.random.default_rng(1).random((1, 784), dtype=np.float32)
        cls.r.execute_command("AI.TENSORSET", "x", "FLOAT", 1, 784, "BLOB", x.tobytes())
        set_crash_inputs(cls.r)

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()

    def run_mlp(self):
        self.assertEqual(self.r.execute_command("AI.MODELEXECUTE", "mlp", "INPUTS", 1, "x", "OUTPUTS", 1, "y"), b"OK")

    def test_server_never_maps_onnxruntime(self):
        self.run_mlp()
        self.assertNotIn("libonnxruntime", maps(self.srv.proc.pid))
        workers = children(self.srv.proc.pid)
        self.assertTrue(workers, "no worker process")
        self.assertTrue(any("libonnxruntime" in maps(w) for w in workers))
        info = self.r.info("engine")
        self.assertEqual(info["engine"], "onnxruntime-worker")
        self.assertEqual(info["engine_isolation"], "per-tenant")
        # INFO MODULES names the version the workers loaded, as RedisAI
        # names a backend once it is loaded.
        self.assertEqual(self.r.info("ai_backends_info")["ai_onnxruntime_version"], "1.24.1")

    def test_timer_slack_of_server_and_workers(self):
        """server/timerslack.go: 1 ms for every thread of the server and
        of its workers (the kernel's default is 50 µs)."""
        self.run_mlp()
        self.assertEqual(timer_slacks(self.srv.proc.pid), {1000000})
        workers = children(self.srv.proc.pid)
        self.assertTrue(workers)
        for w in workers:
            self.assertEqual(timer_slacks(w), {1000000})

    def test_worker_holds_only_its_channel_and_shared_memory(self):
        """A worker's descriptors: stdin and stdout on /dev/null, stderr a
        pipe to the server, its sockets (the control socketpair and the
        lanes runs travel on, worker/lane.go: connected SOCK_SEQPACKET
        pairs, which cannot listen), memfds of models it reads in place,
        and the Go runtime's own (epoll, eventfd, pidfd, the cgroup CPU
        quota GOMAXPROCS follows). No file of the server, no listener."""
        self.run_mlp()
        for w in children(self.srv.proc.pid):
            targets = {int(fd): os.readlink("/proc/%d/fd/%s" % (w, fd)) for fd in os.listdir("/proc/%d/fd" % w)}
            self.assertEqual(targets[0], "/dev/null")
            self.assertEqual(targets[1], "/dev/null")
            self.assertTrue(targets[2].startswith("pipe:"), targets)
            with open("/proc/%d/status" % w) as f:
                status = dict(line.split(":", 1) for line in f if ":" in line)
            self.assertEqual(status["Seccomp"].strip(), "2")  # a filter (worker/seccomp.go)
            self.assertEqual(status["NoNewPrivs"].strip(), "1")
            sockets = [t for t in targets.values() if t.startswith("socket:")]
            self.assertTrue(2 <= len(sockets) <= 1 + 16, targets)  # control + lanes (maxLanes)
            unix = unix_sockets(w)
            for t in sockets:
                inode = t[len("socket:["):-1]
                self.assertIn(inode, unix, "not a unix socket: %s" % t)
                kind, state, flags = unix[inode]
                self.assertEqual(kind, 5, t)  # SOCK_SEQPACKET
                self.assertEqual(state, 3, t)  # SS_CONNECTED
                self.assertFalse(flags & 0x10000, t)  # __SO_ACCEPTCON: listening
            for fd, t in targets.items():
                if fd > 2 and not t.startswith("socket:"):
                    self.assertTrue(t.startswith(("/memfd:", "anon_inode:", "/sys/fs/cgroup/")), (fd, t))

    def test_crash_at_run_is_contained_and_quarantined(self):
        self.r.execute_command("AI.MODELSTORE", "crash", "ONNX", "CPU", "BLOB", model("crash_roialign_run.onnx"))
        before = self.r.info("engine").get("engine_worker_deaths_sigsegv", 0)
        err = error_text(lambda: run_roialign(self.r))
        self.assertEqual(err, "model execution failed: engine worker died (SIGSEGV)")
        err = error_text(lambda: run_roialign(self.r))
        self.assertEqual(err, "model execution failed: the model is quarantined: it crashed an engine worker (SIGSEGV); "
                         "store it again to retry")
        self.assertTrue(self.srv.alive())
        self.run_mlp()  # recreated in the replacement worker, no re-upload
        self.assertEqual(self.r.info("engine")["engine_worker_deaths_sigsegv"], before + 1)
        # Storing it again lifts the quarantine (and it crashes again).
        self.r.execute_command("AI.MODELSTORE", "crash", "ONNX", "CPU", "BLOB", model("crash_roialign_run.onnx"))
        err = error_text(lambda: run_roialign(self.r))
        self.assertEqual(err, "model execution failed: engine worker died (SIGSEGV)")
        self.r.delete("crash")
        self.run_mlp()
        self.assertIn("sha256=", self.srv.stderr())
        self.assertIn("stage=run", self.srv.stderr())

    def test_abort_at_run_is_contained(self):
        self.r.execute_command("AI.MODELSTORE", "unpool", "ONNX", "CPU", "BLOB", model("crash_maxunpool_run.onnx"))
        err = error_text(lambda: self.r.execute_command("AI.MODELEXECUTE", "unpool", "INPUTS", 2, "ux", "ui",
                                                        "OUTPUTS", 1, "uy"))
        self.assertEqual(err, "model execution failed: engine worker died (SIGABRT)")
        self.assertTrue(self.srv.alive())
        self.run_mlp()

    def test_crash_at_store_is_refused(self):
        err = error_text(lambda: self.r.execute_command("AI.MODELSTORE", "folded", "ONNX", "CPU", "BLOB",
                                                        model("crash_roialign_store.onnx")))
        self.assertEqual(err, "model could not be loaded: engine worker died (SIGSEGV) while creating its session")
        self.assertFalse(self.r.exists("folded"))
        self.assertTrue(self.srv.alive())
        self.run_mlp()
        self.assertIn("stage=store", self.srv.stderr())

    def test_memory_bomb_stays_in_the_worker(self):
        self.run_mlp()
        rss = rss_of(self.srv.proc.pid)
        self.r.execute_command("AI.MODELSTORE", "bomb", "ONNX", "CPU", "BLOB", model("bomb.onnx"))
        self.r.execute_command("AI.TENSORSET", "n", "INT64", 1, "VALUES", 2_500_000_000)  # 10 GB of FLOAT
        err = error_text(lambda: self.r.execute_command("AI.MODELEXECUTE", "bomb", "INPUTS", 1, "n", "OUTPUTS", 1, "big"))
        # The worker's RLIMIT_DATA (512 MB) refuses the allocation: ONNX
        # Runtime reports it, or the worker dies of it (SIGABRT for an
        # uncaught std::bad_alloc).
        self.assertTrue("Failed to allocate memory" in err or "engine worker died (" in err, err)
        self.assertLess(rss_of(self.srv.proc.pid), rss + (32 << 20))
        self.run_mlp()


    def test_outputs_are_bounded_before_they_reach_the_server(self):
        # ConstantOfShape's output size comes from an input: a 2 GB output
        # was copied into the server before the -OOM (DAG_RO: 3.93 GB
        # VmHWM). A run's outputs are bounded as a tensor is (here
        # proto-max-bulk-len 16mb), refused in the worker's reply.
        # A server of its own: test_memory_bomb leaves the bomb's worker
        # at its memory limit.
        srv = Server("--proto-max-bulk-len", "16mb").start()
        self.addCleanup(srv.stop)
        r = srv.client()
        r.execute_command("AI.MODELSTORE", "bomb", "ONNX", "CPU", "BLOB", model("bomb.onnx"))
        r.execute_command("AI.TENSORSET", "n", "INT64", 1, "VALUES", 20_000_000)  # 80 MB of FLOAT
        pid = srv.proc.pid
        reset_peak(pid)
        base = proc_status(pid, "VmRSS")
        want = "model outputs would exceed the memory allowed to them (maxmemory, proto-max-bulk-len)"
        err = error_text(lambda: r.execute_command("AI.MODELEXECUTE", "bomb", "INPUTS", 1, "n", "OUTPUTS", 1, "big"))
        self.assertEqual(err, want)
        out = r.execute_command("AI.DAGEXECUTE_RO", "LOAD", 1, "n", "|>", "AI.MODELEXECUTE", "bomb", "INPUTS", 1, "n",
                                "OUTPUTS", 1, "y", "|>", "AI.TENSORGET", "y", "META")
        self.assertEqual(str(out[0]), want)
        self.assertLess(proc_status(pid, "VmHWM") - base, 48 << 20)
        self.assertFalse(r.exists("big"))
        r.execute_command("AI.TENSORSET", "n", "INT64", 1, "VALUES", 1000)
        r.execute_command("AI.MODELEXECUTE", "bomb", "INPUTS", 1, "n", "OUTPUTS", 1, "small")
        self.assertEqual(r.execute_command("AI.TENSORGET", "small", "META")[-1], [1000])


class KillTest(unittest.TestCase):
    def test_kill9_fails_only_runs_in_flight_on_that_worker(self):
        """32 clients loop MODELEXECUTE, 16 on a model in worker A and 16 on
        one in worker B; worker A is killed with SIGKILL. Only A's runs in
        flight (at most one per client) fail with the worker-death error;
        every request for B succeeds. A's model, the one that was running,
        is quarantined: a SIGKILL from outside cannot be told from one the
        worker sent itself (red-team review), so it is the model's crash;
        stored again, it runs in the replacement."""
        srv = Server("--engine-isolation", "shared", "--engine-workers", "2").start()
        try:
            r = srv.client()
            r.execute_command("AI.MODELSTORE", "a", "ONNX", "CPU", "BLOB", model("mlp.onnx"))
            # Placed on the worker with the fewest sessions: the other one.
            r.execute_command("AI.MODELSTORE", "b", "ONNX", "CPU", "BLOB", model("linear.onnx"))
            x = np.random.default_rng(2).random((1, 784), dtype=np.float32)
            r.execute_command("AI.TENSORSET", "x", "FLOAT", 1, 784, "BLOB", x.tobytes())
            r.execute_command("AI.TENSORSET", "xl", "FLOAT", 1, 4, "VALUES", 1, 2, 3, 4)
            workers = children(srv.proc.pid)
            self.assertEqual(len(workers), 2, workers)
            victim = workers[0]  # started for "a", the first model
            stop = threading.Event()
            counts = {}
            errors = []
            lock = threading.Lock()

            def loop(i):
                c = srv.client()
                key, args = ("a", ("x", "y%d" % i)) if i % 2 == 0 else ("b", ("xl", "y%d" % i))
                ok = fail = 0
                while not stop.is_set():
                    try:
                        c.execute_command("AI.MODELEXECUTE", key, "INPUTS", 1, args[0], "OUTPUTS", 1, args[1])
                        ok += 1
                    except redis.ResponseError as e:
                        fail += 1
                        with lock:
                            errors.append((key, str(e)))
                with lock:
                    counts[i] = (key, ok, fail)

            threads = [threading.Thread(target=loop, args=(i,)) for i in range(32)]
            for t in threads:
                t.start()
            time.sleep(1.0)
            os.kill(victim, signal.SIGKILL)
            poll(lambda: len(children(srv.proc.pid)) == 2 and victim not in children(srv.proc.pid),
                 timeout=10, what="a replacement worker")
            time.sleep(1.0)
            stop.set()
            for t in threads:
                t.join()
            a_ok = sum(ok for k, ok, _ in counts.values() if k == "a")
            b_ok = sum(ok for k, ok, _ in counts.values() if k == "b")
            a_fail = sum(f for k, _, f in counts.values() if k == "a")
            b_fail = sum(f for k, _, f in counts.values() if k == "b")
            print("\nkill -9 under 32 clients: a ok %d failed %d, b ok %d failed %d" % (a_ok, a_fail, b_ok, b_fail))
            self.assertEqual(b_fail, 0, errors)
            died = "model execution failed: engine worker died (SIGKILL)"
            quarantined = ("model execution failed: the model is quarantined: it crashed an engine worker (SIGKILL); "
                           "store it again to retry")
            self.assertLessEqual(sum(1 for _, text in errors if text == died), 16)  # at most the runs in flight
            for key, text in errors:
                self.assertIn((key, text), (("a", died), ("a", quarantined)))
            self.assertGreater(a_ok, 0)
            self.assertGreater(b_ok, 0)
            self.assertEqual(error_text(lambda: r.execute_command("AI.MODELEXECUTE", "a", "INPUTS", 1, "x", "OUTPUTS", 1, "y")),
                             quarantined)
            r.execute_command("AI.MODELSTORE", "a", "ONNX", "CPU", "BLOB", model("mlp.onnx"))
            self.assertEqual(r.execute_command("AI.MODELEXECUTE", "a", "INPUTS", 1, "x", "OUTPUTS", 1, "y"), b"OK")
            self.assertEqual(r.info("engine")["engine_worker_deaths_sigkill"], 1)
            self.assertTrue(srv.alive())
        finally:
            srv.stop()


class HangTest(unittest.TestCase):
    def test_session_creation_hang_is_refused_at_the_deadline(self):
        """No model at hand hangs ONNX Runtime's session creation, so the
        worker's test hook (ENCLAVEAI_ENGINE_TEST_HOOKS=1) hangs on
        hang_store.onnx's marker; the server side is the real one."""
        srv = start_with_env("ENCLAVEAI_ENGINE_TEST_HOOKS", "1", "--engine-store-timeout", "2")
        try:
            r = srv.client()
            r.execute_command("AI.MODELSTORE", "lin", "ONNX", "CPU", "BLOB", model("linear.onnx"))
            r.execute_command("AI.TENSORSET", "xl", "FLOAT", 1, 4, "VALUES", 1, 2, 3, 4)
            result = {}

            def store():
                c = srv.client()
                t0 = time.monotonic()
                try:
                    c.execute_command("AI.MODELSTORE", "hang", "ONNX", "CPU", "BLOB", model("hang_store.onnx"))
                    result["reply"] = "OK"
                except redis.ResponseError as e:
                    result["reply"] = str(e)
                result["took"] = time.monotonic() - t0

            t = threading.Thread(target=store)
            t.start()
            time.sleep(0.3)
            # Meanwhile the server answers, promptly.
            for _ in range(20):
                t0 = time.monotonic()
                self.assertTrue(r.ping())
                self.assertLess(time.monotonic() - t0, 0.5)
            t.join()
            self.assertEqual(result["reply"], "model could not be loaded: session creation did not finish within 2s")
            self.assertGreaterEqual(result["took"], 1.9)
            self.assertLess(result["took"], 10)
            self.assertFalse(r.exists("hang"))
            # The killed worker's other session is recreated in its replacement.
            self.assertEqual(r.execute_command("AI.MODELEXECUTE", "lin", "INPUTS", 1, "xl", "OUTPUTS", 1, "yl"), b"OK")
            self.assertEqual(r.info("engine")["engine_worker_deaths_timeout"], 1)
        finally:
            srv.stop()

    def test_store_queued_in_multi_compiles_outside_the_lock(self):
        """EXEC compiles queued models before it takes the transaction
        lock: compiled under it, a model that compiled for 20 s held every
        other client for 20 s per store (helper hunt)."""
        srv = start_with_env("ENCLAVEAI_ENGINE_TEST_HOOKS", "1", "--engine-store-timeout", "2")
        self.addCleanup(srv.stop)
        r = srv.client()
        result = {}

        def exec_stores():
            p = srv.client().pipeline(transaction=True)
            p.execute_command("AI.MODELSTORE", "hang", "ONNX", "CPU", "BLOB", model("hang_store.onnx"))
            p.execute_command("AI.MODELSTORE", "lin", "ONNX", "CPU", "BLOB", model("linear.onnx"))
            p.execute_command("AI.TENSORSET", "t", "INT8", 1, "VALUES", 1)
            result["reply"] = p.execute(raise_on_error=False)

        t = threading.Thread(target=exec_stores)
        t.start()
        time.sleep(0.3)
        for _ in range(10):
            t0 = time.monotonic()
            self.assertTrue(r.ping())
            self.assertEqual(r.execute_command("AI.TENSORSET", "other", "INT8", 1, "VALUES", 1), b"OK")
            self.assertLess(time.monotonic() - t0, 0.5)
        t.join()
        hang, lin, tset = result["reply"]
        self.assertEqual(str(hang), "model could not be loaded: session creation did not finish within 2s")
        self.assertEqual((lin, tset), (b"OK", b"OK"))
        self.assertEqual(r.exists("hang", "lin", "t"), 2)


class SpinTest(unittest.TestCase):
    def test_a_worker_spinning_outside_runs_is_killed(self):
        """A worker taken over by a hostile model can start threads that
        spin after its run has been answered, which no run's deadline
        bounds: they slowed every client for good (red-team review). The
        worker's test hook (ENCLAVEAI_ENGINE_TEST_HOOKS=1) starts two at
        the first run of a model carrying its marker; the server's watchdog
        kills a worker that uses CPU with no call in flight, blames no
        model, and the next runs work on its replacement."""
        marker = b"enclaveai-test-spin-after-run"
        srv = start_with_env("ENCLAVEAI_ENGINE_TEST_HOOKS", "1")
        self.addCleanup(srv.stop)
        r = srv.client()
        r.execute_command("AI.MODELSTORE", "spin", "ONNX", "CPU", "BLOB",
                          model("linear.onnx") + b"\x32" + bytes([len(marker)]) + marker)
        r.execute_command("AI.TENSORSET", "x", "FLOAT", 1, 4, "VALUES", 1, 2, 3, 4)
        [before] = children(srv.proc.pid)
        self.assertEqual(r.execute_command("AI.MODELEXECUTE", "spin", "INPUTS", 1, "x", "OUTPUTS", 1, "y"), b"OK")
        poll(lambda: r.info("engine").get("engine_worker_deaths_spin") == 1, timeout=10,
             what="the spinning worker's death")
        self.assertNotIn(before, children(srv.proc.pid))
        self.assertIn("engine worker killed: it used CPU with no call in flight", srv.stderr())
        # Not quarantined: the same model runs on the replacement.
        self.assertEqual(r.execute_command("AI.MODELEXECUTE", "spin", "INPUTS", 1, "x", "OUTPUTS", 1, "y"), b"OK")
        self.assertEqual(r.info("engine")["engine_worker_deaths"], 1)


class KilledClientTest(unittest.TestCase):
    def test_a_killed_clients_store_does_not_land_later(self):
        """A store whose client CLIENT KILL closes while the model compiles
        changes no key afterwards: it used to land seconds later, over a
        store and a delete acknowledged since (race hunt). In Redis a client
        is killed between commands: its command ran, or it does not."""
        srv = Server().start()
        self.addCleanup(srv.stop)
        r = srv.client()
        t0 = time.monotonic()
        r.execute_command("AI.MODELSTORE", "probe", "ONNX", "CPU", "BLOB", model("slow_compile.onnx"))
        compile_s = time.monotonic() - t0
        if compile_s < 0.6:
            self.skipTest("slow_compile.onnx compiled in %.2f s here" % compile_s)
        # Deleted, so that the store below compiles it again rather than
        # sharing the compiled model.
        self.assertEqual(r.execute_command("AI.MODELDEL", "probe"), b"OK")
        victim = srv.raw()
        vid = victim.cmd("CLIENT", "ID")
        victim.send(victim.encode("AI.MODELSTORE", "ghost", "ONNX", "CPU", "BLOB", model("slow_compile.onnx")))
        time.sleep(0.2)
        self.assertEqual(r.execute_command("CLIENT", "KILL", "ID", vid), 1)
        self.assertEqual(r.execute_command("AI.MODELSTORE", "ghost", "ONNX", "CPU", "BLOB", model("linear.onnx")), b"OK")
        self.assertEqual(r.execute_command("AI.MODELDEL", "ghost"), b"OK")
        time.sleep(compile_s * 2 + 0.5)
        self.assertEqual(r.exists("ghost"), 0)
        self.assertEqual(r.info("clients")["connected_clients"], 1)


class TenantTest(unittest.TestCase):
    def test_tenants_never_share_a_worker(self):
        """With users, alice's crash costs alice's worker only: bob's runs,
        looping meanwhile, all succeed."""
        srv = Server("--user", "alice", "on", ">pa", "--user", "bob", "on", ">pb").start()
        try:
            alice = srv.client(username="alice", password="pa")
            bob = srv.client(username="bob", password="pb")
            # The same bytes: without users (or with engine-isolation shared)
            # the two keys would share one session.
            for c, n in ((alice, "a"), (bob, "b")):
                c.execute_command("AI.MODELSTORE", "m" + n, "ONNX", "CPU", "BLOB", model("linear.onnx"))
                c.execute_command("AI.TENSORSET", "x" + n, "FLOAT", 1, 4, "VALUES", 1, 2, 3, 4)
            self.assertEqual(alice.info("engine")["engine_groups"], 2)
            self.assertEqual(len(children(srv.proc.pid)), 2)
            stop = threading.Event()
            bob_counts = [0, 0]

            def bob_loop():
                c = srv.client(username="bob", password="pb")
                while not stop.is_set():
                    try:
                        c.execute_command("AI.MODELEXECUTE", "mb", "INPUTS", 1, "xb", "OUTPUTS", 1, "yb")
                        bob_counts[0] += 1
                    except redis.ResponseError:
                        bob_counts[1] += 1

            t = threading.Thread(target=bob_loop)
            t.start()
            set_crash_inputs(alice)
            for _ in range(3):
                alice.execute_command("AI.MODELSTORE", "crash", "ONNX", "CPU", "BLOB", model("crash_roialign_run.onnx"))
                err = error_text(lambda: run_roialign(alice))
                self.assertEqual(err, "model execution failed: engine worker died (SIGSEGV)")
            time.sleep(0.3)
            stop.set()
            t.join()
            self.assertGreater(bob_counts[0], 0)
            self.assertEqual(bob_counts[1], 0)
            self.assertEqual(alice.execute_command("AI.MODELEXECUTE", "ma", "INPUTS", 1, "xa", "OUTPUTS", 1, "ya"), b"OK")
        finally:
            srv.stop()


class ProcShieldTest(unittest.TestCase):
    NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]

    def as_nobody(self, code):
        """Runs python code as uid 65534; its exit status."""
        return subprocess.run(self.NOBODY + [sys.executable, "-c", code],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30).returncode

    def test_workers_cannot_open_the_servers_proc_files(self):
        """Run as an unprivileged user, neither the server nor a worker can
        be opened through /proc by another process of that user (what a
        worker taken over by a hostile model is): /proc/PID/mem and
        /proc/PID/fd let one read every tenant's model through the server's
        memfds, and write the server's memory (security review)."""
        import shutil
        import subprocess as sp
        binary = os.path.join(REPO, "bin", "enclaveai-server")
        if os.geteuid() != 0 or shutil.which("setpriv") is None:
            self.skipTest("needs root and setpriv to run the server as another user")
        if sp.run(self.NOBODY + ["test", "-x", binary]).returncode != 0:
            self.skipTest("the server binary is not reachable by uid 65534 here")
        import tempfile
        d = tempfile.mkdtemp(prefix="enclaveai-shield-")
        self.addCleanup(shutil.rmtree, d, True)
        os.chown(d, 65534, 65534)
        from harness import free_port
        port = free_port()
        errf = open(os.path.join(d, "stderr"), "wb")
        self.addCleanup(errf.close)
        proc = sp.Popen(self.NOBODY + [binary, "--port", str(port), "--dir", d, "--appendonly", "no", "--save", "",
                                       "--user", "alice", "on", ">pa", "--user", "bob", "on", ">pb"],
                        cwd=d, stdin=sp.DEVNULL, stdout=sp.DEVNULL, stderr=errf)
        self.addCleanup(proc.wait)
        self.addCleanup(proc.kill)

        def ready():
            try:
                return redis.Redis(port=port, username="alice", password="pa").ping()
            except redis.RedisError:
                return False
        poll(ready, timeout=20, what="the server run as uid 65534")
        for user, pw in (("alice", "pa"), ("bob", "pb")):
            c = redis.Redis(port=port, username=user, password=pw)
            c.execute_command("AI.MODELSTORE", "m" + user, "ONNX", "CPU", "BLOB", model("linear.onnx"))
        workers = children(proc.pid)
        self.assertEqual(len(workers), 2)
        for pid in [proc.pid] + workers:
            for code in ("open('/proc/%d/mem', 'rb')" % pid, "import os; os.listdir('/proc/%d/fd')" % pid):
                self.assertNotEqual(self.as_nobody(code), 0, "uid 65534 ran %s" % code)
        # The check itself works: a process of that user's own is open to it.
        self.assertEqual(self.as_nobody("import os; os.listdir('/proc/self/fd')"), 0)

    def test_a_taken_over_worker_cannot_reach_the_server(self):
        """A worker taken over by a hostile model could end the server with
        one kill(2) of its parent's pid, set its RLIMIT_FSIZE to 0 (the next
        log write then kills it), open its memory as root, write the
        server's files and read its seal key (and send it back in a run's
        output). The worker's test hook (ENCLAVEAI_ENGINE_TEST_HOOKS=1)
        tries each, where a model's code would run, on a model carrying its
        marker; the server side is the real one."""
        marker = b"enclaveai-test-probe-escapes"
        srv = start_with_env("ENCLAVEAI_ENGINE_TEST_HOOKS", "1")
        try:
            r = srv.client()
            with self.assertRaises(redis.ResponseError) as cm:
                r.execute_command("AI.MODELSTORE", "probe", "ONNX", "CPU", "BLOB",
                                  model("linear.onnx") + b"\x32" + bytes([len(marker)]) + marker)
            # A worker's own words never reach a client: the log has them.
            self.assertEqual(str(cm.exception), "internal error")
            found = re.search(r'escape probes: ([^"\n]*)', srv.stderr())
            self.assertIsNotNone(found, srv.stderr())
            msg = found.group(1)
            got = dict(kv.split("=", 1) for kv in msg.split("; "))
            self.assertTrue(got["landlock"].startswith("abi "), msg)
            for k in ("signal", "signal-all", "prlimit", "proc-mem", "create", "read", "libdir", "proc-net", "parent-net", "clone3",
                      "io_uring", "chmod", "setxattr", "shm", "setown", "fiosetown", "pidfd_send_signal", "affinity"):
                self.assertFalse(got[k].startswith("ok"), "%s worked: %s" % (k, msg))
            self.assertEqual(got["oom"], "1000", msg)
            self.assertEqual(got["caps"], "0000000000000000", msg)
            self.assertTrue(r.ping())
            r.execute_command("AI.MODELSTORE", "lin", "ONNX", "CPU", "BLOB", model("linear.onnx"))
            r.execute_command("AI.TENSORSET", "x", "FLOAT", 1, 4, "VALUES", 1, 2, 3, 4)
            self.assertEqual(r.execute_command("AI.MODELEXECUTE", "lin", "INPUTS", 1, "x", "OUTPUTS", 1, "y"), b"OK")
        finally:
            srv.stop()


class TimerSlackEnvTest(unittest.TestCase):
    def test_environment_sets_the_slack(self):
        """ENCLAVEAI_TIMER_SLACK_NS sets the server's slack; its workers
        inherit it (their environment is the server's fixed list)."""
        srv = start_with_env("ENCLAVEAI_TIMER_SLACK_NS", "200000")
        try:
            r = srv.client()
            r.execute_command("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", model("linear.onnx"))
            r.execute_command("AI.TENSORSET", "xl", "FLOAT", 1, 4, "VALUES", 1, 2, 3, 4)
            self.assertEqual(r.execute_command("AI.MODELEXECUTE", "m", "INPUTS", 1, "xl", "OUTPUTS", 1, "yl"), b"OK")
            self.assertEqual(timer_slacks(srv.proc.pid), {200000})
            workers = children(srv.proc.pid)
            self.assertTrue(workers)
            for w in workers:
                self.assertEqual(timer_slacks(w), {200000})
        finally:
            srv.stop()


class ReplyPollTest(unittest.TestCase):
    """engine-reply-poll (worker/lane.go, on by default): a run that is
    all the server is doing polls its lane for the reply instead of
    sleeping in the poller, and its worker for the next request. The
    answers are the same as a server's that does not poll, for one client
    and for several at once (when runs stop polling)."""

    def test_same_answers_with_polling(self):
        polling, plain = Server().start(), Server("--engine-reply-poll", "0").start()
        try:
            rng = np.random.default_rng(3)
            inputs = [rng.random((1, 784), dtype=np.float32) for _ in range(4)]
            want = []
            r = plain.client()
            r.execute_command("AI.MODELSTORE", "mlp", "ONNX", "CPU", "BLOB", model("mlp.onnx"))
            for x in inputs:
                r.execute_command("AI.TENSORSET", "x", "FLOAT", 1, 784, "BLOB", x.tobytes())
                r.execute_command("AI.MODELEXECUTE", "mlp", "INPUTS", 1, "x", "OUTPUTS", 1, "y")
                want.append(r.execute_command("AI.TENSORGET", "y", "BLOB"))
            r = polling.client()
            self.assertEqual(r.config_get("engine-reply-poll"), {"engine-reply-poll": "200"})
            r.execute_command("AI.MODELSTORE", "mlp", "ONNX", "CPU", "BLOB", model("mlp.onnx"))
            failures = []

            def client(i, rounds):
                c = polling.client()
                try:
                    c.execute_command("AI.TENSORSET", "x%d" % i, "FLOAT", 1, 784, "BLOB", inputs[i].tobytes())
                    for _ in range(rounds):
                        c.execute_command("AI.MODELEXECUTE", "mlp", "INPUTS", 1, "x%d" % i, "OUTPUTS", 1, "y%d" % i)
                        got = c.execute_command("AI.TENSORGET", "y%d" % i, "BLOB")
                        if got != want[i]:
                            failures.append((i, "output differs"))
                            return
                except Exception as e:  # noqa: BLE001 (reported below)
                    failures.append((i, repr(e)))

            client(0, 50)  # one client: the runs poll once it has been alone 10 ms
            threads = [threading.Thread(target=client, args=(i, 50)) for i in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            self.assertEqual(failures, [])
        finally:
            polling.stop()
            plain.stop()


class WallOffTest(unittest.TestCase):
    def test_off_runs_in_process(self):
        srv = Server("--engine-isolation", "off").start()
        try:
            r = srv.client()
            r.execute_command("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", model("linear.onnx"))
            r.execute_command("AI.TENSORSET", "xl", "FLOAT", 1, 4, "VALUES", 1, 2, 3, 4)
            self.assertEqual(r.execute_command("AI.MODELEXECUTE", "m", "INPUTS", 1, "xl", "OUTPUTS", 1, "yl"), b"OK")
            self.assertIn("libonnxruntime", maps(srv.proc.pid))
            self.assertEqual(children(srv.proc.pid), [])
        finally:
            srv.stop()


if __name__ == "__main__":
    unittest.main()
