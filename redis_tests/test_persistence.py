#!/usr/bin/python3
"""Black-box tests of issue "Sealed snapshots": SAVE, BGSAVE, LASTSAVE,
`save` rules, SHUTDOWN SAVE|NOSAVE, SIGTERM, the snapshot's checks at start
(tamper, wrong seal key, --load-bad-snapshot), no plaintext on disk, the
seal key file, and attestation (AI.ATTEST, enclaveai-cli attest).

Unlike the other suites, a test here owns a data dir that outlives one
server process: DataDir starts, kills and restarts servers on it. Run with
Debian's python (redis 4.3.4, numpy):

    make build models
    cd redis_tests && /usr/bin/python3 -m unittest test_persistence -v
"""

import glob
import hashlib
import multiprocessing
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import traceback
import unittest
import uuid

import numpy as np
import redis

import harness
from harness import CRASH_PATTERNS, RawConn, ServerError, free_port, model_bytes, poll, server_binary

CLI = os.path.join(harness.REPO, "bin", "enclaveai-cli")
DUMP = "dump.aidb"

# Every dtype AI.TENSORSET takes, with its numpy dtype (STRING apart).
DTYPES = {
    "FLOAT": np.float32, "DOUBLE": np.float64,
    "INT8": np.int8, "INT16": np.int16, "INT32": np.int32, "INT64": np.int64,
    "UINT8": np.uint8, "UINT16": np.uint16, "UINT32": np.uint32, "UINT64": np.uint64,
    "BOOL": np.bool_,
}
NUMPY_TYPES = {k.encode(): v for k, v in DTYPES.items()}


def read_file(path):
    with open(path, "rb") as f:
        return f.read()


def write_file(path, data, mode=0o600):
    with open(path, "wb") as f:
        f.write(data)
    os.chmod(path, mode)


def linear_np(x):
    """linear.onnx in numpy (gen_models.py: W = 0.1*arange(12), b = [1,2,3])."""
    w = (0.1 * np.arange(12, dtype=np.float64)).reshape(4, 3).astype(np.float32)
    return (x.astype(np.float32) @ w + np.array([1, 2, 3], np.float32)).astype(np.float32)


def tget(r, key):
    """A numeric tensor as a numpy array."""
    rep = r.execute_command("AI.TENSORGET", key, "META", "BLOB")
    d = dict(zip(rep[::2], rep[1::2]))
    return np.frombuffer(d[b"blob"], dtype=NUMPY_TYPES[d[b"dtype"]]).reshape(d[b"shape"])


def execute(r, key, ins, outs):
    return r.execute_command("AI.MODELEXECUTE", key, "INPUTS", len(ins), *ins, "OUTPUTS", len(outs), *outs)


def as_dict(flat):
    return {k.decode(): v for k, v in zip(flat[::2], flat[1::2])}


def info(r, section):
    """INFO <section> as a dict of str, parsed by hand: redis-py would turn
    some values into numbers or dicts."""
    with RawConn(r.connection_pool.connection_kwargs["port"]) as c:
        text = c.cmd("INFO", section).decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            k, _, v = line.partition(":")
            out[k] = v
    return out


def lastsave(r):
    """LASTSAVE as an int (redis-py turns it into a datetime, 0 into None)."""
    v = r.lastsave()
    return 0 if v is None else int(v.timestamp())


def random_tensor(rng, dt, shape):
    if dt is np.bool_:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if np.issubdtype(dt, np.floating):
        return rng.standard_normal(shape).astype(dt)
    i = np.iinfo(dt)
    return rng.integers(i.min, i.max, size=shape, dtype=dt, endpoint=True)


class DataDir:
    """A data dir and the servers started on it, one at a time.

    Server logs go to a separate dir, so the data dir holds only what the
    server writes there (seal key, snapshot, temporary files)."""

    def __init__(self, test):
        self.test = test
        self.path = tempfile.mkdtemp(prefix="enclaveai-persist-")
        self.logs = tempfile.mkdtemp(prefix="enclaveai-persist-log-")
        self.proc = None
        self.port = None
        self.clients = []
        self.starts = 0
        self.env = {k: v for k, v in os.environ.items() if k != "ENCLAVEAI_SEAL_KEY"}
        test.addCleanup(self.cleanup)

    def file(self, name=DUMP):
        return os.path.join(self.path, name)

    def _spawn(self, args):
        # These tests are about the snapshot: with the append-only log on
        # (the default) a restart loads the log instead. test_aof.py tests
        # the log.
        if "--appendonly" not in args:
            args = ("--appendonly", "no") + tuple(args)
        self.starts += 1
        self.log_path = os.path.join(self.logs, "server-%d.stderr" % self.starts)
        self.port = free_port()
        with open(self.log_path, "wb") as errf:
            return subprocess.Popen(
                [server_binary(), "--port", str(self.port), "--dir", self.path] + [str(a) for a in args],
                cwd=self.logs, env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errf)

    def log(self):
        return read_file(self.log_path).decode(errors="replace")

    def start(self, *args):
        """Starts a server and waits until it has loaded its snapshot;
        returns a redis-py client."""
        assert self.proc is None, "a server is already running"
        self.proc = self._spawn(args)
        poll(self._ready, timeout=harness.START_TIMEOUT, what="server on %s to be ready" % self.path)
        return self.client()

    def _ready(self):
        if self.proc.poll() is not None:
            raise AssertionError("server exited with %s before it was ready; stderr:\n%s"
                                 % (self.proc.returncode, self.log()))
        try:
            with RawConn(self.port, timeout=1) as c:
                return isinstance(c.cmd("DBSIZE"), int)
        except (OSError, ConnectionError):
            return False

    def start_fails(self, *args, timeout=10):
        """Starts a server that must refuse to start; returns (exit status,
        stderr)."""
        proc = self._spawn(args)
        try:
            rc = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise AssertionError("server started although it should have refused; stderr:\n" + self.log())
        return rc, self.log()

    def client(self, **kw):
        kw.setdefault("socket_timeout", 20)
        c = redis.Redis(host="127.0.0.1", port=self.port, **kw)
        self.clients.append(c)
        return c

    def raw(self):
        c = RawConn(self.port, timeout=20)
        self.test.addCleanup(c.close)
        return c

    def _closed(self):
        for c in self.clients:
            c.close()
        self.clients = []

    def _exited(self, expect_rc=0):
        rc = self.proc.returncode
        self.proc = None
        err = self.log()
        self.test.assertFalse(CRASH_PATTERNS.search(err), "crash text on stderr:\n" + err[-4000:])
        if expect_rc is not None:
            self.test.assertEqual(rc, expect_rc, "server exit status; stderr:\n" + err[-4000:])
        return rc

    def kill9(self):
        self._closed()
        self.proc.kill()
        self.proc.wait()
        self.proc = None

    def shutdown(self, *args):
        """SHUTDOWN [args]: the server closes the connection and exits 0."""
        self._closed()
        with RawConn(self.port, timeout=30) as c:
            c.send(RawConn.encode("SHUTDOWN", *args))
            data = c.read_until_closed(timeout=30)
        self.test.assertEqual(data, b"", "SHUTDOWN replies nothing when it succeeds")
        self.proc.wait(30)
        return self._exited()

    def sigterm(self):
        self._closed()
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(30)
        return self._exited()

    def cleanup(self):
        if self.proc is not None:
            self.kill9()
        shutil.rmtree(self.path, ignore_errors=True)
        shutil.rmtree(self.logs, ignore_errors=True)


class PersistCase(unittest.TestCase):
    def datadir(self):
        return DataDir(self)

    def assertOK(self, reply):
        self.assertIn(reply, (b"OK", True, "OK"))


# ---------------------------------------------------------------------------
# Round trip through SAVE and kill -9
# ---------------------------------------------------------------------------

class RoundTripTest(PersistCase):

    def test_every_value_type_survives_save_and_kill9(self):
        d = self.datadir()
        started = int(time.time())
        r = d.start("--save", "")
        rng = np.random.default_rng(11)
        inf = info(r, "persistence")
        self.assertEqual((inf["rdb_saves"], inf["rdb_bgsave_in_progress"], inf["loading"]), ("0", "0", "0"))
        self.assertEqual(inf["rdb_filename"], d.file())
        # As in Redis, a server counts as saved when it starts.
        last0 = lastsave(r)
        self.assertTrue(started <= last0 <= time.time(), (started, last0))
        self.assertEqual(int(inf["rdb_last_save_time"]), last0)

        # Tensors of every dtype, two ranks each.
        tensors = {}
        for name, dt in DTYPES.items():
            for shape in ((5,), (2, 3, 4)):
                key = "t:%s:%d" % (name, len(shape))
                a = random_tensor(rng, dt, shape)
                self.assertOK(r.execute_command("AI.TENSORSET", key, name, *shape, "BLOB", a.tobytes()))
                tensors[key] = a
        empty = np.zeros((0, 3), np.float32)
        self.assertOK(r.execute_command("AI.TENSORSET", "t:empty", "FLOAT", 0, 3))
        tensors["t:empty"] = empty
        # Identical blobs under two keys.
        same = random_tensor(rng, np.int64, (64,))
        for key in ("same:1", "same:2"):
            self.assertOK(r.execute_command("AI.TENSORSET", key, "INT64", 64, "BLOB", same.tobytes()))
            tensors[key] = same
        strblob = "héllo".encode() + b"\0\0" + b"x" * 300 + b"\0" + b"last\0"
        self.assertOK(r.execute_command("AI.TENSORSET", "t:str", "STRING", 4, "BLOB", strblob))
        # STRING tensors without elements: an empty blob (the snapshot once
        # held one the load then refused, and the server did not start).
        self.assertOK(r.execute_command("AI.TENSORSET", "t:str0", "STRING", 0))
        self.assertOK(r.execute_command("AI.TENSORSET", "t:str00", "STRING", 2, 0, "BLOB", b""))
        self.assertOK(r.execute_command("AI.TENSORSET", "t:ttl", "FLOAT", 2, "VALUES", 1.5, -2))
        self.assertEqual(r.execute_command("EXPIRE", "t:ttl", 1000), 1)
        self.assertOK(r.execute_command("AI.TENSORSET", "t:pttl", "INT8", 1, "VALUES", 7))
        self.assertEqual(r.execute_command("PEXPIRE", "t:pttl", 600_000), 1)

        # Models.
        lin = model_bytes("linear.onnx")
        self.assertOK(r.execute_command("AI.MODELSTORE", "m:lin", "ONNX", "CPU", "TAG", "v1", "BLOB", lin))
        self.assertOK(r.execute_command("AI.MODELSTORE", "m:lin2", "ONNX", "CPU", "BLOB", lin))  # same blob
        self.assertOK(r.execute_command("AI.MODELSTORE", "m:batched", "ONNX", "CPU", "TAG", "b", "BATCHSIZE", 8,
                                        "MINBATCHSIZE", 2, "MINBATCHTIMEOUT", 7, "BLOB", lin))
        # STRING tensors in a model: ONNX Runtime's; the pure-Go engine of
        # the cgo-free build refuses them (make test-nocgo runs this too).
        ort = info(r, "server").get("inference_engine", "").startswith("onnxruntime")
        if ort:
            self.assertOK(r.execute_command("AI.MODELSTORE", "m:str", "ONNX", "CPU", "BLOB",
                                            model_bytes("string_identity.onnx")))
        star = r.execute_command("AI.MODELSTORE", "*", "ONNX", "CPU", "TAG", "anon", "BLOB", lin)
        self.assertEqual(str(uuid.UUID(star.decode())), star.decode())
        self.assertOK(r.execute_command("AI.MODELSTORE", "m:nopersist", "ONNX", "CPU", "NOPERSIST", "BLOB",
                                        model_bytes("add_int.onnx")))
        self.assertEqual(as_dict(r.execute_command("AI.MODELINFO", "m:nopersist"))["persist"], 0)
        self.assertEqual(as_dict(r.execute_command("AI.MODELINFO", "m:lin"))["persist"], 1)
        models = ["m:lin", "m:lin2", "m:batched", star] + (["m:str"] if ort else [])
        metas = {k: r.execute_command("AI.MODELGET", k, "META") for k in models}
        infos = {k: as_dict(r.execute_command("AI.MODELINFO", k)) for k in models}
        self.assertEqual(infos["m:lin"]["shared_with"], 3)
        self.assertEqual(metas["m:batched"][4:10], [b"tag", b"b", b"batchsize", 8, b"minbatchsize", 2])

        x = np.array([[1, 2, 3, 4], [0.5, -1, 2, 8]], np.float32)
        self.assertOK(r.execute_command("AI.TENSORSET", "x", "FLOAT", 2, 4, "BLOB", x.tobytes()))
        tensors["x"] = x
        self.assertOK(execute(r, "m:lin", ["x"], ["y"]))
        y_before = tget(r, "y")
        tensors["y"] = y_before
        np.testing.assert_allclose(y_before, linear_np(x), rtol=1e-6, atol=1e-6)

        nkeys = r.dbsize()
        self.assertEqual(nkeys, len(tensors) + 5 + len(models) + 1)
        inf = info(r, "persistence")
        self.assertGreater(int(inf["rdb_changes_since_last_save"]), 0)

        before = int(time.time())
        self.assertOK(r.execute_command("SAVE"))
        after = int(time.time())
        last = lastsave(r)
        self.assertTrue(before <= last <= after, (before, last, after))
        inf = info(r, "persistence")
        self.assertEqual(inf["rdb_changes_since_last_save"], "0")
        self.assertEqual(inf["rdb_saves"], "1")
        self.assertEqual(inf["rdb_last_bgsave_status"], "ok")
        self.assertEqual(inf["rdb_bgsave_in_progress"], "0")
        self.assertEqual(int(inf["rdb_last_save_time"]), last)
        self.assertTrue(os.path.isfile(d.file()))
        self.assertEqual(os.stat(d.file()).st_mode & 0o777, 0o600, "snapshot readable by its owner only")

        # A write after SAVE is lost by kill -9: nothing saves behind our back.
        self.assertOK(r.execute_command("AI.TENSORSET", "after-save", "FLOAT", 1, "VALUES", 1))
        self.assertEqual(info(r, "persistence")["rdb_changes_since_last_save"], "1")
        d.kill9()

        r = d.start("--save", "")
        self.assertEqual(r.dbsize(), nkeys - 1, "every key but the NOPERSIST model")
        # A snapshot just loaded counts as saved.
        inf = info(r, "persistence")
        self.assertEqual(inf["rdb_changes_since_last_save"], "0")
        self.assertGreater(int(inf["rdb_last_save_time"]), 0)
        self.assertEqual(r.exists("after-save", "m:nopersist"), 0)
        for key, a in tensors.items():
            with self.subTest(tensor=key):
                got = tget(r, key)
                self.assertEqual(got.dtype, a.dtype)
                np.testing.assert_array_equal(got, a)
        self.assertEqual(r.execute_command("AI.TENSORGET", "t:str", "META", "BLOB"),
                         [b"dtype", b"STRING", b"shape", [4], b"blob", strblob])
        self.assertEqual(r.execute_command("AI.TENSORGET", "t:str", "VALUES"),
                         ["héllo".encode(), b"", b"x" * 300, b"last"])
        self.assertEqual(r.execute_command("AI.TENSORGET", "t:str0", "META", "BLOB"),
                         [b"dtype", b"STRING", b"shape", [0], b"blob", b""])
        self.assertEqual(r.execute_command("AI.TENSORGET", "t:str00", "META", "VALUES"),
                         [b"dtype", b"STRING", b"shape", [2, 0], b"values", []])
        self.assertEqual(r.execute_command("AI.TENSORGET", "t:ttl", "VALUES"), [b"1.5", b"-2"])
        self.assertTrue(990 <= r.ttl("t:ttl") <= 1000, r.ttl("t:ttl"))
        self.assertTrue(590_000 <= r.pttl("t:pttl") <= 600_000, r.pttl("t:pttl"))
        self.assertEqual(r.ttl("t:FLOAT:1"), -1)
        for k in models:
            with self.subTest(model=k):
                self.assertEqual(r.type(k), b"AI__MODEL")
                self.assertEqual(r.execute_command("AI.MODELGET", k, "META"), metas[k])
                got = as_dict(r.execute_command("AI.MODELINFO", k))
                for field in ("id", "sha256", "size", "tag", "batchsize", "minbatchsize", "minbatchtimeout",
                              "optimize", "shared_with", "persist", "created"):
                    self.assertEqual(got[field], infos[k][field], field)
        self.assertEqual(r.execute_command("AI.MODELGET", "m:lin", "BLOB"), lin)
        self.assertEqual(r.execute_command("AI.MODELGET", star, "META")[5], b"anon")

        # Same outputs as before the restart, from every restored model.
        for k in ("m:lin", "m:lin2", "m:batched", star):
            with self.subTest(execute=k):
                self.assertOK(execute(r, k, ["x"], ["y2"]))
                np.testing.assert_array_equal(tget(r, "y2"), y_before)
        if ort:
            self.assertOK(execute(r, "m:str", ["t:str"], ["s2"]))
            self.assertEqual(r.execute_command("AI.TENSORGET", "s2", "BLOB"), strblob)
        d.shutdown("NOSAVE")

    def test_lastsave_advances(self):
        d = self.datadir()
        r = d.start("--save", "")
        self.assertOK(r.execute_command("SAVE"))
        first = lastsave(r)
        poll(lambda: int(time.time()) > first, timeout=2, interval=0.05, what="the clock to pass a second")
        self.assertOK(r.execute_command("AI.TENSORSET", "t", "FLOAT", 1, "VALUES", 1))
        self.assertOK(r.execute_command("SAVE"))
        second = lastsave(r)
        self.assertGreater(second, first)
        self.assertEqual(info(r, "persistence")["rdb_saves"], "2")
        d.shutdown("NOSAVE")

    def test_empty_keyspace_saves_and_loads(self):
        d = self.datadir()
        r = d.start("--save", "")
        self.assertOK(r.execute_command("SAVE"))
        d.kill9()
        r = d.start("--save", "")
        self.assertEqual(r.dbsize(), 0)
        d.shutdown("NOSAVE")


# ---------------------------------------------------------------------------
# SHUTDOWN and SIGTERM
# ---------------------------------------------------------------------------

class FlushTest(PersistCase):
    def test_flushall_saves_without_the_log(self):
        """Without the log and with save rules, FLUSHALL and FLUSHDB save
        the empty keyspace before they answer, as Redis's FLUSHALL does:
        a kill -9 after them brought back every key of the last snapshot
        (durability review). With no save rules nothing is saved."""
        for cmd in ("FLUSHALL", "FLUSHDB"):
            with self.subTest(cmd=cmd):
                d = self.datadir()
                r = d.start("--save", "3600 1")
                r.execute_command("AI.TENSORSET", "a", "FLOAT", 1, "VALUES", 1)
                self.assertOK(r.execute_command("SAVE"))
                self.assertOK(r.execute_command(cmd))
                d.kill9()
                r = d.start("--save", "3600 1")
                self.assertEqual(r.keys("*"), [])
                d.cleanup()
        d = self.datadir()
        r = d.start("--save", "")
        r.execute_command("AI.TENSORSET", "a", "FLOAT", 1, "VALUES", 1)
        self.assertOK(r.execute_command("SAVE"))
        self.assertOK(r.execute_command("FLUSHALL"))
        d.kill9()
        r = d.start("--save", "")
        self.assertEqual(r.keys("*"), [b"a"])

    def test_flush_in_exec_during_a_bgsave_saves(self):
        """FLUSHALL and FLUSHDB inside MULTI/EXEC while a background save
        runs abandon that save and save the empty keyspace before EXEC
        answers, as Redis's FLUSHALL kills its saving child: they did not
        save, and a kill -9 after EXEC brought the flushed keys back from
        the last snapshot, or from the background save, of the keyspace
        before the flush, once it had ended. The abandoned save, ending
        after EXEC, replaces nothing and counts as no save."""
        chunk = bytes(4 << 20)
        for cmd, wait in (("FLUSHALL", False), ("FLUSHDB", True)):
            with self.subTest(cmd=cmd, wait_for_the_abandoned_save=wait):
                d = self.datadir()
                r = d.start("--save", "3600 1")
                p = r.pipeline(transaction=False)
                for i in range(48):  # 192 MiB: a save of seconds on this machine
                    p.execute_command("AI.TENSORSET", "t%d" % i, "UINT8", len(chunk), "BLOB", chunk)
                p.execute()
                self.assertOK(r.execute_command("SAVE"))
                saves = int(info(r, "persistence")["rdb_saves"])
                self.assertTrue(r.execute_command("BGSAVE"))
                p = r.pipeline(transaction=True)
                p.execute_command("INFO", "persistence")
                p.execute_command(cmd)
                before, flushed = p.execute()
                self.assertEqual(before["rdb_bgsave_in_progress"], 1, "the BGSAVE had ended before EXEC")
                self.assertTrue(flushed)
                if wait:
                    poll(lambda: info(r, "persistence")["rdb_bgsave_in_progress"] == "0", timeout=60,
                         what="the background save to end")
                    self.assertEqual(int(info(r, "persistence")["rdb_saves"]), saves + 1)  # the flush's
                    self.assertIn("snapshot abandoned", d.log())
                d.kill9()
                r = d.start("--save", "3600 1")
                self.assertEqual(r.keys("*"), [])
                d.cleanup()


class ShutdownTest(PersistCase):

    def put(self, r, key):
        self.assertOK(r.execute_command("AI.TENSORSET", key, "INT32", 2, "VALUES", 1, 2))

    def test_shutdown_save_without_rules(self):
        d = self.datadir()
        r = d.start("--save", "")
        self.put(r, "a")
        d.shutdown("SAVE")
        r = d.start("--save", "")
        self.assertEqual(r.keys(), [b"a"])
        # Without rules, plain SHUTDOWN does not save.
        self.put(r, "b")
        d.shutdown()
        r = d.start("--save", "")
        self.assertEqual(r.keys(), [b"a"])
        d.shutdown("NOSAVE")

    def test_shutdown_nosave_with_rules(self):
        d = self.datadir()
        r = d.start()  # default save rules
        self.put(r, "a")
        self.assertOK(r.execute_command("SAVE"))
        self.put(r, "b")
        d.shutdown("NOSAVE")
        r = d.start()
        self.assertEqual(r.keys(), [b"a"])
        # With rules, plain SHUTDOWN saves.
        self.put(r, "c")
        d.shutdown()
        r = d.start()
        self.assertEqual(sorted(r.keys()), [b"a", b"c"])
        d.shutdown("NOSAVE")

    def test_sigterm_saves_with_default_rules(self):
        d = self.datadir()
        r = d.start()
        self.assertEqual(r.config_get("save")["save"], "3600 1 300 100 60 10000")
        self.put(r, "a")
        self.assertFalse(os.path.exists(d.file()))
        d.sigterm()
        self.assertTrue(os.path.exists(d.file()))
        r = d.start()
        self.assertEqual(r.keys(), [b"a"])
        d.shutdown("NOSAVE")

    def test_writes_acknowledged_during_shutdown_are_saved(self):
        """Three clients write while another sends SHUTDOWN (save rules
        set, no log): every write acknowledged is in the final snapshot,
        and later ones are refused, as nothing runs beside Redis's
        SHUTDOWN. The writes went on during the save's copy and after it,
        and were acknowledged and lost (durability review: 1,585 of 4,332)."""
        d = self.datadir()
        r = d.start("--save", "3600 1")
        blob = bytes(1 << 20)
        for i in range(40):  # a save that takes a while
            self.assertOK(r.execute_command("AI.TENSORSET", "big%d" % i, "UINT8", len(blob), "BLOB", blob))
        acked = [[] for _ in range(3)]
        refused = []

        def writer(t):
            c = redis.Redis(port=d.port, socket_timeout=30)
            i = 0
            while True:
                key = "w%d_%d" % (t, i)
                try:
                    c.execute_command("AI.TENSORSET", key, "INT32", 1, "VALUES", i)
                except redis.ResponseError as e:
                    refused.append(str(e))
                    return
                except redis.ConnectionError:
                    return
                acked[t].append(key)
                i += 1
        threads = [threading.Thread(target=writer, args=(t,)) for t in range(3)]
        for t in threads:
            t.start()
        time.sleep(0.3)
        d.shutdown()
        for t in threads:
            t.join()
        r = d.start("--save", "3600 1")
        keys = [k for a in acked for k in a]
        self.assertGreater(len(keys), 0)
        missing = [k for k in keys if not r.exists(k)]
        self.assertEqual(missing, [], "%d of %d acknowledged writes lost" % (len(missing), len(keys)))
        for e in refused:
            self.assertEqual(e, "the server is shutting down: the write was not applied")
        d.shutdown("NOSAVE")

    def test_shutdown_and_sigterm_during_a_bgsave_save_everything(self):
        """A background save under way is abandoned for the final save, as
        Redis kills its saving child: SHUTDOWN and SIGTERM save every write
        acknowledged at once (operator review: SHUTDOWN failed, and SIGTERM
        exited without saving, losing the writes made since the BGSAVE's
        instant). They waited for the save under way to end and then saved
        everything again: with these 192 MiB, 0.42 s to exit where it now
        takes 0.23 s (commands/persist.go FinalSave)."""
        d = self.datadir()
        blob = bytes(4 << 20)
        keys = sorted([b"late"] + [b"t%d" % i for i in range(48)])
        for stop in ("SHUTDOWN", "SIGTERM"):
            with self.subTest(stop=stop):
                r = d.start()
                for i in range(48):
                    r.execute_command("AI.TENSORSET", "t%d" % i, "UINT8", len(blob), "BLOB", blob)
                self.assertTrue(r.execute_command("BGSAVE"))
                self.put(r, "late")
                # A save of 192 MiB takes about half a second here.
                self.assertEqual(r.info("persistence")["rdb_bgsave_in_progress"], 1)
                if stop == "SHUTDOWN":
                    d.shutdown()
                else:
                    d.sigterm()
                log = d.log()
                self.assertIn("the final save (SHUTDOWN, SIGTERM) abandons the save under way", log)
                self.assertIn("snapshot abandoned: a newer save superseded it", log)
                self.assertNotIn("waiting for the background save", log)
                r = d.start()
                self.assertEqual(sorted(r.keys()), keys)
                self.assertEqual(r.execute_command("AI.TENSORGET", "t47", "META")[1], b"UINT8")
                r.delete("late")
                d.shutdown("SAVE")

    def test_sigterm_whose_save_fails_keeps_serving(self):
        """As Redis ("can't exit"): a SIGTERM whose save fails leaves the
        server serving, the writes since the last snapshot kept (operator
        review: it exited and lost them); once the save can succeed, the
        next SIGTERM saves and exits."""
        d = self.datadir()
        r = d.start()
        self.put(r, "a")
        os.mkdir(d.file())  # the snapshot cannot take its name
        d.proc.send_signal(signal.SIGTERM)
        poll(lambda: "can't exit" in d.log(), timeout=20, what="the refused exit")
        self.assertIsNone(d.proc.poll())
        self.assertEqual(r.execute_command("AI.TENSORGET", "a", "VALUES"), [1, 2])
        os.rmdir(d.file())
        d.sigterm()
        r = d.start()
        self.assertEqual(r.keys(), [b"a"])
        d.shutdown("NOSAVE")

    def test_sigterm_without_rules_does_not_save(self):
        d = self.datadir()
        r = d.start("--save", "")
        self.put(r, "a")
        d.sigterm()
        self.assertFalse(os.path.exists(d.file()))
        r = d.start("--save", "")
        self.assertEqual(r.dbsize(), 0)
        # ... and keeps an older snapshot as it was.
        self.put(r, "b")
        self.assertOK(r.execute_command("SAVE"))
        snap = read_file(d.file())
        self.put(r, "c")
        d.sigterm()
        self.assertEqual(read_file(d.file()), snap)
        r = d.start("--save", "")
        self.assertEqual(r.keys(), [b"b"])
        d.shutdown("NOSAVE")


# ---------------------------------------------------------------------------
# BGSAVE and save rules
# ---------------------------------------------------------------------------

def bgsave_writer(port, w, stop, written, failed):
    """One writer process of BgsaveTest: overwrites its 50 keys with
    version after version until stop is set."""
    try:
        c = redis.Redis(host="127.0.0.1", port=port, socket_timeout=20)
        v = 0
        while not stop.is_set():
            v += 1
            a = BgsaveTest.version_tensor(w, v)
            c.execute_command("AI.TENSORSET", "w:%d:%d" % (w, v % 50), "INT32", a.size, "BLOB", a.tobytes())
            written[w] = v
    except Exception:
        failed.value = 1
        traceback.print_exc()


class BgsaveTest(PersistCase):
    WRITERS = 3
    N = 4096  # int32 elements per written tensor

    @staticmethod
    def version_tensor(writer, version):
        """A tensor whose every element is determined by (writer, version),
        so a mix of two versions or a cut value is visible."""
        a = np.full(BgsaveTest.N, version, np.int32)
        a[0] = writer
        a[-1] = -version
        return a

    def check_version_tensor(self, r, key):
        a = tget(r, key)
        self.assertEqual(a.shape, (self.N,), key)
        writer, version = int(a[0]), int(a[1])
        np.testing.assert_array_equal(a, self.version_tensor(writer, version), err_msg=key)
        self.assertEqual(key.split(":")[1], str(writer))
        return version

    def test_bgsave_under_concurrent_writes(self):
        d = self.datadir()
        r = d.start("--save", "")
        self.assertOK(r.execute_command("AI.MODELSTORE", "mlp", "ONNX", "CPU", "BLOB", model_bytes("mlp.onnx")))
        # Some bulk, so that the save takes a while: 48 MiB of random data.
        rng = np.random.default_rng(5)
        bulk = {}
        for i in range(12):
            a = rng.integers(0, 2**31, size=1 << 20, dtype=np.int32)
            self.assertOK(r.execute_command("AI.TENSORSET", "bulk:%d" % i, "INT32", 1 << 20, "BLOB", a.tobytes()))
            bulk["bulk:%d" % i] = hashlib.sha256(a.tobytes()).digest()

        # Writers run in other processes, so that their work does not
        # delay this process's PINGs (the GIL) and inflate the latencies.
        ctx = multiprocessing.get_context("fork")
        stop = ctx.Event()
        written = ctx.Array("q", self.WRITERS)
        failed = ctx.Value("i", 0)
        procs = [ctx.Process(target=bgsave_writer, args=(d.port, w, stop, written, failed), daemon=True)
                 for w in range(self.WRITERS)]
        for p in procs:
            p.start()
        self.addCleanup(lambda: [p.kill() for p in procs if p.is_alive()])
        poll(lambda: min(written) >= 20 or failed.value, timeout=10, what="writers to get going")

        ping = d.raw()
        ctl = d.raw()
        self.assertEqual(ctl.cmd("BGSAVE"), "Background saving started")
        latencies = []
        in_progress_seen = False
        deadline = time.monotonic() + 30
        while True:
            inf = ctl.cmd("INFO", "persistence").decode()
            if "rdb_bgsave_in_progress:1" in inf:
                in_progress_seen = True
            elif "rdb_bgsave_in_progress:0" in inf:
                break
            self.assertLess(time.monotonic(), deadline, "BGSAVE still running after 30 s")
            for _ in range(10):
                t0 = time.perf_counter()
                self.assertEqual(ping.cmd("PING"), "PONG")
                latencies.append(time.perf_counter() - t0)
                time.sleep(0.001)
        during = sum(written)
        stop.set()
        for p in procs:
            p.join(10)
        self.assertEqual(failed.value, 0, "a writer failed (its traceback is on stderr)")
        self.assertTrue(in_progress_seen, "INFO showed rdb_bgsave_in_progress:1 while saving")
        inf = info(r, "persistence")
        self.assertEqual(inf["rdb_last_bgsave_status"], "ok")
        self.assertEqual(inf["rdb_saves"], "1")
        # Writes after the snapshot instant still count as changes.
        self.assertGreater(int(inf["rdb_changes_since_last_save"]), 0)
        lat = sorted(latencies)
        # A BGSAVE of 50 MB takes far longer than 50 ms here; a server that
        # stalled while saving would show it in the worst PING.
        self.assertLess(lat[-1], 0.050, "PING latencies during BGSAVE (s): median %.4f, max %.4f, %d pings; "
                        "%d writes meanwhile" % (lat[len(lat) // 2], lat[-1], len(lat), during))

        d.kill9()
        r = d.start("--save", "")
        for k, digest in bulk.items():
            self.assertEqual(hashlib.sha256(r.execute_command("AI.TENSORGET", k, "BLOB")).digest(), digest, k)
        self.assertEqual(r.type("mlp"), b"AI__MODEL")
        self.assertEqual(r.execute_command("AI.MODELGET", "mlp", "BLOB"), model_bytes("mlp.onnx"))
        keys = [k.decode() for k in r.keys("w:*")]
        for w in range(self.WRITERS):
            # At least 20 writes of each writer came before BGSAVE.
            self.assertGreaterEqual(len([k for k in keys if k.startswith("w:%d:" % w)]), 20, w)
        for k in keys:
            self.check_version_tensor(r, k)
        d.shutdown("NOSAVE")

    def test_saves_race_model_deletes(self):
        """A model deleted while SAVE copies the keyspace: the save must
        pin its blob under the keyspace lock. Pinned after it, the DEL could
        drop the last reference in between, and the save would revive and
        later release a dead blob again: seen as used_memory dropping below
        the baseline by the model's size (and, where released model memory
        is unmapped, as a crash). Many keys make the copy long and the
        window wide; a server with the bug failed this in most runs."""
        d = self.datadir()
        r = d.start("--save", "")
        p = r.pipeline(transaction=False)
        for i in range(200_000):
            p.execute_command("AI.TENSORSET", "t%d" % i, "INT8", 1, "VALUES", 1)
            if i % 10_000 == 9_999:
                p.execute()
        p.execute()

        def used():
            return int(info(r, "memory")["used_memory"])
        base = used()
        # A tiny model: many store/delete cycles per SAVE.
        lin = model_bytes("linear.onnx")
        stop = threading.Event()
        saves = []

        def saver():
            c = d.client()
            while not stop.is_set():
                saves.append(c.execute_command("SAVE"))
        t = threading.Thread(target=saver, daemon=True)
        t.start()
        try:
            cycles, deadline = 0, time.monotonic() + 30
            while (len(saves) < 12 or cycles < 200) and time.monotonic() < deadline:
                self.assertOK(r.execute_command("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", lin))
                self.assertEqual(r.delete("m"), 1)
                cycles += 1
        finally:
            stop.set()
            t.join(30)
        self.assertGreaterEqual(len(saves), 12)
        self.assertTrue(all(s in (True, b"OK") for s in saves), saves)
        self.assertEqual(used(), base, "model memory accounting after store/delete cycles during SAVEs")
        # The registry still shares blobs: two keys, one blob.
        self.assertOK(r.execute_command("AI.MODELSTORE", "m1", "ONNX", "CPU", "BLOB", lin))
        self.assertOK(r.execute_command("AI.MODELSTORE", "m2", "ONNX", "CPU", "BLOB", lin))
        self.assertEqual(as_dict(r.execute_command("AI.MODELINFO", "m1"))["shared_with"], 1)
        d.shutdown("NOSAVE")

    def test_bgsave_while_bgsave_runs(self):
        d = self.datadir()
        r = d.start("--save", "")
        a = np.random.default_rng(1).integers(0, 2**31, size=8 << 20, dtype=np.int32)
        for i in range(4):
            self.assertOK(r.execute_command("AI.TENSORSET", "big%d" % i, "INT32", a.size, "BLOB", a.tobytes()))
        c = d.raw()
        self.assertEqual(c.cmd("BGSAVE"), "Background saving started")
        second = c.cmd("BGSAVE")
        poll(lambda: info(r, "persistence")["rdb_bgsave_in_progress"] == "0", timeout=30, what="BGSAVE to end")
        # Either the first one was still running, or it had already finished.
        if isinstance(second, ServerError):
            self.assertEqual(second.text, "ERR Background save already in progress")
        else:
            self.assertEqual(second, "Background saving started")
        self.assertIsInstance(c.cmd("BGSAVE", "NOPE"), ServerError)
        d.shutdown("NOSAVE")

    def test_save_rule_triggers_background_save(self):
        d = self.datadir()
        r = d.start("--save", "1 1")
        self.assertEqual(info(r, "persistence")["rdb_saves"], "0")
        self.assertOK(r.execute_command("AI.TENSORSET", "t", "FLOAT", 1, "VALUES", 3))
        poll(lambda: int(info(r, "persistence")["rdb_saves"]) >= 1, timeout=5, interval=0.05,
             what="the save rule to write a snapshot")
        inf = info(r, "persistence")
        self.assertEqual(inf["rdb_changes_since_last_save"], "0")
        self.assertEqual(inf["rdb_last_bgsave_status"], "ok")
        self.assertTrue(os.path.isfile(d.file()))
        # No change, no further save.
        time.sleep(1.3)
        self.assertEqual(info(r, "persistence")["rdb_saves"], "1")
        d.kill9()
        r = d.start("--save", "")
        self.assertEqual(r.keys(), [b"t"])
        d.shutdown("NOSAVE")


# ---------------------------------------------------------------------------
# The snapshot file at start
# ---------------------------------------------------------------------------

class StartTest(PersistCase):

    def saved(self):
        """A data dir with a saved snapshot of one tensor and one model,
        and no server running."""
        d = self.datadir()
        r = d.start("--save", "")
        self.assertOK(r.execute_command("AI.TENSORSET", "t", "UINT8", 65536, "BLOB", os.urandom(65536)))
        self.assertOK(r.execute_command("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", model_bytes("linear.onnx")))
        self.assertOK(r.execute_command("SAVE"))
        self.assertGreater(os.path.getsize(d.file()), 65536)
        d.shutdown("NOSAVE")
        return d

    def test_stale_temp_file_does_not_prevent_start(self):
        d = self.saved()
        stale = d.file(".%s.tmp-123456" % DUMP)
        write_file(stale, os.urandom(5000))
        other = d.file("unrelated.txt")
        write_file(other, b"keep me")
        r = d.start("--save", "")
        self.assertEqual(sorted(r.keys()), [b"m", b"t"])
        self.assertOK(r.execute_command("SAVE"))
        self.assertFalse(os.path.exists(stale), "SAVE removes stale temporary files")
        self.assertEqual(read_file(other), b"keep me")
        self.assertEqual(glob.glob(d.file(".%s.tmp-*" % DUMP)), [])
        d.shutdown("NOSAVE")
        # Also with no snapshot at all: only a stale temporary file.
        os.remove(d.file())
        write_file(stale, os.urandom(100))
        r = d.start("--save", "")
        self.assertEqual(r.dbsize(), 0)
        d.shutdown("NOSAVE")

    def tamper_cases(self, good):
        mid = len(good) // 2

        def flip(i):
            b = bytearray(good)
            b[i] ^= 0x01
            return bytes(b)
        return {
            "flip": (flip(mid), "corrupt or tampered"),  # inside a frame
            "flip-header": (flip(40), "corrupt or tampered"),
            "flip-last": (flip(len(good) - 1), "corrupt or tampered"),
            "truncate": (good[:mid], "truncated"),
            "truncate-header": (good[:100], "truncated"),
            "append": (good + b"garbage!" * 4, "corrupt or tampered"),
            "empty": (b"", "truncated"),
            "not-a-snapshot": (b"REDIS0011" + os.urandom(200), "not an EnclaveAI snapshot"),
        }

    def test_tampered_snapshot_stops_the_start(self):
        d = self.saved()
        good = read_file(d.file())
        for name, (bad, reason) in self.tamper_cases(good).items():
            with self.subTest(tamper=name):
                write_file(d.file(), bad)
                rc, err = d.start_fails("--save", "")
                self.assertNotEqual(rc, 0)
                self.assertIn(d.file(), err)
                self.assertIn(reason, err)
                self.assertIn("--load-bad-snapshot", err, "the error says how to start anyway")
                self.assertEqual(read_file(d.file()), bad, "the bad file is left untouched")
                self.assertEqual(sorted(os.listdir(d.path)), [DUMP, "enclaveai.lock", "seal.key"], "nothing moved aside")
        # The pristine file still loads.
        write_file(d.file(), good)
        r = d.start("--save", "")
        self.assertEqual(sorted(r.keys()), [b"m", b"t"])
        d.shutdown("NOSAVE")

    def test_wrong_seal_key_stops_the_start(self):
        d = self.saved()
        good = read_file(d.file())
        key = d.file("seal.key")
        old_key = read_file(key)
        write_file(key, os.urandom(32))
        rc, err = d.start_fails("--save", "")
        self.assertNotEqual(rc, 0)
        self.assertIn(d.file(), err)
        self.assertIn("sealed with a different key", err)
        self.assertEqual(read_file(d.file()), good)
        # The right key again: it loads.
        write_file(key, old_key)
        r = d.start("--save", "")
        self.assertEqual(sorted(r.keys()), [b"m", b"t"])
        d.shutdown("NOSAVE")

    def test_load_bad_snapshot_moves_it_aside(self):
        d = self.saved()
        good = read_file(d.file())
        cases = self.tamper_cases(good)
        for name in ("flip", "truncate", "append", "wrong-key"):
            with self.subTest(tamper=name):
                for f in glob.glob(d.file(DUMP + ".bad-*")):
                    os.remove(f)
                key = d.file("seal.key")
                old_key = read_file(key)
                if name == "wrong-key":
                    bad = good
                    write_file(key, os.urandom(32))
                else:
                    bad = cases[name][0]
                write_file(d.file(), bad)
                before = int(time.time())
                r = d.start("--save", "", "--load-bad-snapshot", "yes")
                self.assertEqual(r.dbsize(), 0, "starts empty")
                self.assertFalse(os.path.exists(d.file()))
                aside = glob.glob(d.file(DUMP + ".bad-*"))
                self.assertEqual(len(aside), 1, os.listdir(d.path))
                n = int(aside[0].rsplit("-", 1)[1])
                self.assertTrue(before <= n <= int(time.time()), (before, n))
                self.assertEqual(read_file(aside[0]), bad)
                self.assertIn(aside[0], d.log(), "the log names where the file went")
                # A later SAVE writes a new snapshot and leaves the bad one be.
                self.assertOK(r.execute_command("AI.TENSORSET", "new", "FLOAT", 1, "VALUES", 1))
                self.assertOK(r.execute_command("SAVE"))
                self.assertEqual(read_file(aside[0]), bad)
                self.assertNotEqual(read_file(d.file()), bad)
                d.shutdown("NOSAVE")
                r = d.start("--save", "")
                self.assertEqual(r.keys(), [b"new"])
                d.shutdown("NOSAVE")
                if name == "wrong-key":
                    write_file(key, old_key)
                write_file(d.file(), good)


# ---------------------------------------------------------------------------
# Confidentiality and the seal key file
# ---------------------------------------------------------------------------

class SealTest(PersistCase):

    def test_no_plaintext_on_disk(self):
        d = self.datadir()
        r = d.start("--save", "")
        rng = np.random.default_rng()
        pattern = rng.bytes(64)
        # 64 KiB: the pattern repeated, mixed with random 64-byte slots.
        slots = [pattern if rng.random() < 0.6 else rng.bytes(64) for _ in range(1024)]
        blob = b"".join(slots)
        self.assertEqual(len(blob), 65536)
        self.assertOK(r.execute_command("AI.TENSORSET", "secret", "UINT8", len(blob), "BLOB", blob))
        lin = model_bytes("linear.onnx")
        self.assertOK(r.execute_command("AI.MODELSTORE", "model", "ONNX", "CPU", "BLOB", lin))
        self.assertOK(r.execute_command("SAVE"))
        self.assertEqual(r.execute_command("AI.TENSORGET", "secret", "BLOB"), blob)
        d.shutdown("NOSAVE")

        cyc = pattern + pattern
        windows = {cyc[i:i + 32] for i in range(64)}
        windows |= {lin[i:i + 32] for i in range(len(lin) - 31)}
        windows |= {blob[i:i + 32] for i in range(0, len(blob) - 31, 7)}
        files = [os.path.join(root, f) for root, _, fs in os.walk(d.path) for f in fs]
        self.assertIn(d.file(), files)
        for path in files:
            data = read_file(path)
            found = [w for w in windows if w in data]
            self.assertEqual(found, [], "plaintext found in %s" % path)
        # The snapshot is not much bigger than what it holds.
        self.assertLess(os.path.getsize(d.file()), len(blob) + len(lin) + 4096)

    def test_seal_key_file_created_0600(self):
        d = self.datadir()
        d.start("--save", "")
        key = d.file("seal.key")
        st = os.stat(key)
        self.assertEqual(st.st_mode & 0o777, 0o600)
        self.assertEqual(st.st_size, 32)
        self.assertEqual(os.stat(d.path).st_mode & 0o777, 0o700)
        d.shutdown("NOSAVE")
        # A restart reuses it.
        data = read_file(key)
        d.start("--save", "")
        self.assertEqual(read_file(key), data)
        d.shutdown("NOSAVE")

    def test_open_seal_key_file_refused(self):
        d = self.datadir()
        d.start("--save", "")
        d.shutdown("NOSAVE")
        key = d.file("seal.key")
        for mode in (0o644, 0o640, 0o604, 0o660):
            with self.subTest(mode=oct(mode)):
                os.chmod(key, mode)
                rc, err = d.start_fails("--save", "")
                self.assertNotEqual(rc, 0)
                self.assertIn(key, err)
                self.assertIn("group or others", err)
                self.assertIn("chmod 600", err)
        for name, data in (("short", os.urandom(31)), ("long", os.urandom(33)), ("zero", bytes(32))):
            with self.subTest(key=name):
                write_file(key, data)
                rc, err = d.start_fails("--save", "")
                self.assertNotEqual(rc, 0)
                self.assertIn(key, err)

    def test_seal_key_file_directive(self):
        d = self.datadir()
        other = tempfile.mkdtemp(prefix="enclaveai-key-")
        self.addCleanup(shutil.rmtree, other, True)
        key = os.path.join(other, "k")
        r = d.start("--save", "", "--seal-key-file", key)
        self.assertEqual(os.stat(key).st_mode & 0o777, 0o600)
        self.assertFalse(os.path.exists(d.file("seal.key")))
        self.assertIn(key, info(r, "enclave")["seal_key_source"])
        self.assertOK(r.execute_command("AI.TENSORSET", "t", "FLOAT", 1, "VALUES", 1))
        self.assertOK(r.execute_command("SAVE"))
        d.shutdown("NOSAVE")
        # Without that key (a fresh one is made in dir) the snapshot is refused.
        rc, err = d.start_fails("--save", "")
        self.assertNotEqual(rc, 0)
        self.assertIn("sealed with a different key", err)
        r = d.start("--save", "", "--seal-key-file", key)
        self.assertEqual(r.keys(), [b"t"])
        d.shutdown("NOSAVE")


# ---------------------------------------------------------------------------
# Attestation
# ---------------------------------------------------------------------------

class AttestTest(PersistCase):

    @classmethod
    def setUpClass(cls):
        cls.tls_port = None

    def setUp(self):
        self.d = self.datadir()
        # The TLS port is bound after the plain one; retry if it was taken.
        for _ in range(3):
            self.tls_port = free_port()
            try:
                self.r = self.d.start("--save", "", "--tls-port", self.tls_port)
                return
            except AssertionError as e:
                if "address already in use" not in str(e):
                    raise
                self.d.proc = None
        self.fail("no free TLS port")

    def cli(self, *args):
        p = subprocess.run([CLI, "attest"] + [str(a) for a in args], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=30)
        return p.returncode, p.stdout.decode(errors="replace")

    def test_cli_allow_simulated(self):
        rc, out = self.cli("-port", self.tls_port, "-tls", "-allow-simulated")
        self.assertEqual(rc, 0, out)
        self.assertIn("SIMULATED", out)
        self.assertIn("mode:        simulation", out)
        self.assertNotIn("VERIFIED", out)

    def test_cli_refuses_simulated(self):
        rc, out = self.cli("-port", self.tls_port, "-tls")
        self.assertEqual(rc, 1, out)
        self.assertIn("simulated attestation evidence refused", out)
        self.assertIn("FAILED", out)

    def test_cli_plain_port(self):
        rc, out = self.cli("-port", self.d.port, "-allow-simulated")
        self.assertEqual(rc, 0, out)
        self.assertIn("plain TCP", out)
        self.assertIn("SIMULATED", out)

    def test_ai_attest(self):
        nonce = os.urandom(32)
        rep = as_dict(self.r.execute_command("AI.ATTEST", nonce))
        self.assertEqual(sorted(rep), ["evidence", "mode", "receipt_public_key", "tls_public_key"])
        self.assertEqual(rep["mode"], b"simulation")
        self.assertGreater(len(rep["evidence"]), 32)
        self.assertGreater(len(rep["tls_public_key"]), 32)
        # Fresh evidence for another nonce.
        rep2 = as_dict(self.r.execute_command("AI.ATTEST", os.urandom(32)))
        self.assertNotEqual(rep2["evidence"], rep["evidence"])
        self.assertEqual(rep2["tls_public_key"], rep["tls_public_key"])
        self.assertEqual(rep2["receipt_public_key"], rep["receipt_public_key"])

    def test_ai_attest_nonce_sizes(self):
        c = self.d.raw()
        for n in (0, 1, 15):
            with self.subTest(nonce_len=n):
                rep = c.cmd("AI.ATTEST", os.urandom(n))
                self.assertIsInstance(rep, ServerError)
                self.assertIn("nonce must be", rep.text)
        self.assertIsInstance(c.cmd("AI.ATTEST"), ServerError)
        self.assertIsInstance(c.cmd("AI.ATTEST", os.urandom(4096)), ServerError)

    def test_info_enclave(self):
        inf = info(self.r, "enclave")
        self.assertEqual(inf["enclave_mode"], "simulation")
        self.assertIn("SIMULATION MODE", inf["enclave_warning"])
        self.assertEqual(inf["tls"], "yes")
        self.assertIn(self.d.file("seal.key"), inf["seal_key_source"])
        self.assertIn("enclave_mode", info(self.r, "everything"))


if __name__ == "__main__":
    unittest.main()
