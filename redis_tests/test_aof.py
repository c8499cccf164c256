#!/usr/bin/python3
"""Black-box tests of the sealed append-only log (docs/DURABILITY.md): on by
default, nothing acknowledged is lost to kill -9 (the two checks of the
issue, and a short sample of the kill -9 harness, crash.py), every value type
and change survives, a torn tail is cut, tampering stops the start,
BGREWRITEAOF, INFO persistence, model files written once.

    make build models
    cd redis_tests && /usr/bin/python3 -m unittest test_aof -v
"""

import glob
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
import time
import unittest

import numpy as np
import redis

import crash
from harness import MODELS, RawConn, model_bytes, poll



class DataDir(crash.Proc):
    """A data directory that outlives server processes."""

    def __init__(self, test, *flags):
        super().__init__(tempfile.mkdtemp(prefix="enclaveai-aof-"), list(flags))
        test.addCleanup(self.cleanup)

    def cleanup(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.path, ignore_errors=True)

    def aofdir(self):
        return os.path.join(self.path, "appendonlydir")

    def incrs(self):
        with open(os.path.join(self.aofdir(), "manifest")) as f:
            return [os.path.join(self.aofdir(), line.split()[1]) for line in f if line.startswith("incr ")]

    def start_fails(self, *flags):
        self.starts += 1
        self.err = os.path.join(self.path, "server-%d.stderr" % self.starts)
        with open(self.err, "wb") as f:
            proc = subprocess.Popen([crash.server_binary(), "--port", "0", "--dir", self.path, "--save", ""]
                                    + self.flags + list(flags), cwd=self.path, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=f)
        try:
            rc = proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise AssertionError("server started although it should have refused:\n" + self.log())
        return rc, self.log()


def model_get(r, key):
    blob = r.execute_command("AI.MODELGET", key, "BLOB")
    return b"".join(blob) if isinstance(blob, list) else blob


def tset(r, key, a):
    r.execute_command("AI.TENSORSET", key, "FLOAT", *a.shape, "BLOB", a.astype(np.float32).tobytes())


class IssueChecksTest(unittest.TestCase):
    """The two checks of the issue, with the default configuration: 5 rounds
    of a tensor written, 1.5 s, a model stored, OK, kill -9 at once."""

    def test_model_acknowledged_and_tensor_before_it_survive_kill9(self):
        d = DataDir(self)
        linear = model_bytes("linear.onnx")
        written = []
        for i in range(5):
            r = d.start()
            self.assertEqual(r.config_get("appendonly")["appendonly"], "yes")
            self.assertEqual(r.config_get("appendfsync")["appendfsync"], "everysec")
            for key in written:
                self.assertEqual(r.exists(key), 1, "%s lost to kill -9 (round %d)" % (key, i))
            tset(r, "t%d" % i, np.full((1, 4), i, np.float32))
            time.sleep(1.5)
            self.assertEqual(r.execute_command("AI.MODELSTORE", "m%d" % i, "ONNX", "CPU", "BLOB", linear), b"OK")
            d.kill9()
            written += ["t%d" % i, "m%d" % i]
        r = d.start()
        self.assertEqual(sorted(k.decode() for k in r.keys()), sorted(written))
        out = r.execute_command("AI.TENSORGET", "t4", "VALUES")
        self.assertEqual([float(x) for x in out], [4.0] * 4)
        self.assertEqual(r.execute_command("AI.MODELGET", "m4", "BLOB"), linear)
        d.kill9()


class SurvivesTest(unittest.TestCase):

    def test_every_change_survives_kill9(self):
        d = DataDir(self)
        r = d.start()
        mlp = model_bytes("mlp.onnx")
        linear = model_bytes("linear.onnx")
        for dt, npt in [("FLOAT", np.float32), ("DOUBLE", np.float64), ("INT8", np.int8), ("INT64", np.int64),
                        ("UINT16", np.uint16), ("BOOL", np.bool_)]:
            a = (np.arange(6) % 2).astype(npt).reshape(2, 3)
            r.execute_command("AI.TENSORSET", "t:" + dt, dt, 2, 3, "BLOB", a.tobytes())
        r.execute_command("AI.TENSORSET", "t:str", "STRING", 2, "VALUES", "ab", "c")
        r.execute_command("AI.TENSORSET", "t:str0", "STRING", 0)  # no elements: an empty blob
        # A large model in 1 MiB chunks (the upload buffer), a small one in many.
        chunks = [mlp[i:i + (1 << 20)] for i in range(0, len(mlp), 1 << 20)]
        self.assertEqual(r.execute_command("AI.MODELSTORE", "m:big", "ONNX", "CPU", "TAG", "v1", "BLOB", *chunks), b"OK")
        small = [linear[i:i + 10] for i in range(0, len(linear), 10)]
        r.execute_command("AI.MODELSTORE", "m:small", "ONNX", "CPU", "BLOB", *small)
        r.execute_command("AI.MODELSTORE", "m:shared", "ONNX", "CPU", "BLOB", linear)
        r.execute_command("AI.MODELSTORE", "m:nopersist", "ONNX", "CPU", "NOPERSIST", "BLOB", linear)
        tset(r, "x", np.ones((1, 4)))
        r.execute_command("AI.MODELEXECUTE", "m:small", "INPUTS", 1, "x", "OUTPUTS", 1, "y")
        y = r.execute_command("AI.TENSORGET", "y", "BLOB")
        r.execute_command("AI.TENSORSET", "gone", "INT8", 1, "VALUES", 1)
        r.delete("gone")
        r.execute_command("AI.TENSORSET", "old", "INT8", 1, "VALUES", 7)
        r.rename("old", "renamed")
        r.execute_command("AI.TENSORSET", "ttl", "INT8", 1, "VALUES", 1)
        at = int(time.time() * 1000) + 3600_000
        r.pexpireat("ttl", at)
        r.execute_command("AI.TENSORSET", "short", "INT8", 1, "VALUES", 1)
        r.pexpire("short", 200)
        r.execute_command("AI.TENSORSET", "persisted", "INT8", 1, "VALUES", 1)
        r.expire("persisted", 100)
        r.persist("persisted")
        r.execute_command("AI.MODELSTORE", "m:del", "ONNX", "CPU", "BLOB", linear)
        r.execute_command("AI.MODELDEL", "m:del")
        keys = set(r.keys()) - {b"m:nopersist"}
        time.sleep(0.3)  # "short" expires meanwhile
        d.kill9()
        r = d.start()
        self.assertEqual(set(r.keys()), keys - {b"short"})
        self.assertEqual(r.execute_command("AI.TENSORGET", "t:str", "VALUES"), [b"ab", b"c"])
        self.assertEqual(r.execute_command("AI.TENSORGET", "t:str0", "META", "BLOB"),
                         [b"dtype", b"STRING", b"shape", [0], b"blob", b""])
        self.assertEqual(r.execute_command("AI.TENSORGET", "y", "BLOB"), y)
        self.assertEqual(model_get(r, "m:big"), mlp)
        info = r.execute_command("AI.MODELINFO", "m:big")
        self.assertEqual(dict(zip(info[::2], info[1::2]))[b"tag"], b"v1")
        self.assertEqual(r.execute_command("AI.TENSORGET", "renamed", "VALUES"), [7])
        self.assertAlmostEqual(r.pttl("ttl") + int(time.time() * 1000), at, delta=2000)
        self.assertEqual(r.ttl("persisted"), -1)
        # The models still run.
        r.execute_command("AI.MODELEXECUTE", "m:shared", "INPUTS", 1, "x", "OUTPUTS", 1, "y2")
        self.assertEqual(r.execute_command("AI.TENSORGET", "y2", "BLOB"), y)
        # One model file per distinct model, sealed.
        files = glob.glob(os.path.join(d.aofdir(), "models", "*.model"))
        self.assertEqual(len(files), 2, files)
        for f in files + glob.glob(os.path.join(d.aofdir(), "*.log")):
            with open(f, "rb") as fh:
                raw = fh.read()
            self.assertNotIn(linear[20:60], raw, "model bytes in the clear in " + f)
            self.assertNotIn(b"renamed", raw, "a key in the clear in " + f)
        r.flushall()
        d.kill9()
        r = d.start()
        self.assertEqual(r.dbsize(), 0)
        d.kill9()

    def test_transaction_stores_survive_rewrites_during_exec(self):
        # EXEC compiles its stores, writing their model files, before it
        # stores the first; rewrites that finished meanwhile removed the
        # first one's file, the record naming it came after, and the next
        # start failed (review: 3 of 3 runs).
        d = DataDir(self, "--appendfsync", "always")
        r = d.start()
        linear, slow = model_bytes("linear.onnx"), model_bytes("slow_compile.onnx")
        p = r.pipeline(transaction=True)
        p.execute_command("AI.MODELSTORE", "ma", "ONNX", "CPU", "BLOB", linear)
        p.execute_command("AI.MODELSTORE", "mslow", "ONNX", "CPU", "BLOB", slow)
        out = []
        t = threading.Thread(target=lambda: out.append(p.execute()))
        t.start()
        other = redis.Redis(port=r.connection_pool.connection_kwargs["port"])
        rewrites = 0
        while t.is_alive():
            try:
                other.bgrewriteaof()
                rewrites += 1
            except redis.ResponseError:
                pass  # one is running
            time.sleep(0.1)
        t.join()
        self.assertEqual(out, [[b"OK", b"OK"]])
        d.kill9()
        r = d.start()
        self.assertEqual(model_get(r, "ma"), linear)
        self.assertEqual(model_get(r, "mslow"), slow)
        d.kill9()
        if rewrites < 2:  # the pure-Go engine compiles it at once
            self.skipTest("EXEC ran through %d rewrite(s), not the 2 the loss needs" % rewrites)

    def test_values_over_todays_limits_are_read_back(self):
        # What was acknowledged under the limits of its day is read back
        # whatever they are at the next start: a tensor over max-model-size
        # (proto-max-bulk-len bounds tensors), a model stored under a
        # raised max-model-size, from the log and from a snapshot. Each
        # stopped the start (review).
        t = np.arange(5 << 20, dtype=np.float32)  # 20 MiB
        mlp = model_bytes("mlp.onnx")  # 2.7 MB
        for log in ("yes", "no"):
            with self.subTest(appendonly=log):
                d = DataDir(self, "--appendonly", log, "--max-model-size", "10mb")
                r = d.start()
                tset(r, "t", t)
                self.assertTrue(r.config_set("max-model-size", "50mb"))
                self.assertEqual(r.execute_command("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", mlp), b"OK")
                if log == "no":
                    self.assertTrue(r.save())
                d.kill9()
                d.flags = ["--appendonly", log, "--max-model-size", "1mb"]
                r = d.start()
                np.testing.assert_array_equal(
                    np.frombuffer(r.execute_command("AI.TENSORGET", "t", "BLOB"), np.float32), t)
                self.assertEqual(model_get(r, "m"), mlp)
                d.kill9()

    def test_appendonly_no_writes_no_log(self):
        d = DataDir(self, "--appendonly", "no")
        r = d.start()
        r.execute_command("AI.TENSORSET", "t", "INT8", 1, "VALUES", 1)
        p = r.info("persistence")
        self.assertEqual(p["aof_enabled"], 0)
        # The fields Redis shows with appendonly no, at rest (operator review).
        self.assertEqual((p["aof_rewrite_in_progress"], p["aof_last_bgrewrite_status"], p["aof_last_write_status"]),
                         (0, "ok", "ok"))
        with self.assertRaisesRegex(redis.ResponseError, "appendonly no"):
            r.execute_command("BGREWRITEAOF")
        d.kill9()
        self.assertFalse(os.path.exists(d.aofdir()))
        r = d.start()
        self.assertEqual(r.dbsize(), 0)
        d.kill9()

    def test_snapshot_seeds_a_new_log(self):
        d = DataDir(self, "--appendonly", "no")
        r = d.start()
        r.execute_command("AI.TENSORSET", "t", "INT8", 1, "VALUES", 5)
        r.execute_command("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", model_bytes("linear.onnx"))
        r.save()
        d.kill9()
        d.flags = []
        r = d.start()
        self.assertEqual(sorted(r.keys()), [b"m", b"t"])
        r.execute_command("AI.TENSORSET", "u", "INT8", 1, "VALUES", 6)
        d.kill9()
        os.remove(os.path.join(d.path, "dump.aidb"))  # the log alone now
        r = d.start()
        self.assertEqual(sorted(r.keys()), [b"m", b"t", b"u"])
        d.kill9()


def big_exec(d, r, trial, n, blob):
    """Sends a MULTI/EXEC of n AI.TENSORSETs of blob (keys x<trial>:t<i>)
    from a thread; returns the incr files' size before it, the thread, and
    the list that gets EXEC's reply if one comes."""
    start = sum(os.path.getsize(f) for f in d.incrs())
    p = r.pipeline(transaction=True)
    for i in range(n):
        p.execute_command("AI.TENSORSET", "x%d:t%d" % (trial, i), "UINT8", len(blob), "BLOB", blob)
    answered = []

    def exec_():
        try:
            answered.append(p.execute())
        except redis.RedisError:
            pass
    t = threading.Thread(target=exec_)
    t.start()
    return start, t, answered


class TransactionTest(unittest.TestCase):

    def test_exec_cut_short_by_kill9_comes_back_whole_or_not_at_all(self):
        """A MULTI/EXEC of 15 tensors of 1 MiB, killed -9 once the incr
        file has grown by 5 of them (or after EXEC answered, if it never
        does first): after the restart all 15 keys are there or none, as
        redis-server 7 reverts a transaction cut short in its AOF. The log
        sealed a frame every 1 MiB and wrote every 8 MiB, and a restart
        brought back the keys written so far (review: 5 of 16, 3 of 3
        trials)."""
        self.exec_cut_short(15, 1 << 20, 5)

    def test_exec_over_16_mib_cut_short_by_kill9_comes_back_whole_or_not_at_all(self):
        """The same with 40 tensors of 1 MiB, killed once the incr file
        has grown by 20 of them: a transaction of any size is atomic. Its
        records were split into frames of 16 MiB, each atomic alone, and a
        restart brought back the first 16 keys (3 of 3 trials)."""
        self.exec_cut_short(40, 1 << 20, 20)

    def exec_cut_short(self, n, size, kill_at):
        blob = bytes(range(256)) * (size // 256)
        d = DataDir(self)
        killed_early = 0
        for trial in range(3):
            r = d.start()
            start, t, answered = big_exec(d, r, trial, n, blob)
            while t.is_alive():
                if sum(os.path.getsize(f) for f in d.incrs()) - start >= kill_at * size and not answered:
                    killed_early += 1
                    break
                time.sleep(0.0005)
            d.kill9()
            t.join()
            r = d.start()
            for k in range(trial + 1):
                have = sum(r.exists("x%d:t%d" % (k, i)) for i in range(n))
                self.assertIn(have, (0, n), "trial %d: %d of %d keys of transaction %d after kill -9" % (trial, have, n, k))
                if answered and k == trial:
                    self.assertEqual(have, n, "an acknowledged EXEC lost")
            d.kill9()
        if killed_early == 0:
            self.skipTest("EXEC answered before the incr file grew by %d records in every trial" % kill_at)


class ShutdownTest(unittest.TestCase):

    def test_shutdown_during_a_big_exec_leaves_a_log_that_starts(self):
        """SHUTDOWN NOSAVE while a MULTI/EXEC of 40 tensors of 1 MiB is
        being written to the log: the process exits only once its log is
        written, fsynced and closed, and the next start, with
        aof-load-truncated no, loads the transaction whole or not at all.
        The process exited as soon as the stop began, in the middle of the
        log's write, and the next start refused the unit it had torn
        (durability review)."""
        size, n = 1 << 20, 40
        blob = bytes(range(256)) * (size // 256)
        d = DataDir(self, "--aof-load-truncated", "no", "--auto-aof-rewrite-percentage", "0")
        shut_early = 0
        for trial in range(3):
            r = d.start()
            start, t, answered = big_exec(d, r, trial, n, blob)
            deadline = time.monotonic() + 30
            while t.is_alive() and time.monotonic() < deadline:
                if sum(os.path.getsize(f) for f in d.incrs()) - start >= 2 * size and not answered:
                    shut_early += 1
                    break
                time.sleep(0.0005)
            with RawConn(d.port, timeout=30) as c:
                c.send(RawConn.encode("SHUTDOWN", "NOSAVE"))
                c.read_until_closed(timeout=30)
            self.assertEqual(d.proc.wait(30), 0, d.log())
            d.proc = None
            t.join()
            r = d.start()
            for k in range(trial + 1):
                have = sum(r.exists("x%d:t%d" % (k, i)) for i in range(n))
                self.assertIn(have, (0, n), "trial %d: %d of %d keys of transaction %d" % (trial, have, n, k))
            d.kill9()
        if shut_early == 0:
            self.skipTest("EXEC answered before the incr file grew by 2 records in every trial")


class WaitAOFTest(unittest.TestCase):
    def test_waitaof_answers_once_the_write_is_fsynced(self):
        """WAITAOF 1 0 0 (Redis 7.2) returns [1, 0] once the background
        fsync of everysec has the client's write on disk; under
        appendfsync no it never is, and the timeout answers [0, 0]; what
        it acknowledged survives kill -9. WAIT finds no replica."""
        d = DataDir(self)
        r = d.start()
        r.execute_command("AI.TENSORSET", "t", "INT8", 1, "VALUES", 7)
        t0 = time.monotonic()
        self.assertEqual(r.execute_command("WAITAOF", 1, 0, 0), [1, 0])
        self.assertLess(time.monotonic() - t0, 3)
        self.assertEqual(r.wait(0, 0), 0)
        r.config_set("appendfsync", "no")
        r.execute_command("AI.TENSORSET", "u", "INT8", 1, "VALUES", 8)
        self.assertEqual(r.execute_command("WAITAOF", 1, 0, 200), [0, 0])
        d.kill9()
        r = d.start()
        self.assertEqual(r.execute_command("AI.TENSORGET", "t", "VALUES"), [7])


class DamageTest(unittest.TestCase):

    def written(self, d):
        r = d.start()
        r.execute_command("AI.TENSORSET", "a", "INT8", 1, "VALUES", 1)
        r.execute_command("AI.TENSORSET", "b", "INT8", 1, "VALUES", 2)
        d.kill9()
        return d.incrs()[-1]

    def test_torn_tail_is_cut_and_logged(self):
        d = DataDir(self)
        incr = self.written(d)
        with open(incr, "rb") as f:
            data = f.read()
        with open(incr, "wb") as f:
            f.write(data[:-5])  # the last record's write cut short
        rc, err = d.start_fails("--aof-load-truncated", "no")
        self.assertNotEqual(rc, 0)
        self.assertIn("aof-load-truncated", err)
        r = d.start()
        self.assertEqual(r.keys(), [b"a"])
        self.assertIn("torn record", d.log())
        r.execute_command("AI.TENSORSET", "c", "INT8", 1, "VALUES", 3)
        d.kill9()
        r = d.start()
        self.assertEqual(sorted(r.keys()), [b"a", b"c"])
        d.kill9()

    def test_tampered_log_stops_the_start(self):
        d = DataDir(self)
        incr = self.written(d)
        with open(incr, "r+b") as f:
            f.seek(64 + 20)  # inside the first frame, which another follows
            b = f.read(1)
            f.seek(64 + 20)
            f.write(bytes([b[0] ^ 1]))
        rc, err = d.start_fails()
        self.assertNotEqual(rc, 0)
        self.assertIn("cannot be loaded", err)
        self.assertIn("--load-bad-snapshot", err)
        d.flags = ["--load-bad-snapshot", "yes"]
        r = d.start()
        self.assertEqual(r.dbsize(), 0)
        self.assertTrue(glob.glob(d.aofdir() + ".bad-*"), "the bad log is kept aside")
        d.kill9()

    def test_missing_model_file_stops_the_start(self):
        d = DataDir(self)
        r = d.start()
        r.execute_command("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", model_bytes("linear.onnx"))
        d.kill9()
        for f in glob.glob(os.path.join(d.aofdir(), "models", "*.model")):
            os.remove(f)
        rc, err = d.start_fails()
        self.assertNotEqual(rc, 0)
        self.assertIn("model file", err)


    def test_missing_manifest_stops_the_start(self):
        d = DataDir(self)
        incr = self.written(d)
        os.remove(os.path.join(d.aofdir(), "manifest"))
        rc, err = d.start_fails()
        self.assertNotEqual(rc, 0)
        self.assertIn("manifest is missing", err)
        self.assertTrue(os.path.exists(incr), "the log's files are not written over")

    def test_second_server_on_one_dir_is_refused(self):
        d = DataDir(self)
        r = d.start()
        r.execute_command("AI.TENSORSET", "a", "INT8", 1, "VALUES", 1)
        rc, err = d.start_fails()
        self.assertNotEqual(rc, 0)
        self.assertIn("in use by another server", err)
        r.execute_command("AI.TENSORSET", "b", "INT8", 1, "VALUES", 2)
        d.kill9()  # the kernel drops the lock with the process
        r = d.start()
        self.assertEqual(sorted(r.keys()), [b"a", b"b"])
        d.kill9()


class SlowCompileTest(unittest.TestCase):

    def test_model_read_back_gets_longer_to_compile(self):
        # A model stored within engine-store-timeout may overrun it on a
        # busier start, which stopped the start. Read back, it gets 4 times
        # the deadline. slow_compile.onnx compiles in about 1.6 s here.
        d = DataDir(self)
        r = d.start()
        t0 = time.monotonic()
        r.execute_command("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", model_bytes("slow_compile.onnx"))
        took = time.monotonic() - t0
        d.kill9()
        if not 1.2 < took < 3.5:
            self.skipTest("slow_compile.onnx compiled in %.1f s on this machine" % took)
        d.flags = ["--engine-store-timeout", "1"]
        r = d.start()
        self.assertEqual(r.keys(), [b"m"])
        d.kill9()


class ReplyOffTest(unittest.TestCase):
    def test_writes_with_replies_off_are_logged_once_and_kept(self):
        """A bulk load with CLIENT REPLY OFF (Redis's mass insertion): the
        writes are committed together, not one commit each (under appendfsync
        always an fsync per command made it about 100 times slower: review),
        and once CLIENT REPLY ON is answered every one of them survives a
        kill -9."""
        d = DataDir(self, "--appendfsync", "always")
        r = d.start()
        n = 2000
        c = RawConn(d.port, timeout=30)
        self.addCleanup(c.close)
        e = c.encode
        c.send(e("CLIENT", "REPLY", "OFF")
               + b"".join(e("AI.TENSORSET", "k%d" % i, "INT32", 1, "VALUES", i) for i in range(n))
               + e("CLIENT", "REPLY", "ON"))
        self.assertEqual(c.read_reply(), "OK")
        d.kill9()
        r = d.start()
        self.assertEqual(r.dbsize(), n)
        self.assertEqual(r.execute_command("AI.TENSORGET", "k%d" % (n - 1), "VALUES"), [n - 1])
        d.kill9()


class RewriteTest(unittest.TestCase):

    def test_bgrewriteaof(self):
        d = DataDir(self)
        r = d.start()
        mlp = model_bytes("mlp.onnx")
        r.execute_command("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", mlp)
        for i in range(200):
            r.execute_command("AI.TENSORSET", "t", "INT32", 1, "VALUES", i)
        model_files = glob.glob(os.path.join(d.aofdir(), "models", "*.model"))
        self.assertEqual(len(model_files), 1)
        inode = os.stat(model_files[0]).st_ino
        info = r.info("persistence")
        before = info["aof_current_size"]
        self.assertEqual(info["aof_enabled"], 1)
        self.assertTrue(r.execute_command("BGREWRITEAOF"))  # redis-py reads the status line as True
        poll(lambda: r.info("persistence")["aof_rewrite_in_progress"] == 0 and
             r.info("persistence")["aof_rewrites"] == 1, what="the rewrite")
        info = r.info("persistence")
        self.assertEqual(info["aof_last_bgrewrite_status"], "ok")
        self.assertEqual(info["aof_last_write_status"], "ok")
        self.assertLess(info["aof_current_size"], before)
        self.assertLess(info["aof_current_size"], 4096, "the model bytes are in their file, not the base")
        self.assertEqual(os.stat(model_files[0]).st_ino, inode, "the model file is not written again")
        r.execute_command("AI.TENSORSET", "after", "INT8", 1, "VALUES", 1)
        d.kill9()
        with open(os.path.join(d.aofdir(), "base.99.log"), "wb") as f:
            f.write(b"\0" * 4096)  # what a kill -9 during a rewrite leaves
        r = d.start()  # removes it
        d.kill9()
        names = sorted(os.listdir(d.aofdir()))
        self.assertEqual(len([n for n in names if n.startswith("base.")]), 1, names)
        self.assertEqual(len([n for n in names if n.startswith("incr.")]), 1, names)
        r = d.start()
        self.assertEqual(sorted(r.keys()), [b"after", b"m", b"t"])
        self.assertEqual(r.execute_command("AI.TENSORGET", "t", "VALUES"), [199])
        d.kill9()

    def test_auto_rewrite(self):
        d = DataDir(self, "--auto-aof-rewrite-min-size", "1mb", "--auto-aof-rewrite-percentage", "50")
        r = d.start()
        blob = os.urandom(256 << 10)
        for i in range(12):
            r.execute_command("AI.TENSORSET", "t", "UINT8", len(blob), "BLOB", blob)
        poll(lambda: r.info("persistence")["aof_rewrites"] >= 1, timeout=10, what="an automatic rewrite")
        d.kill9()
        r = d.start()
        self.assertEqual(r.execute_command("AI.TENSORGET", "t", "BLOB"), blob)
        d.kill9()


def checked_blob(seed, n):
    """n bytes that say whether they are whole: a seed, then bytes made from it."""
    return seed.to_bytes(8, "little") + np.random.default_rng(seed).integers(0, 256, n - 8, np.uint8).tobytes()


def blob_whole(b):
    return len(b) >= 8 and b == checked_blob(int.from_bytes(b[:8], "little"), len(b))


class RecycledBuffersTest(unittest.TestCase):
    """AI.TENSORSET puts a replaced tensor's buffer back in a pool, and the
    next blob of its size is read into it (modelstore/tensorbuf.go): while
    redis-benchmark pipelines blobs to the same keys as fast as it can and
    a client writes self-checking blobs of four sizes there too, with the
    log on, readers (AI.TENSORGET, a DAG's LOAD) and the keys after kill -9
    only ever see whole blobs."""

    def test_readers_and_the_log_see_whole_blobs(self):
        import threading
        d = DataDir(self)
        r = d.start()
        keys = ["t%012d" % i for i in range(6)]  # redis-benchmark's __rand_int__ with -r 6
        sizes = [600, 3136, 3200, 9000]
        plain = b"x" * 3136  # redis-benchmark's blob
        stop = threading.Event()
        errors, reads = [], [0]

        def whole(b):
            return b == plain or blob_whole(b)

        def writer():
            c = redis.Redis(port=d.port)
            seed = 0
            while not stop.is_set():
                p = c.pipeline(transaction=False)
                for i in range(8):
                    seed += 1
                    n = sizes[seed % len(sizes)]
                    p.execute_command("AI.TENSORSET", keys[seed % len(keys)], "UINT8", n, "BLOB", checked_blob(seed, n))
                if p.execute() != [b"OK"] * 8:
                    errors.append("TENSORSET not OK")

        def reader(dag):
            c = redis.Redis(port=d.port)
            i = 0
            while not stop.is_set():
                i += 1
                k = keys[i % len(keys)]
                try:
                    if dag:
                        b = c.execute_command("AI.DAGEXECUTE", "LOAD", 1, k, "|>", "AI.TENSORGET", k, "BLOB")[0]
                    else:
                        b = c.execute_command("AI.TENSORGET", k, "BLOB")
                except redis.ResponseError:
                    continue  # not written yet
                if not whole(b):
                    errors.append("%s of %s: not a whole blob" % ("DAG" if dag else "TENSORGET", k))
                reads[0] += 1

        bench = subprocess.Popen(["redis-benchmark", "-p", str(d.port), "-n", "100000000", "-c", "8", "-P", "16",
                                  "-r", "6", "AI.TENSORSET", "t__rand_int__", "UINT8", "3136", "BLOB", plain],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        threads = [threading.Thread(target=writer)]
        threads += [threading.Thread(target=reader, args=(dag,)) for dag in (False, True, True)]
        for t in threads:
            t.start()
        time.sleep(3)
        stop.set()
        bench.kill()
        bench.wait()
        for t in threads:
            t.join()
        self.assertEqual(errors[:5], [])
        self.assertGreater(reads[0], 100)
        d.kill9()
        r = d.start()
        self.assertEqual(sorted(k.decode() for k in r.keys()), keys)
        for k in keys:
            self.assertTrue(whole(r.execute_command("AI.TENSORGET", k, "BLOB")), k)
        d.kill9()


class CrashSampleTest(unittest.TestCase):
    """A short sample of `make crash-test` (crash.py): random kill -9
    rounds under concurrent writes, everysec then always."""

    def test_kill9_rounds_lose_nothing_acknowledged(self):
        for fsync in ("everysec", "always"):
            with self.subTest(appendfsync=fsync):
                s = crash.run(6, fsync, clients=3, max_s=0.8)
                self.assertGreater(s["acknowledged"], 50, s)



class StreamedModelFileTest(unittest.TestCase):
    """A large upload (over 4 MiB) is sealed into its model file as its chunks
    arrive, and that file is named by an id of its own rather than the
    model's SHA-256, so that the OK does not wait for the digest: the model
    survives kill -9 right after its OK, its digest after the restart is its
    bytes', and a rewrite names the same files without writing them again."""

    def test_streamed_upload_survives_kill9_and_rewrite(self):
        import sys
        sys.path.insert(0, MODELS)
        import huge_model
        m = huge_model.build(24 << 20)
        data = bytes(m.data)
        self.assertGreater(len(data), 20 << 20)
        chunks = [data[i:i + (1 << 20)] for i in range(0, len(data), 1 << 20)]
        d = DataDir(self)
        r = d.start()
        for key in ("a", "b"):  # the same bytes twice: a file each
            self.assertEqual(r.execute_command("AI.MODELSTORE", key, "ONNX", "CPU", "TAG", key, "BLOB", *chunks), b"OK")
        d.kill9()
        r = d.start()
        files = glob.glob(os.path.join(d.aofdir(), "models", "*.model"))
        self.assertEqual(len(files), 2, files)
        inodes = sorted(os.stat(f).st_ino for f in files)
        want = hashlib.sha256(data).hexdigest().encode()
        for key in ("a", "b"):
            self.assertEqual(model_get(r, key), data)
            info = r.execute_command("AI.MODELINFO", key)
            info = dict(zip(info[::2], info[1::2]))
            self.assertEqual((info[b"sha256"], info[b"tag"]), (want, key.encode()))
        r.execute_command("AI.TENSORSET", "x", "FLOAT", 1, huge_model.K, "BLOB", m.x.tobytes())
        r.execute_command("AI.MODELEXECUTE", "a", "INPUTS", 1, "x", "OUTPUTS", 1, "y")
        y = np.frombuffer(r.execute_command("AI.TENSORGET", "y", "BLOB"), dtype=np.float32).reshape(1, huge_model.K)
        np.testing.assert_allclose(y, m.y, rtol=1e-3, atol=1e-4)
        # A rewrite names the files again, and drops the one no key holds.
        r.delete("b")
        self.assertTrue(r.execute_command("BGREWRITEAOF"))
        poll(lambda: r.info("persistence")["aof_rewrites"] == 1 and
             r.info("persistence")["aof_rewrite_in_progress"] == 0, what="the rewrite")
        self.assertEqual(r.info("persistence")["aof_last_bgrewrite_status"], "ok")
        left = glob.glob(os.path.join(d.aofdir(), "models", "*.model"))
        self.assertEqual(len(left), 1, left)
        self.assertIn(os.stat(left[0]).st_ino, inodes, "the model file is not written again")
        with open(left[0], "rb") as f:
            self.assertNotIn(data[len(data) // 2:len(data) // 2 + 64], f.read(), "model bytes in the clear")
        d.kill9()
        r = d.start()
        self.assertEqual(sorted(r.keys()), [b"a", b"x", b"y"])
        self.assertEqual(model_get(r, "a"), data)
        d.kill9()

if __name__ == "__main__":
    unittest.main()
