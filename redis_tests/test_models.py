#!/usr/bin/python3
"""Black-box tests of issue "Models": AI.MODELSTORE/SET/GET/DEL/EXECUTE/RUN,
AI.INFO, AI._MODELSCAN, AI.MODELINFO, AI.CONFIG, AI.DAGEXECUTE(_RO),
auto-batching, hostile model blobs, the model directives (max-models,
maxmemory, model-dir, loadmodel) and concurrency.

Expected replies and error texts come from /work/shared/REDISAI.md (sections
2-5, 9-10); section numbers are cited next to the checks. Run with Debian's
python (redis 4.3.4, numpy):

    make build models
    cd redis_tests && /usr/bin/python3 -m unittest test_models -v
"""

import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
import time
import unittest
import uuid

import numpy as np
import redis

import harness
from harness import MODELS, Server, ServerError, ServerTestCase, model_bytes, poll


DTYPE_NAMES = {
    np.dtype("float32"): "FLOAT", np.dtype("float64"): "DOUBLE",
    np.dtype("int8"): "INT8", np.dtype("int16"): "INT16",
    np.dtype("int32"): "INT32", np.dtype("int64"): "INT64",
    np.dtype("uint8"): "UINT8", np.dtype("uint16"): "UINT16",
}
NUMPY_TYPES = {v.encode(): k for k, v in DTYPE_NAMES.items()}

WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"
NO_MODEL = "ERR model key is empty"
NO_TENSOR = "ERR tensor key is empty or in a different shard"
NO_RUN_INFO = "ERR cannot find run info for key"
IN_MISMATCH = "Number of keys given as INPUTS here does not match model definition"
OUT_MISMATCH = "Number of keys given as OUTPUTS here does not match model definition"
MODEL_FILE_ERR = "ERR FILE path must name a regular file inside model-dir"
# REDISAI.md 3.13 says 536346624, but RedisAI's config.h defines
# REDISAI_DEFAULT_MODEL_CHUNK_SIZE as 535822336 (511 * 1024 * 1024), which is
# also what 3.5 says.
DEFAULT_CHUNK_SIZE = 511 * 1024 * 1024


def have_model(name):
    return os.path.exists(os.path.join(MODELS, name))


def reference(name):
    """The reference input x and output y of linear / mlp / cnn."""
    with np.load(os.path.join(MODELS, name + "_ref.npz")) as z:
        return z["x"], z["y"]


def linear_np(x):
    """linear.onnx in numpy (gen_models.py: W = 0.1*arange(12), b = [1,2,3])."""
    w = (0.1 * np.arange(12, dtype=np.float64)).reshape(4, 3).astype(np.float32)
    return (x.astype(np.float32) @ w + np.array([1, 2, 3], np.float32)).astype(np.float32)


def split_sizes(data, sizes):
    """data cut into chunks of the given sizes, the rest as one last chunk."""
    out, off = [], 0
    for s in sizes:
        out.append(data[off:off + s])
        off += s
    if off < len(data):
        out.append(data[off:])
    return out


def split_n(data, n):
    step = -(-len(data) // n)
    return [data[i:i + step] for i in range(0, len(data), step)]


def tset(r, key, a):
    a = np.ascontiguousarray(a)
    return r.execute_command("AI.TENSORSET", key, DTYPE_NAMES[a.dtype], *a.shape, "BLOB", a.tobytes())


def tget(r, key):
    rep = r.execute_command("AI.TENSORGET", key, "META", "BLOB")
    d = dict(zip(rep[::2], rep[1::2]))
    return np.frombuffer(d[b"blob"], dtype=NUMPY_TYPES[d[b"dtype"]]).reshape(d[b"shape"])


def store(r, key, name_or_bytes, *opts, chunks=None):
    data = model_bytes(name_or_bytes) if isinstance(name_or_bytes, str) else name_or_bytes
    parts = chunks if chunks is not None else [data]
    return r.execute_command("AI.MODELSTORE", key, "ONNX", "CPU", *opts, "BLOB", *parts)


def execute(r, key, ins, outs, *extra):
    return r.execute_command("AI.MODELEXECUTE", key, "INPUTS", len(ins), *ins, "OUTPUTS", len(outs), *outs, *extra)


def as_dict(flat):
    """A RESP2 flat key/value array as a dict with str keys."""
    return {k.decode(): v for k, v in zip(flat[::2], flat[1::2])}


def info(r, key):
    return as_dict(r.execute_command("AI.INFO", key))


def modelinfo(r, key):
    """AI.MODELINFO as a dict (RESP2 maps arrive as flat arrays); inputs
    and outputs as lists of dicts."""
    d = as_dict(r.execute_command("AI.MODELINFO", key))
    for io in ("inputs", "outputs"):
        d[io] = [as_dict(x) for x in d[io]]
    return d


def wait_loaded(srv):
    """Polls until DBSIZE answers: the server answers -LOADING while it
    loads its snapshot and startup models (PING is allowed then), and the
    harness counts any reply to PING as ready."""
    def loaded():
        with harness.RawConn(srv.port) as c:
            return isinstance(c.cmd("DBSIZE"), int)
    poll(loaded, timeout=10, what="server to finish loading")


class ModelCase(ServerTestCase):
    """Shared helpers: exact error text through a raw connection, and
    AI.CONFIG values restored after the test."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        wait_loaded(cls.srv)

    def err(self, *args):
        """The exact error line (without '-') the server answers to args."""
        if not hasattr(self, "_raw"):
            self._raw = self.raw()
        rep = self._raw.cmd(*args)
        if not isinstance(rep, ServerError):
            self.fail("%r: expected an error, got %r" % (args[:6], rep))
        return rep.text

    def assertErr(self, want, *args):
        self.assertEqual(self.err(*args), want, "command %r" % (args[:12],))

    def aiconfig(self, name, value):
        """AI.CONFIG SET name value, restored at cleanup."""
        old = self.r.execute_command("AI.CONFIG", "GET", name)
        self.assertEqual(self.r.execute_command("AI.CONFIG", "SET", name, value), b"OK")
        self.addCleanup(self.r.execute_command, "AI.CONFIG", "SET", name, old)

    def assertLinearRuns(self, key, r=None):
        r = r or self.r
        x = np.array([[1, 2, 3, 4], [0.5, -1, 2, 8]], np.float32)
        tset(r, "lin_check_x", x)
        self.assertEqual(execute(r, key, ["lin_check_x"], ["lin_check_y"]), b"OK")
        np.testing.assert_allclose(tget(r, "lin_check_y"), linear_np(x), rtol=1e-6, atol=1e-6)


class StoreExecuteTest(ModelCase):
    """MODELSTORE (chunked) and MODELEXECUTE against numpy references."""

    def test_linear_in_chunks(self):
        data = model_bytes("linear.onnx")
        x, y = reference("linear")
        tset(self.r, "x", x)
        variants = {
            "one": [data],
            "bytes": [data[i:i + 1] for i in range(len(data))],  # 1-byte chunks
            "mixed": split_sizes(data, [1, 1, 7, 50, 1]),
            "halves": split_n(data, 2),
        }
        for name, chunks in variants.items():
            self.assertEqual(b"".join(chunks), data)
            self.assertEqual(self.r.execute_command("AI.MODELSTORE", name, "ONNX", "CPU", "BLOB", *chunks), b"OK", name)
            self.assertEqual(self.r.execute_command("AI.MODELGET", name, "BLOB"), data, name)
            self.assertEqual(execute(self.r, name, ["x"], ["y_" + name]), b"OK")
            got = tget(self.r, "y_" + name)
            self.assertEqual(got.shape, (3, 3))
            np.testing.assert_allclose(got, y, rtol=1e-6, atol=1e-6, err_msg=name)
        # REDISAI.md section 10: x=[1,2,3,4] -> [7, 9, 11], as bulk strings.
        self.r.execute_command("AI.TENSORSET", "x1", "FLOAT", 1, 4, "VALUES", 1, 2, 3, 4)
        execute(self.r, "one", ["x1"], ["y1"])
        self.assertEqual(self.r.execute_command("AI.TENSORGET", "y1", "VALUES"), [b"7", b"9", b"11"])

    def test_mlp_in_chunks(self):
        data = model_bytes("mlp.onnx")
        x, y = reference("mlp")
        chunks = split_sizes(data, [1, 1, 1, 1000]) + []
        chunks = chunks[:-1] + split_n(chunks[-1], 9)
        self.assertEqual(b"".join(chunks), data)
        self.assertEqual(self.r.execute_command("AI.MODELSTORE", "mlp", "ONNX", "CPU", "BLOB", *chunks), b"OK")
        tset(self.r, "x", x)
        self.assertEqual(execute(self.r, "mlp", ["x"], ["y"]), b"OK")
        got = tget(self.r, "y")
        self.assertEqual(got.shape, (3, 10))
        self.assertEqual(got.dtype, np.float32)
        np.testing.assert_allclose(got, y, rtol=1e-4, atol=1e-4)

    @unittest.skipUnless(have_model("cnn.onnx"), "cnn.onnx not generated (no PyTorch)")
    def test_cnn(self):
        data = model_bytes("cnn.onnx")
        x, y = reference("cnn")
        self.assertEqual(self.r.execute_command("AI.MODELSTORE", "cnn", "ONNX", "CPU", "BLOB", *split_n(data, 5)), b"OK")
        tset(self.r, "x", x)
        self.assertEqual(execute(self.r, "cnn", ["x"], ["y"]), b"OK")
        got = tget(self.r, "y")
        self.assertEqual(got.shape, (2, 10))
        np.testing.assert_allclose(got, y, rtol=1e-4, atol=1e-4)

    def test_add_int(self):
        data = model_bytes("add_int.onnx")
        chunks = [data[i:i + 1] for i in range(len(data))]
        self.assertEqual(self.r.execute_command("AI.MODELSTORE", "add", "ONNX", "CPU", "BLOB", *chunks), b"OK")
        a = np.array([1, -2, 3, 2**30, -(2**31)], np.int32)
        b = np.array([10, 20, -30, 5, 7], np.int32)
        tset(self.r, "a", a)
        tset(self.r, "b", b)
        self.assertEqual(execute(self.r, "add", ["a", "b"], ["c"]), b"OK")
        c = tget(self.r, "c")
        self.assertEqual(c.dtype, np.int32)
        np.testing.assert_array_equal(c, a + b)
        # The same key may be given twice; an output may equal an input (1.2).
        self.assertEqual(execute(self.r, "add", ["a", "a"], ["a"]), b"OK")
        np.testing.assert_array_equal(tget(self.r, "a"), np.array([1, -2, 3, 2**30, -(2**31)], np.int32) * 2)
        self.assertEqual(self.r.execute_command("AI.TENSORGET", "c", "VALUES"), [int(v) for v in a + b])

    def test_string_identity(self):
        data = model_bytes("string_identity.onnx")
        self.assertEqual(store(self.r, "s", "string_identity.onnx", chunks=split_n(data, 3)), b"OK")
        blob = "héllo".encode() + b"\0\0" + b"x" * 300 + b"\0" + b"last\0"
        self.r.execute_command("AI.TENSORSET", "in", "STRING", 4, "BLOB", blob)
        self.assertEqual(execute(self.r, "s", ["in"], ["out"]), b"OK")
        self.assertEqual(self.r.execute_command("AI.TENSORGET", "out", "VALUES"),
                         ["héllo".encode(), b"", b"x" * 300, b"last"])
        meta = self.r.execute_command("AI.TENSORGET", "out", "META", "BLOB")
        self.assertEqual(meta[:4], [b"dtype", b"STRING", b"shape", [4]])
        self.assertEqual(meta[5], blob)

    def test_pipelined_reads_see_outputs(self):
        """1.2: commands pipelined after a run on the same connection are
        answered after it, so they see its outputs."""
        store(self.r, "mlp", "mlp.onnx")
        x, y = reference("mlp")
        p = self.r.pipeline(transaction=False)
        p.execute_command("AI.TENSORSET", "x", "FLOAT", *x.shape, "BLOB", x.tobytes())
        for i in range(3):
            p.execute_command("AI.MODELEXECUTE", "mlp", "INPUTS", 1, "x", "OUTPUTS", 1, "y%d" % i)
            p.execute_command("AI.TENSORGET", "y%d" % i, "BLOB")
        p.execute_command("AI.INFO", "mlp")
        res = p.execute()
        self.assertEqual(res[0], b"OK")
        for i in range(3):
            self.assertEqual(res[1 + 2 * i], b"OK")
            np.testing.assert_allclose(np.frombuffer(res[2 + 2 * i], np.float32).reshape(3, 10), y, rtol=1e-4, atol=1e-4)
        self.assertEqual(as_dict(res[-1])["calls"], 3)

    def test_modelset_deprecated(self):
        data = model_bytes("linear.onnx")
        # 3.4: INPUTS/OUTPUTS names without counts (ignored for ONNX), chunks.
        self.assertEqual(self.r.execute_command("AI.MODELSET", "ms", "ONNX", "CPU", "TAG", "old", "BATCHSIZE", 2,
                                                "INPUTS", "x", "OUTPUTS", "y", "BLOB", *split_n(data, 4)), b"OK")
        meta = self.r.execute_command("AI.MODELGET", "ms", "META")
        self.assertEqual(meta[4:8], [b"tag", b"old", b"batchsize", 2])
        self.assertEqual(self.r.execute_command("AI.MODELSET", "ms2", "ONNX", "CPU", "BLOB", data), b"OK")
        # As RedisAI: a device that begins with CPU is the CPU, and what
        # comes before BLOB is ignored (compatibility review).
        for device in ("CPUX", "cpu:abc"):
            self.assertEqual(self.r.execute_command("AI.MODELSET", "ms3", "ONNX", device, "BLOB", data), b"OK")
        self.assertEqual(self.r.execute_command("AI.MODELSET", "ms3", "ONNX", "CPU", "JUNK", "BLOB", data), b"OK")
        self.assertLinearRuns("ms")
        self.assertLinearRuns("ms2")
        self.assertEqual(self.r.execute_command("AI.MODELGET", "ms", "BLOB"), data)

    def test_modelrun_deprecated(self):
        store(self.r, "lin", "linear.onnx")
        x, y = reference("linear")
        tset(self.r, "x", x)
        self.assertEqual(self.r.execute_command("AI.MODELRUN", "lin", "INPUTS", "x", "OUTPUTS", "y"), b"OK")
        np.testing.assert_allclose(tget(self.r, "y"), y, rtol=1e-6, atol=1e-6)
        self.assertEqual(self.r.execute_command("AI.MODELRUN", "lin", "TIMEOUT", 5000, "INPUTS", "x", "OUTPUTS", "y2"), b"OK")
        np.testing.assert_allclose(tget(self.r, "y2"), y, rtol=1e-6, atol=1e-6)
        store(self.r, "add", "add_int.onnx")
        tset(self.r, "a", np.array([1, 2], np.int32))
        self.assertEqual(self.r.execute_command("AI.MODELRUN", "add", "INPUTS", "a", "a", "OUTPUTS", "c"), b"OK")
        np.testing.assert_array_equal(tget(self.r, "c"), [2, 4])
        self.assertEqual(info(self.r, "lin")["calls"], 2)

    def test_star_key_gets_uuid(self):
        k1 = self.r.execute_command("AI.MODELSTORE", "*", "ONNX", "CPU", "TAG", "anon", "BLOB", model_bytes("linear.onnx"))
        k2 = store(self.r, "*", "linear.onnx")
        self.assertIsInstance(k1, bytes)
        for k in (k1, k2):
            self.assertEqual(str(uuid.UUID(k.decode())), k.decode())
        self.assertNotEqual(k1, k2)
        self.assertEqual(self.r.exists(k1, k2), 2)
        self.assertEqual(self.r.execute_command("AI.MODELGET", k1, "META")[5], b"anon")
        self.assertEqual(self.r.execute_command("AI.MODELGET", k1, "BLOB"), model_bytes("linear.onnx"))
        self.assertEqual(modelinfo(self.r, k1)["id"], k1)
        self.assertLinearRuns(k1)
        self.assertIn([k1, b"anon"], self.r.execute_command("AI._MODELSCAN"))
        # A named key has no id.
        store(self.r, "named", "linear.onnx")
        self.assertEqual(modelinfo(self.r, "named")["id"], b"")

    def test_optimize_0(self):
        self.assertEqual(store(self.r, "o0", "mlp.onnx", "OPTIMIZE", 0), b"OK")
        self.assertEqual(store(self.r, "o1", "mlp.onnx", "OPTIMIZE", 1), b"OK")
        self.assertEqual(modelinfo(self.r, "o0")["optimize"], 0)
        self.assertEqual(modelinfo(self.r, "o1")["optimize"], 1)
        x, y = reference("mlp")
        tset(self.r, "x", x)
        for k in ("o0", "o1"):
            self.assertEqual(execute(self.r, k, ["x"], ["y" + k]), b"OK")
            np.testing.assert_allclose(tget(self.r, "y" + k), y, rtol=1e-4, atol=1e-4)
        self.assertTrue(self.err("AI.MODELSTORE", "o2", "ONNX", "CPU", "OPTIMIZE", 2, "BLOB",
                                 model_bytes("linear.onnx")).startswith("ERR "))
        self.assertEqual(self.r.exists("o2"), 0)


class MetadataTest(ModelCase):
    """MODELGET, TYPE, DEL/MODELDEL, AI.INFO, _MODELSCAN, MODELINFO."""

    def test_modelget_meta_exact(self):
        data = model_bytes("linear.onnx")
        store(self.r, "m", "linear.onnx", "TAG", "v1", "BATCHSIZE", 8, "MINBATCHSIZE", 2, "MINBATCHTIMEOUT", 7)
        meta = [b"backend", b"ONNX", b"device", b"CPU", b"tag", b"v1", b"batchsize", 8, b"minbatchsize", 2,
                b"inputs", [b"x"], b"outputs", [b"y"], b"minbatchtimeout", 7]
        self.assertEqual(len(meta), 16)
        self.assertEqual(self.r.execute_command("AI.MODELGET", "m", "META"), meta)
        self.assertEqual(self.r.execute_command("AI.MODELGET", "m", "meta"), meta)
        # No option or META BLOB: 18 items, blob last; unknown words ignored.
        self.assertEqual(self.r.execute_command("AI.MODELGET", "m"), meta + [b"blob", data])
        self.assertEqual(self.r.execute_command("AI.MODELGET", "m", "META", "BLOB"), meta + [b"blob", data])
        self.assertEqual(self.r.execute_command("AI.MODELGET", "m", "BLOB"), data)
        self.assertEqual(self.r.execute_command("AI.MODELGET", "m", "META", "NOSUCH"), meta)
        # Defaults; the device string is kept as given; two inputs.
        store(self.r, "d", "add_int.onnx")
        self.r.execute_command("AI.MODELSTORE", "d2", "ONNX", "cpu:0", "BLOB", model_bytes("add_int.onnx"))
        self.assertEqual(self.r.execute_command("AI.MODELGET", "d", "META"),
                         [b"backend", b"ONNX", b"device", b"CPU", b"tag", b"", b"batchsize", 0, b"minbatchsize", 0,
                          b"inputs", [b"a", b"b"], b"outputs", [b"c"], b"minbatchtimeout", 0])
        self.assertEqual(self.r.execute_command("AI.MODELGET", "d2", "META")[3], b"cpu:0")
        self.assertEqual(info(self.r, "d2")["device"], b"cpu:0")
        # AOF-rewrite form (7.2): every clause, empty tag, zeros.
        self.assertEqual(store(self.r, "aof", "linear.onnx", "TAG", "", "BATCHSIZE", 0, "MINBATCHSIZE", 0,
                               "MINBATCHTIMEOUT", 0), b"OK")
        self.assertEqual(self.r.execute_command("AI.MODELGET", "aof", "META")[4:10],
                         [b"tag", b"", b"batchsize", 0, b"minbatchsize", 0])
        # 3.3: "2.0" is accepted as an unsigned value.
        self.assertEqual(store(self.r, "f", "linear.onnx", "BATCHSIZE", "2.0"), b"OK")
        self.assertEqual(self.r.execute_command("AI.MODELGET", "f", "META")[7], 2)

    def test_modelget_blob_chunked(self):
        data = model_bytes("linear.onnx")
        self.assertGreater(len(data), 150)
        store(self.r, "m", "linear.onnx")
        self.assertEqual(self.r.execute_command("AI.CONFIG", "GET", "MODEL_CHUNK_SIZE"), DEFAULT_CHUNK_SIZE)
        self.aiconfig("MODEL_CHUNK_SIZE", 50)
        blob = self.r.execute_command("AI.MODELGET", "m", "BLOB")
        self.assertIsInstance(blob, list)
        self.assertEqual(len(blob), -(-len(data) // 50))
        self.assertTrue(all(len(c) == 50 for c in blob[:-1]), [len(c) for c in blob])
        self.assertEqual(b"".join(blob), data)
        full = self.r.execute_command("AI.MODELGET", "m", "META", "BLOB")
        self.assertEqual(len(full), 18)
        self.assertEqual(full[16], b"blob")
        self.assertEqual(full[17], blob)
        # The older form `AI.CONFIG MODEL_CHUNK_SIZE n`; an exact divisor gives
        # no empty final chunk (REDISAI.md 9.4, deliberately not copied).
        divisor = next(d for d in range(40, len(data)) if len(data) % d == 0)
        self.assertEqual(self.r.execute_command("AI.CONFIG", "MODEL_CHUNK_SIZE", divisor), b"OK")
        blob = self.r.execute_command("AI.MODELGET", "m", "BLOB")
        self.assertEqual([len(c) for c in blob], [divisor] * (len(data) // divisor))
        self.assertEqual(b"".join(blob), data)
        # A chunk size of at least the length: one bulk string.
        self.r.execute_command("AI.CONFIG", "SET", "MODEL_CHUNK_SIZE", len(data))
        self.assertEqual(self.r.execute_command("AI.MODELGET", "m", "BLOB"), data)

    def test_modelget_small_chunks_of_a_large_model(self):
        """Chunks much smaller than the model make a reply larger than it
        (16 bytes each: 1.7x), which leaves the server as it is built, a
        megabyte at a time, not all at once."""
        data = model_bytes("mlp.onnx")
        self.assertGreater(len(data), 2 << 20)
        store(self.r, "mlp", "mlp.onnx")
        self.aiconfig("MODEL_CHUNK_SIZE", 16)
        blob = self.r.execute_command("AI.MODELGET", "mlp", "BLOB")
        self.assertEqual(len(blob), -(-len(data) // 16))
        self.assertEqual(b"".join(blob), data)
        self.assertEqual(self.r.ping(), True)

    def test_modelget_in_a_transaction(self):
        """In MULTI/EXEC, AI.MODELGET's bytes go out once the transaction has
        run (its lock released), from where they lie, in their place among
        the replies and chunked as they were asked: through redis-py's
        transaction pipeline, and in one raw pipeline whose next command
        streams the model again."""
        data = model_bytes("mlp.onnx")
        store(self.r, "mlp", "mlp.onnx")
        self.aiconfig("MODEL_CHUNK_SIZE", 16)
        p = self.r.pipeline(transaction=True)
        p.execute_command("AI.MODELGET", "mlp", "BLOB")
        p.ping()
        p.execute_command("AI.MODELGET", "mlp", "META", "BLOB")
        p.execute_command("AI.MODELGET", "nosuch", "BLOB")
        blob, pong, full, missing = p.execute(raise_on_error=False)
        self.assertEqual(len(blob), -(-len(data) // 16))
        self.assertEqual(b"".join(blob), data)
        self.assertEqual(pong, True)
        self.assertEqual(full[:2], [b"backend", b"ONNX"])
        self.assertEqual(full[16], b"blob")
        self.assertEqual(b"".join(full[17]), data)
        self.assertIsInstance(missing, redis.ResponseError)
        c = self.raw(timeout=30)
        c.send(c.encode("MULTI") + c.encode("AI.MODELGET", "mlp", "BLOB") + c.encode("EXEC")
               + c.encode("AI.CONFIG", "SET", "MODEL_CHUNK_SIZE", DEFAULT_CHUNK_SIZE)
               + c.encode("AI.MODELGET", "mlp", "BLOB") + c.encode("PING"))
        self.assertEqual(c.read_reply(), "OK")
        self.assertEqual(c.read_reply(), "QUEUED")
        (chunks,) = c.read_reply()
        self.assertEqual(b"".join(chunks), data)
        self.assertEqual(c.read_reply(), "OK")
        self.assertEqual(c.read_reply(), data)  # 2.7 MB: streamed from where it lies
        self.assertEqual(c.read_reply(), "PONG")
        # Under CLIENT REPLY OFF the reply is dropped, and the reference
        # that kept the model for it is released: deleting the key then
        # frees the model's bytes (used_memory counts them until the last
        # reference goes).
        c.send(c.encode("CLIENT", "REPLY", "OFF") + c.encode("MULTI") + c.encode("AI.MODELGET", "mlp", "BLOB")
               + c.encode("EXEC") + c.encode("CLIENT", "REPLY", "ON") + c.encode("PING"))
        self.assertEqual(c.read_reply(), "OK")
        self.assertEqual(c.read_reply(), "PONG")
        before = self.r.info("memory")["used_memory"]
        self.assertEqual(self.r.execute_command("AI.MODELDEL", "mlp"), b"OK")
        self.assertLessEqual(self.r.info("memory")["used_memory"], before - len(data))
        store(self.r, "mlp", "mlp.onnx")
        # A model deleted while its reply waits is still sent whole.
        c.send(c.encode("MULTI") + c.encode("AI.MODELGET", "mlp", "BLOB") + c.encode("AI.MODELDEL", "mlp")
               + c.encode("EXEC"))
        self.assertEqual([c.read_reply() for _ in range(3)], ["OK", "QUEUED", "QUEUED"])
        self.assertEqual(c.read_reply(), [data, "OK"])
        self.assertEqual(self.r.exists("mlp"), 0)
        self.assertEqual(self.r.ping(), True)

    def test_type_del_modeldel(self):
        store(self.r, "m", "linear.onnx", "TAG", "t")
        self.assertEqual(self.r.type("m"), b"AI__MODEL")
        self.assertEqual(self.r.delete("m"), 1)
        self.assertErr(NO_MODEL, "AI.MODELGET", "m")
        self.assertErr(NO_RUN_INFO, "AI.INFO", "m")
        self.assertEqual(self.r.execute_command("AI._MODELSCAN"), [])
        store(self.r, "m", "linear.onnx")
        self.assertEqual(self.r.execute_command("AI.MODELDEL", "m"), b"OK")
        self.assertEqual(self.r.exists("m"), 0)
        self.assertErr(NO_MODEL, "AI.MODELDEL", "m")
        self.assertErr(NO_MODEL, "AI.MODELGET", "m", "META")
        self.assertErr(NO_RUN_INFO, "AI.INFO", "m")
        self.r.execute_command("AI.TENSORSET", "t", "FLOAT", 1, "VALUES", 1)
        self.assertErr(WRONGTYPE, "AI.MODELDEL", "t")
        self.assertErr(WRONGTYPE, "AI.MODELGET", "t")
        self.assertEqual(self.r.exists("t"), 1)
        # UNLINK and EXPIRE work on models as on any key.
        store(self.r, "u", "linear.onnx")
        self.assertEqual(self.r.unlink("u"), 1)
        store(self.r, "e", "linear.onnx")
        self.r.pexpire("e", 50)
        poll(lambda: self.r.exists("e") == 0, timeout=5, what="model key to expire")
        self.assertErr(NO_MODEL, "AI.MODELGET", "e")

    def test_info_counters(self):
        store(self.r, "lin", "linear.onnx", "TAG", "tg")
        d = info(self.r, "lin")
        self.assertEqual(list(d), ["key", "type", "backend", "device", "tag", "duration", "samples", "calls", "errors"])
        self.assertEqual(d, {"key": b"lin", "type": b"MODEL", "backend": b"ONNX", "device": b"CPU", "tag": b"tg",
                             "duration": 0, "samples": 0, "calls": 0, "errors": 0})
        tset(self.r, "x3", np.ones((3, 4), np.float32))
        tset(self.r, "x1", np.ones((1, 4), np.float32))
        execute(self.r, "lin", ["x3"], ["y"])
        execute(self.r, "lin", ["x1"], ["y"])
        d = info(self.r, "lin")
        self.assertEqual((d["calls"], d["samples"], d["errors"]), (2, 4, 0))
        self.assertGreater(d["duration"], 0)
        # A run-time failure counts a call and an error; a parse-time one nothing.
        tset(self.r, "bad", np.ones((2, 5), np.float32))
        self.assertTrue(self.err(*("AI.MODELEXECUTE lin INPUTS 1 bad OUTPUTS 1 y".split())).startswith("ERR Got invalid dimensions"))
        self.assertErr(IN_MISMATCH, *"AI.MODELEXECUTE lin INPUTS 2 x1 x1 OUTPUTS 1 y".split())
        self.assertErr(NO_TENSOR, *"AI.MODELEXECUTE lin INPUTS 1 nosuch OUTPUTS 1 y".split())
        d = info(self.r, "lin")
        self.assertEqual((d["calls"], d["samples"], d["errors"]), (3, 4, 1))
        # RESETSTAT (any case) zeroes; another third word is ignored.
        self.assertEqual(self.r.execute_command("AI.INFO", "lin", "resetstat"), b"OK")
        self.assertEqual(info(self.r, "lin"), {"key": b"lin", "type": b"MODEL", "backend": b"ONNX", "device": b"CPU",
                                               "tag": b"tg", "duration": 0, "samples": 0, "calls": 0, "errors": 0})
        self.assertEqual(len(self.r.execute_command("AI.INFO", "lin", "OTHER")), 18)
        execute(self.r, "lin", ["x3"], ["y"])
        self.assertEqual(info(self.r, "lin")["samples"], 3)
        # Storing again at the key starts fresh statistics (3.12).
        store(self.r, "lin", "linear.onnx")
        self.assertEqual(info(self.r, "lin")["calls"], 0)
        self.assertErr(NO_RUN_INFO, "AI.INFO", "x3")
        self.assertErr(NO_RUN_INFO, "AI.INFO", "nosuch")
        for args in (("AI.INFO",), ("AI.INFO", "lin", "RESETSTAT", "x")):
            self.assertTrue(self.err(*args).lower().startswith("err wrong number of arguments for 'ai.info'"), args)

    def test_info_survives_rename(self):
        store(self.r, "a", "linear.onnx", "TAG", "t")
        tset(self.r, "x", np.ones((2, 4), np.float32))
        execute(self.r, "a", ["x"], ["y"])
        self.assertTrue(self.r.rename("a", "b"))
        d = info(self.r, "b")
        self.assertEqual((d["key"], d["calls"], d["samples"], d["tag"]), (b"b", 1, 2, b"t"))
        self.assertErr(NO_RUN_INFO, "AI.INFO", "a")
        self.assertEqual(self.r.execute_command("AI._MODELSCAN"), [[b"b", b"t"]])
        self.assertLinearRuns("b")

    def test_modelscan(self):
        self.assertEqual(self.r.execute_command("AI._MODELSCAN"), [])
        store(self.r, "a", "linear.onnx", "TAG", "ta")
        store(self.r, "b", "add_int.onnx")
        self.r.execute_command("AI.TENSORSET", "t", "FLOAT", 1, "VALUES", 1)
        self.assertEqual(sorted(self.r.execute_command("AI._MODELSCAN")), [[b"a", b"ta"], [b"b", b""]])
        self.assertTrue(self.err("AI._MODELSCAN", "x").lower().startswith("err wrong number of arguments"))

    def test_modelinfo_fields(self):
        data = model_bytes("linear.onnx")
        before = time.time() * 1000
        store(self.r, "lin", "linear.onnx", "TAG", "v2", "BATCHSIZE", 4, "MINBATCHSIZE", 2, "MINBATCHTIMEOUT", 9)
        d = modelinfo(self.r, "lin")
        self.assertEqual(list(d), ["key", "id", "sha256", "size", "backend", "device", "tag", "inputs", "outputs",
                                   "batchsize", "minbatchsize", "minbatchtimeout", "optimize", "shared_with",
                                   "persist", "created", "weights", "owner", "engine"])
        self.assertEqual(d["key"], b"lin")
        self.assertEqual(d["sha256"], hashlib.sha256(data).hexdigest().encode())
        self.assertEqual(d["size"], len(data))
        self.assertEqual((d["backend"], d["device"], d["tag"]), (b"ONNX", b"CPU", b"v2"))
        self.assertEqual(d["inputs"], [{"name": b"x", "dtype": b"FLOAT", "shape": [-1, 4]}])
        self.assertEqual(d["outputs"], [{"name": b"y", "dtype": b"FLOAT", "shape": [-1, 3]}])
        self.assertEqual((d["batchsize"], d["minbatchsize"], d["minbatchtimeout"]), (4, 2, 9))
        self.assertEqual((d["optimize"], d["shared_with"], d["persist"]), (1, 0, 1))
        self.assertEqual(d["weights"], b"copied")  # too small to share (test_huge.py)
        self.assertEqual(d["engine"], b"onnxruntime-worker")  # test_goengine.py: "go"
        self.assertLessEqual(abs(d["created"] - before), 10_000)
        store(self.r, "add", "add_int.onnx", "NOPERSIST")
        d = modelinfo(self.r, "add")
        self.assertEqual(d["inputs"], [{"name": b"a", "dtype": b"INT32", "shape": [-1]},
                                       {"name": b"b", "dtype": b"INT32", "shape": [-1]}])
        self.assertEqual(d["outputs"], [{"name": b"c", "dtype": b"INT32", "shape": [-1]}])
        self.assertEqual(d["persist"], 0)
        store(self.r, "s", "string_identity.onnx")
        self.assertEqual(modelinfo(self.r, "s")["inputs"], [{"name": b"s", "dtype": b"STRING", "shape": [-1]}])
        if have_model("cnn.onnx"):
            store(self.r, "cnn", "cnn.onnx")
            self.assertEqual(modelinfo(self.r, "cnn")["inputs"], [{"name": b"x", "dtype": b"FLOAT", "shape": [-1, 1, 28, 28]}])
        self.assertErr(NO_MODEL, "AI.MODELINFO", "nosuch")
        self.r.execute_command("AI.TENSORSET", "t", "FLOAT", 1, "VALUES", 1)
        self.assertErr(WRONGTYPE, "AI.MODELINFO", "t")

    def test_identical_blobs_share_one_session(self):
        data = model_bytes("linear.onnx")
        store(self.r, "k1", "linear.onnx", "TAG", "one")
        # The same bytes in other chunks, another tag and batch settings.
        self.r.execute_command("AI.MODELSTORE", "k2", "ONNX", "CPU", "TAG", "two", "BATCHSIZE", 2,
                               "BLOB", *split_n(data, 3))
        i1, i2 = modelinfo(self.r, "k1"), modelinfo(self.r, "k2")
        self.assertEqual(i1["sha256"], i2["sha256"])
        self.assertEqual(i1["sha256"], hashlib.sha256(data).hexdigest().encode())
        self.assertEqual((i1["shared_with"], i2["shared_with"]), (1, 1))
        self.assertEqual((i1["tag"], i2["tag"]), (b"one", b"two"))
        # A third copy counts both others; a different model shares nothing.
        store(self.r, "k3", "linear.onnx")
        store(self.r, "other", "add_int.onnx")
        self.assertEqual(modelinfo(self.r, "k1")["shared_with"], 2)
        self.assertEqual(modelinfo(self.r, "other")["shared_with"], 0)
        # Deleting keys leaves the others working.
        self.assertEqual(self.r.delete("k1"), 1)
        self.assertEqual(self.r.execute_command("AI.MODELDEL", "k3"), b"OK")
        self.assertEqual(modelinfo(self.r, "k2")["shared_with"], 0)
        self.assertLinearRuns("k2")
        # Stats are per key, not per shared session.
        store(self.r, "k4", "linear.onnx")
        self.assertLinearRuns("k4")
        self.assertEqual(info(self.r, "k4")["calls"], 1)
        self.assertEqual(info(self.r, "k2")["calls"], 1)
        # Overwriting a shared key with another model leaves the other intact.
        store(self.r, "k4", "add_int.onnx")
        self.assertEqual(modelinfo(self.r, "k2")["shared_with"], 0)
        self.assertEqual(modelinfo(self.r, "other")["shared_with"], 1)
        self.assertLinearRuns("k2")


class ConfigTest(ModelCase):
    """AI.CONFIG (3.13)."""

    def test_get_model_chunk_size_is_integer(self):
        v = self.r.execute_command("AI.CONFIG", "GET", "MODEL_CHUNK_SIZE")
        self.assertIsInstance(v, int)
        self.assertEqual(v, DEFAULT_CHUNK_SIZE)
        self.assertEqual(self.r.execute_command("AI.CONFIG", "get", "model_chunk_size"), DEFAULT_CHUNK_SIZE)
        # Words after the name are ignored, as RedisAI's (compatibility review).
        self.assertEqual(self.r.execute_command("AI.CONFIG", "GET", "MODEL_CHUNK_SIZE", "extra"), DEFAULT_CHUNK_SIZE)
        with self.raw() as c:
            self.assertEqual(c.cmd_raw("AI.CONFIG", "GET", "MODEL_CHUNK_SIZE"), b":%d\r\n" % DEFAULT_CHUNK_SIZE)

    def test_set_and_get(self):
        for name, value in (("MODEL_CHUNK_SIZE", 1000), ("MODEL_EXECUTION_TIMEOUT", 3000),
                            ("INTRA_OP_PARALLELISM", 2), ("INTER_OP_PARALLELISM", 1), ("THREADS_PER_QUEUE", 2)):
            self.aiconfig(name, value)
            self.assertEqual(self.r.execute_command("AI.CONFIG", "GET", name), value, name)
        # Models still store and run under the changed settings.
        store(self.r, "m", "linear.onnx")
        self.assertLinearRuns("m")
        old = self.r.execute_command("AI.CONFIG", "GET", "BACKENDSPATH")
        self.assertIsInstance(old, bytes)
        self.addCleanup(self.r.execute_command, "AI.CONFIG", "BACKENDSPATH", old)
        self.assertEqual(self.r.execute_command("AI.CONFIG", "BACKENDSPATH", "/opt/ai/backends"), b"OK")
        self.assertEqual(self.r.execute_command("AI.CONFIG", "GET", "BACKENDSPATH"), b"/opt/ai/backends")
        self.assertEqual(self.r.execute_command("AI.CONFIG", "LOADBACKEND", "ONNX", "/x/onnx.so"), b"OK")
        self.assertIsNone(self.r.execute_command("AI.CONFIG", "GET", "NOSUCH"))

    def test_errors(self):
        self.assertErr("ERR unsupported subcommand", "AI.CONFIG", "NOSUCH", "1")
        self.assertErr("ERR BACKENDSPATH: missing path argument", "AI.CONFIG", "BACKENDSPATH")
        self.assertErr("ERR MODEL_CHUNK_SIZE: missing chunk size", "AI.CONFIG", "MODEL_CHUNK_SIZE")
        for bad in ("0", "-5", "abc", "1.5"):
            self.assertErr("ERR MODEL_CHUNK_SIZE: invalid chunk size", "AI.CONFIG", "MODEL_CHUNK_SIZE", bad)
            self.assertErr("ERR MODEL_CHUNK_SIZE: invalid chunk size", "AI.CONFIG", "SET", "MODEL_CHUNK_SIZE", bad)
        self.assertTrue(self.err("AI.CONFIG", "SET", "MODEL_EXECUTION_TIMEOUT", 999).startswith("ERR "))
        self.assertTrue(self.err("AI.CONFIG", "SET", "THREADS_PER_QUEUE", 0).startswith("ERR "))
        # The thread counts stop at 1024, as their directives do: unbounded,
        # this one never returned while the server's memory grew by gigabytes.
        workers = self.r.execute_command("AI.CONFIG", "GET", "THREADS_PER_QUEUE")
        for name, value in (("THREADS_PER_QUEUE", 100000000), ("THREADS_PER_QUEUE", 1025),
                            ("INTRA_OP_PARALLELISM", 1025), ("INTER_OP_PARALLELISM", 2 ** 40)):
            self.assertErr("ERR %s: invalid value" % name, "AI.CONFIG", "SET", name, value)
        self.assertEqual(self.r.execute_command("AI.CONFIG", "GET", "THREADS_PER_QUEUE"), workers)
        store(self.r, "m", "linear.onnx")
        self.assertLinearRuns("m")
        self.assertErr("ERR unsupported backend", "AI.CONFIG", "LOADBACKEND", "PORCH", "/x.so")
        self.assertEqual(self.err("AI.CONFIG", "LOADBACKEND", "TORCH", "/x.so"), "ERR error loading backend")
        for args in (("AI.CONFIG",), ("AI.CONFIG", "GET"), ("AI.CONFIG", "LOADBACKEND", "ONNX")):
            self.assertTrue(self.err(*args).lower().startswith("err wrong number of arguments for 'ai.config'"), args)
        self.assertEqual(self.r.execute_command("AI.CONFIG", "GET", "MODEL_CHUNK_SIZE"), DEFAULT_CHUNK_SIZE)

    def test_redisai_py_style_store(self):
        """redisai-py's modelstore(): AI.CONFIG GET MODEL_CHUNK_SIZE, then
        MODELSTORE with the blob sliced by it (REDISAI.md 8)."""
        self.aiconfig("MODEL_CHUNK_SIZE", 64)
        size = self.r.execute_command("AI.CONFIG", "GET", "MODEL_CHUNK_SIZE")
        data = model_bytes("linear.onnx")
        chunks = [data[i:i + size] for i in range(0, len(data), size)]
        self.assertGreater(len(chunks), 2)
        self.assertEqual(self.r.execute_command("AI.MODELSTORE", "m", "ONNX", "CPU", "TAG", "py", "BLOB", *chunks), b"OK")
        got = self.r.execute_command("AI.MODELGET", "m", "META", "BLOB")
        d = as_dict(got)
        self.assertEqual(d["tag"], b"py")
        self.assertEqual(d["blob"], chunks)  # redisai-py keeps the list
        self.assertLinearRuns("m")


class ParseErrorTest(ModelCase):
    """Every parse error of REDISAI.md 3.3-3.9 and 3.13, exact text."""

    def setUp(self):
        super().setUp()
        store(self.r, "lin", "linear.onnx")
        store(self.r, "add", "add_int.onnx")
        self.blob = model_bytes("linear.onnx")
        tset(self.r, "a", np.array([1], np.int32))
        tset(self.r, "b", np.array([2], np.int32))
        tset(self.r, "x", np.ones((1, 4), np.float32))

    def test_modelstore(self):
        B = self.blob
        rows = [
            ("ERR unsupported backend", "m", "PORCH", "CPU", "BLOB", B),
            ("ERR Invalid DEVICE", "m", "ONNX", "bad_device", "BLOB", B),
            ("ERR Invalid DEVICE", "m", "ONNX", "TPU", "BLOB", B),
            ("ERR Invalid DEVICE", "m", "ONNX", "CPU::", "BLOB", B),
            ("ERR Invalid DEVICE", "m", "ONNX", "CPU:1.8", "BLOB", B),
            ("ERR Invalid DEVICE", "m", "ONNX", "CPU:123456", "BLOB", B),
            ("ERR GPU requested but ONNX couldn't find CUDA", "m", "ONNX", "GPU", "BLOB", B),
            ("ERR GPU requested but ONNX couldn't find CUDA", "m", "ONNX", "gpu:1", "BLOB", B),
            ("ERR Invalid argument for BATCHSIZE", "m", "ONNX", "CPU", "BATCHSIZE", "bad_size", "BLOB", B),
            ("ERR Invalid argument for BATCHSIZE", "m", "ONNX", "CPU", "BATCHSIZE", -1, "BLOB", B),
            ("ERR Invalid argument for BATCHSIZE", "m", "ONNX", "CPU", "BATCHSIZE", "2.5", "BLOB", B),
            ("ERR MINBATCHSIZE specified without BATCHSIZE", "m", "ONNX", "CPU", "MINBATCHSIZE", 2, "BLOB", B),
            ("ERR Invalid argument for MINBATCHSIZE", "m", "ONNX", "CPU", "BATCHSIZE", 2, "MINBATCHSIZE", "bad", "BLOB", B),
            ("ERR MINBATCHTIMEOUT specified without MINBATCHSIZE", "m", "ONNX", "CPU", "BATCHSIZE", 2,
             "MINBATCHTIMEOUT", 1000, "BLOB", B),
            ("ERR Invalid argument for MINBATCHTIMEOUT", "m", "ONNX", "CPU", "BATCHSIZE", 2, "MINBATCHSIZE", 2,
             "MINBATCHTIMEOUT", "bad_timeout", "BLOB", B),
            ("ERR INPUTS argument should not be specified for this backend", "m", "ONNX", "CPU",
             "INPUTS", 1, "x", "OUTPUTS", 1, "y", "BLOB", B),
            ("ERR Insufficient arguments, missing model BLOB", "m", "ONNX", "CPU", "BATCHSIZE", 2),
            ("ERR Insufficient arguments, missing model BLOB", "m", "ONNX", "CPU", "TAG", "t"),
            ("ERR Insufficient arguments, missing model BLOB", "m", "ONNX", "CPU", "BATCHSIZE", 2, "BLOB"),
            ("ERR Invalid argument, expected BLOB", "m", "ONNX", "CPU", "BATCHSIZE", 2, "NOT_BLOB"),
            ("ERR Invalid argument, expected BLOB", "m", "ONNX", "CPU", "OUTPUTS", 1, "y", "BLOB", B),
            ("ERR Invalid argument, expected BLOB", "m", "ONNX", "CPU", "BATCHSIZE", 2, "TAG", "t", "BLOB", B),
            ("ERR Could not load backend", "m", "TF", "CPU", "BLOB", B),
            ("ERR Could not load backend", "m", "TORCH", "CPU", "BLOB", B),
            # TF's own INPUTS, then its backend is not there (REDISAI.md 3.3:
            # the INPUTS refusal is for non-TF backends).
            ("ERR Could not load backend", "m", "TF", "CPU", "INPUTS", 1, "a", "OUTPUTS", 1, "b", "BLOB", B),
        ]
        for want, *args in rows:
            self.assertErr(want, "AI.MODELSTORE", *args)
        self.assertTrue(self.err("AI.MODELSTORE", "m", "ONNX", "BLOB", B).lower().startswith(
            "err wrong number of arguments for 'ai.modelstore' command"))
        self.assertEqual(self.r.exists("m"), 0)
        # Keywords are case-insensitive; a CPU:<n> device is accepted.
        self.assertEqual(self.r.execute_command("AI.MODELSTORE", "m", "onnx", "CPU:0", "tag", "t", "batchsize", 2,
                                                "blob", B), b"OK")

    def test_modelset(self):
        B = self.blob
        rows = [
            ("ERR unsupported backend", "m", "PORCH", "CPU", "BLOB", B),
            ("ERR Invalid DEVICE", "m", "ONNX", "BLOB", B),
            ("ERR Invalid argument for BATCHSIZE", "m", "ONNX", "CPU", "BATCHSIZE", "bad_size", "BLOB", B),
            ("ERR MINBATCHSIZE specified without BATCHSIZE", "m", "ONNX", "CPU", "MINBATCHSIZE", 2, "BLOB", B),
            ("ERR Invalid argument for MINBATCHSIZE", "m", "ONNX", "CPU", "BATCHSIZE", 2, "MINBATCHSIZE", "bad", "BLOB", B),
            ("ERR MINBATCHTIMEOUT specified without BATCHSIZE", "m", "ONNX", "CPU", "MINBATCHTIMEOUT", 10, "BLOB", B),
            ("ERR MINBATCHTIMEOUT specified without MINBATCHSIZE", "m", "ONNX", "CPU", "BATCHSIZE", 2,
             "MINBATCHTIMEOUT", 1000, "BLOB", B),
            ("ERR Invalid argument for MINBATCHTIMEOUT", "m", "ONNX", "CPU", "BATCHSIZE", 2, "MINBATCHSIZE", 2,
             "MINBATCHTIMEOUT", "bad_timeout", "BLOB", B),
            ("ERR Insufficient arguments, missing model BLOB", "m", "ONNX", "CPU", "BATCHSIZE", 2),
            ("ERR Insufficient arguments, missing model BLOB", "m", "ONNX", "CPU", "BATCHSIZE", 2, "NOT_BLOB"),
            ("ERR Insufficient arguments, missing model BLOB", "m", "ONNX", "CPU", "BATCHSIZE", 2, "BLOB"),
            # Nested clauses: refused without BATCHSIZE before their value
            # is read; TFLITE does not batch; TF needs its names (3.4).
            ("ERR MINBATCHSIZE specified without BATCHSIZE", "m", "ONNX", "CPU", "MINBATCHSIZE", "x", "BLOB", B),
            ("ERR MINBATCHSIZE specified without BATCHSIZE", "m", "ONNX", "CPU", "MINBATCHSIZE", 0, "BLOB", B),
            ("ERR MINBATCHTIMEOUT specified without BATCHSIZE", "m", "ONNX", "CPU", "MINBATCHTIMEOUT", 0, "BLOB", B),
            ("ERR Auto-batching not supported by the TFLITE backend", "m", "TFLITE", "CPU", "BATCHSIZE", 2, "BLOB", B),
            ("ERR Insufficient arguments, INPUTS and OUTPUTS not specified", "m", "TF", "CPU", "BLOB", B),
            # The device: over 10 bytes or a keyword here, the rest as the
            # ONNX backend reads it (compatibility review).
            ("ERR Invalid DEVICE", "m", "ONNX", "CPU:1234567", "BLOB", B),
            ("ERR Invalid DEVICE", "m", "ONNX", "TAG", "BLOB", B),
            ("ERR unsupported device", "m", "ONNX", "TPU", "BLOB", B),
            ("ERR GPU requested but ONNX couldn't find CUDA", "m", "ONNX", "gpu:0", "BLOB", B),
        ]
        for want, *args in rows:
            self.assertErr(want, "AI.MODELSET", *args)
        self.assertTrue(self.err("AI.MODELSET", "m", "BLOB").lower().startswith(
            "err wrong number of arguments for 'ai.modelset' command"))
        self.assertEqual(self.r.exists("m"), 0)

    def test_modelget_modeldel(self):
        self.assertErr(NO_MODEL, "AI.MODELGET", "nosuch")
        self.assertErr(WRONGTYPE, "AI.MODELGET", "x")
        self.assertTrue(self.err("AI.MODELGET").lower().startswith("err wrong number of arguments"))
        self.assertTrue(self.err("AI.MODELGET", "lin", "META", "BLOB", "X").lower().startswith("err wrong number of arguments"))
        self.assertErr(NO_MODEL, "AI.MODELDEL", "nosuch")
        self.assertErr(WRONGTYPE, "AI.MODELDEL", "x")
        self.assertTrue(self.err("AI.MODELDEL", "lin", "x").lower().startswith("err wrong number of arguments"))
        self.assertEqual(self.r.exists("lin", "x"), 2)

    def test_modelexecute(self):
        E = "AI.MODELEXECUTE"
        rows = [
            ("ERR wrong number of arguments for 'AI.MODELEXECUTE' command", "add", "INPUTS", 2, "a", "b", "OUTPUTS"),
            (NO_MODEL, "nosuch", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "c"),
            (WRONGTYPE, "x", "INPUTS", 1, "x", "OUTPUTS", 1, "y"),
            ("ERR INPUTS not specified", "add", "TIMEOUT", 1000, "INPUTS", 2, "a", "b", "OUTPUTS", 1, "c"),
            ("ERR Invalid argument for input_count", "add", "INPUTS", "not_a_number", "a", "b", "OUTPUTS", 1, "c"),
            ("ERR Input count must be a positive integer", "add", "INPUTS", 0, "a", "b", "OUTPUTS", 1, "c"),
            ("ERR Input count must be a positive integer", "add", "INPUTS", -1, "a", "b", "OUTPUTS", 1, "c"),
            (IN_MISMATCH, "add", "INPUTS", 1, "a", "OUTPUTS", 1, "c"),
            (IN_MISMATCH, "lin", "INPUTS", 2, "x", "x", "OUTPUTS", 1, "y"),
            ("ERR OUTPUTS not specified", "add", "INPUTS", 2, "a", "b", "NOT_OUTPUTS", 1, "c"),
            ("ERR Invalid argument for output_count", "add", "INPUTS", 2, "a", "b", "OUTPUTS", "not_a_number", "c"),
            ("ERR Output count must be a positive integer", "add", "INPUTS", 2, "a", "b", "OUTPUTS", 0, "c"),
            (OUT_MISMATCH, "add", "INPUTS", 2, "a", "b", "OUTPUTS", 2, "c", "d"),
            ("ERR number of output keys to AI.MODELEXECUTE command does not match the number of given arguments",
             "add", "INPUTS", 2, "a", "b", "OUTPUTS", 1),
            ("Invalid argument: bad_arg", "add", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "c", "bad_arg"),
            ("ERR No value provided for TIMEOUT", "add", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "c", "TIMEOUT"),
            ("ERR Invalid value for TIMEOUT", "add", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "c", "TIMEOUT", -43),
            ("ERR Invalid value for TIMEOUT", "add", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "c", "TIMEOUT", 0),
            ("ERR Invalid value for TIMEOUT", "add", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "c", "TIMEOUT", "abc"),
            ("Invalid argument: bad_arg", "add", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "c", "TIMEOUT", 1000, "bad_arg"),
            (NO_TENSOR, "add", "INPUTS", 2, "a", "nosuch", "OUTPUTS", 1, "c"),
            (WRONGTYPE, "add", "INPUTS", 2, "a", "lin", "OUTPUTS", 1, "c"),
            # The model key is checked first and the input count against the
            # model before the rest of the syntax (3.7; RedisAI's tests_onnx.py).
            (NO_MODEL, "nosuch", "TIMEOUT", 1000, "INPUTS", 1, "x", "OUTPUTS", 1, "y"),
            (IN_MISMATCH, "lin", "INPUTS", 3, "a", "b", "c", "OTUPUTS", "c"),
            (OUT_MISMATCH, "lin", "INPUTS", 1, "x", "OUTPUTS", 2, "y", "z", "TIMEOUT", "bad"),
        ]
        for want, *args in rows:
            self.assertErr(want, E, *args)
        self.assertEqual(self.r.exists("c", "d", "y", "z"), 0)
        self.assertEqual(info(self.r, "add")["calls"], 0)
        # Keywords are case-insensitive.
        self.assertEqual(self.r.execute_command(E, "add", "inputs", 2, "a", "b", "outputs", 1, "c", "timeout", 1000), b"OK")

    def test_modelrun(self):
        R = "AI.MODELRUN"
        rows = [
            ("ERR wrong number of arguments for 'AI.MODELRUN' command", "lin", "INPUTS", "x", "OUTPUTS"),
            (NO_MODEL, "nosuch", "INPUTS", "x", "OUTPUTS", "y"),
            (WRONGTYPE, "x", "INPUTS", "x", "OUTPUTS", "y"),
            ("ERR Invalid value for TIMEOUT", "lin", "TIMEOUT", "abc", "INPUTS", "x", "OUTPUTS", "y"),
            ("ERR Invalid value for TIMEOUT", "lin", "TIMEOUT", 0, "INPUTS", "x", "OUTPUTS", "y"),
            ("ERR INPUTS not specified", "lin", "FOO", "x", "OUTPUTS", "y"),
            (IN_MISMATCH, "add", "INPUTS", "a", "OUTPUTS", "c"),
            (OUT_MISMATCH, "lin", "INPUTS", "x", "OUTPUTS", "y", "z"),
            (IN_MISMATCH, "lin", "INPUTS", "x", "y", "z", "w"),  # no OUTPUTS: all are inputs
            (NO_MODEL, "nosuch", "TIMEOUT", "abc", "INPUTS", "x", "OUTPUTS", "y"),
        ]
        for want, *args in rows:
            self.assertErr(want, R, *args)
        self.assertEqual(self.r.exists("y", "z", "c"), 0)

    def test_dagexecute(self):
        D = "AI.DAGEXECUTE"
        S = ["|>", "AI.TENSORSET", "t", "FLOAT", 1, "VALUES", 1]
        rows = [
            ("ERR missing arguments for 'AI.DAGEXECUTE' command", D, "ROUTING", "r", "|>"),
            ("ERR missing arguments for 'AI.DAGEXECUTE_RO' command", "AI.DAGEXECUTE_RO", "ROUTING", "r", "|>"),
            ("ERR missing arguments for 'AI.DAGEXECUTE' command", D),  # RedisAI's arity is -1
            ("ERR number of keys to LOAD into DAG does not match the number of given arguments", D,
             "LOAD", 2, "x", "|>", "AI.TENSORGET", "x", "VALUES"),
            ("ERR missing arguments after LOAD keyword in DAG command", D, "ROUTING", "r", "TIMEOUT", 5, "LOAD"),
            ("ERR invalid or negative value found in number of keys to LOAD", D, "LOAD", "abc", "x", *S),
            ("ERR invalid or negative value found in number of keys to LOAD", D, "LOAD", -1, "x", *S),
            ("ERR number of keys to LOAD into DAG does not match the number of given arguments", D,
             "ROUTING", "r", "LOAD", 9, "x", "a"),
            (NO_TENSOR, D, "LOAD", 1, "nosuch", "|>", "AI.TENSORGET", "nosuch", "VALUES"),
            (WRONGTYPE, D, "LOAD", 1, "lin", "|>", "AI.TENSORGET", "lin", "VALUES"),
            ("ERR PERSIST cannot be specified in a read-only DAG", "AI.DAGEXECUTE_RO", "PERSIST", 1, "t", *S),
            ("ERR missing arguments after PERSIST keyword in DAG command", D, "ROUTING", "r", "TIMEOUT", 5, "PERSIST"),
            ("ERR invalid or negative value found in number of keys to PERSIST", D, "PERSIST", "abc", "t", *S),
            ("ERR PERSIST keys must be unique", D, "PERSIST", 2, "t", "t", *S),
            ("ERR number of keys to PERSIST after DAG execution does not match the number of given arguments", D,
             "ROUTING", "r", "PERSIST", 9, "t", "u"),
            ("ERR PERSIST key cannot be found in DAG", D, "PERSIST", 1, "zz", *S),
            ("ERR Missing ROUTING value", D, "LOAD", 2, "x", "a", "ROUTING"),
            ("ERR No value provided for TIMEOUT", D, "LOAD", 2, "x", "a", "TIMEOUT"),
            ("ERR Invalid value for TIMEOUT", D, "ROUTING", "r", "TIMEOUT", "abc", *S),
            ("ERR Invalid DAG command. Unexpected argument:  FOO", D, "ROUTING", "r", "FOO", *S),
            # Compatibility review: 0 keys, a clause given twice (named by
            # its keyword), a count with no key after it.
            ("ERR invalid or negative value found in number of keys to LOAD", D, "LOAD", 0, *S),
            ("ERR invalid or negative value found in number of keys to PERSIST", D, "PERSIST", 0, *S),
            ("ERR Invalid DAG command. Unexpected argument:  LOAD", D, "ROUTING", "r", "LOAD", 1, "x", "LOAD", 1, "x", *S),
            ("ERR Invalid DAG command. Unexpected argument:  ROUTING", D, "ROUTING", "r", "ROUTING", "b", *S),
            ("ERR Invalid DAG command. Unexpected argument:  TIMEOUT", D, "ROUTING", "r", "TIMEOUT", 10, "TIMEOUT", 20, *S),
            ("ERR Invalid DAG command. Unexpected argument:  ROUTING", D, "ROUTING", "r", "LOAD", 1, "x", "ROUTING"),
            ("ERR missing arguments after PERSIST keyword in DAG command", D, "ROUTING", "r", "LOAD", 1, "x", "PERSIST", 1),
            ("ERR missing arguments after LOAD keyword in DAG command", D, "ROUTING", "r", "PERSIST", 1, "t", "LOAD", 1),
            ("ERR AI.DAGEXECUTE and AI.DAGEXECUTE_RO commands must contain at least one out of ROUTING, LOAD, PERSIST "
             "keywords", D, "TIMEOUT", 100, *S),
            ("ERR DAG is empty", D, "ROUTING", "r", "LOAD", 1, "x"),
            ("ERR Invalid DAG command. Unexpected argument:  |>", D, "ROUTING", "r", *S, "|>"),
            ("Deprecated AI.MODELRUN cannot be used in AI.DAGEXECUTE command", D, "ROUTING", "r",
             "|>", "AI.MODELRUN", "lin", "INPUTS", "x", "OUTPUTS", "y"),
            ("Deprecated AI.SCRIPTRUN cannot be used in AI.DAGEXECUTE command", D, "ROUTING", "r",
             "|>", "AI.SCRIPTRUN", "s", "f", "INPUTS", "x", "OUTPUTS", "y"),
            ("Unsupported command within DAG", D, "ROUTING", "r", "|>", "SET", "k", "v"),
            ("ERR TIMEOUT not allowed within a DAG command", D, "LOAD", 1, "x",
             "|>", "AI.MODELEXECUTE", "lin", "INPUTS", 1, "x", "OUTPUTS", 1, "y", "TIMEOUT", 100),
            ("ERR AI.SCRIPTEXECUTE command cannot be specified in a read-only DAG", "AI.DAGEXECUTE_RO",
             "ROUTING", "r", "|>", "AI.SCRIPTEXECUTE", "s", "f", "INPUTS", 1, "x"),
            ("wrong number of arguments for 'AI.TENSORSET' command", D, "ROUTING", "r", "|>", "AI.TENSORSET", "t"),
            ("wrong number of arguments for 'AI.TENSORSET' command", D, "ROUTING", "r", "|>", "AI.TENSORSET", "t", "FLOAT"),
            ("ERR invalid data type", D, "ROUTING", "r", "|>", "AI.TENSORSET", "t", "FLOAT32", 1),
            (NO_MODEL, D, "LOAD", 1, "x", "|>", "AI.MODELEXECUTE", "nosuch", "INPUTS", 1, "x", "OUTPUTS", 1, "y"),
            (IN_MISMATCH, D, "LOAD", 1, "x", "|>", "AI.MODELEXECUTE", "add", "INPUTS", 1, "x", "OUTPUTS", 1, "y"),
            ("ERR INPUT key cannot be found in DAG", D, "ROUTING", "lin",
             "|>", "AI.MODELEXECUTE", "lin", "INPUTS", 1, "x", "OUTPUTS", 1, "y"),
            ("ERR INPUT key cannot be found in DAG", D, "ROUTING", "r", "|>", "AI.TENSORGET", "x", "VALUES"),
            # A model op's model and counts are checked before the syntax
            # after its key, and before the DAG's names (REDISAI.md 3.9:
            # "model key resolved at parse time"; first failure wins).
            (NO_MODEL, D, "LOAD", 1, "x", "|>", "AI.MODELEXECUTE", "nosuch", "INPUTS", 1, "x", "FOO", 1, "y"),
            (NO_MODEL, D, "LOAD", 1, "x", "|>", "AI.MODELEXECUTE", "nosuch", "INPUTS", 1, "x", "OUTPUTS", 1, "y",
             "TIMEOUT", 5),
            (IN_MISMATCH, D, "LOAD", 1, "x", "|>", "AI.MODELEXECUTE", "lin", "INPUTS", 2, "x", "OUTPUTS", 1, "y"),
            (OUT_MISMATCH, D, "LOAD", 1, "x", "|>", "AI.TENSORGET", "q", "META",
             "|>", "AI.MODELEXECUTE", "lin", "INPUTS", 1, "x", "OUTPUTS", 2, "y", "z"),
            (NO_MODEL, D, "LOAD", 1, "x", "|>", "AI.MODELEXECUTE", "nosuch", "INPUTS", 1, "x", "OUTPUTS", 1, "y",
             "|>", "AI.TENSORSET", "t", "FLOAT32", 1),
            # The LOADed keys are read before a syntax error after them.
            (NO_TENSOR, D, "LOAD", 1, "nosuch", "TIMEOUT", "abc", *S),
        ]
        for want, *args in rows:
            self.assertErr(want, *args)
        self.assertEqual(self.r.exists("t", "u", "y", "zz"), 0)

    def test_wrongtype(self):
        before = tget(self.r, "x").copy()
        # MODELSTORE onto a tensor key: WRONGTYPE, tensor untouched (RedisAI
        # 1.2.7 crashes here, REDISAI.md 10). EnclaveAI has no string type.
        self.assertErr(WRONGTYPE, "AI.MODELSTORE", "x", "ONNX", "CPU", "BLOB", self.blob)
        self.assertErr(WRONGTYPE, "AI.MODELSET", "x", "ONNX", "CPU", "BLOB", self.blob)
        self.assertErr(WRONGTYPE, "AI.MODELSTORE", "x", "ONNX", "CPU", "BLOB", *split_n(self.blob, 3))
        np.testing.assert_array_equal(tget(self.r, "x"), before)
        self.assertEqual(self.r.type("x"), b"AI_TENSOR")
        # TENSORSET onto a model key.
        self.assertErr(WRONGTYPE, "AI.TENSORSET", "lin", "FLOAT", 1, "VALUES", 1)
        self.assertErr(WRONGTYPE, "AI.TENSORGET", "lin")
        self.assertLinearRuns("lin")
        # MODELEXECUTE whose output key holds a model: one WRONGTYPE error,
        # nothing written (2.3; not RedisAI's OK + error).
        with self.raw() as c:
            rep = c.cmd("AI.MODELEXECUTE", "lin", "INPUTS", 1, "x", "OUTPUTS", 1, "add")
            self.assertIsInstance(rep, ServerError)
            self.assertEqual(rep.text, WRONGTYPE)
            self.assertEqual(c.cmd("PING"), "PONG")  # no second reply queued
        self.assertEqual(self.r.type("add"), b"AI__MODEL")
        self.assertEqual(modelinfo(self.r, "add")["inputs"][0]["name"], b"a")
        self.assertEqual(info(self.r, "lin")["calls"], 1)  # assertLinearRuns only: checked before running
        tset(self.r, "a", np.array([5], np.int32))
        self.assertErr(WRONGTYPE, "AI.MODELEXECUTE", "add", "INPUTS", 2, "a", "a", "OUTPUTS", 1, "lin")
        self.assertLinearRuns("lin")
        self.assertEqual(info(self.r, "add")["calls"], 0)

    def test_multi_refuses_execute(self):
        p = self.r.pipeline(transaction=True)
        p.execute_command("AI.MODELEXECUTE", "lin", "INPUTS", 1, "x", "OUTPUTS", 1, "y")
        p.execute_command("AI.TENSORSET", "q", "FLOAT", 1, "VALUES", 1)
        p.execute_command("AI.MODELRUN", "lin", "INPUTS", "x", "OUTPUTS", "y")
        p.execute_command("AI.DAGEXECUTE", "LOAD", 1, "x", "|>", "AI.TENSORGET", "x", "VALUES")
        p.execute_command("AI.MODELSTORE", "inmulti", "ONNX", "CPU", "BLOB", self.blob)
        res = p.execute(raise_on_error=False)
        want = "Cannot run RedisAI command within a transaction or a LUA script"
        for i in (0, 2, 3):
            self.assertIsInstance(res[i], redis.ResponseError, res)
            self.assertEqual(str(res[i]), want)
        self.assertEqual(res[1], b"OK")
        self.assertEqual(res[4], b"OK")  # non-blocking AI commands are allowed
        self.assertEqual(self.r.exists("y"), 0)
        self.assertLinearRuns("inmulti")


class RuntimeErrorTest(ModelCase):
    """ONNX Runtime errors (with our ERR prefix), TIMEOUT, the kill switch."""

    def setUp(self):
        super().setUp()
        store(self.r, "lin", "linear.onnx")
        self.r.execute_command("AI.TENSORSET", "y", "FLOAT", 1, "VALUES", 42)

    def assertRunFails(self, want, x):
        tset(self.r, "xin", x)
        self.assertErr(want, "AI.MODELEXECUTE", "lin", "INPUTS", 1, "xin", "OUTPUTS", 1, "y")
        self.assertEqual(self.r.execute_command("AI.TENSORGET", "y", "VALUES"), [b"42"])  # not written
        self.assertEqual(self.r.exists("xin"), 1)

    def test_wrong_dims(self):
        self.assertRunFails("ERR Got invalid dimensions for input: x for the following indices index: 1 Got: 5 "
                            "Expected: 4 Please fix either the inputs/outputs or the model.", np.ones((2, 5), np.float32))

    def test_wrong_rank(self):
        self.assertRunFails("ERR Invalid rank for input: x Got: 1 Expected: 2 Please fix either the inputs/outputs "
                            "or the model.", np.ones(4, np.float32))

    def test_wrong_dtype(self):
        self.assertRunFails("ERR Unexpected input data type. Actual: (tensor(int32)) , expected: (tensor(float))",
                            np.ones((2, 4), np.int32))
        d = info(self.r, "lin")
        self.assertEqual((d["calls"], d["errors"]), (1, 1))

    def test_output_type_not_stored_says_why(self):
        # A FLOAT16 output cannot become a tensor: the client reads why (it
        # read "internal error", the reason only in the server's log).
        with open(os.path.join(harness.REPO, "modelstore", "testdata", "half_output.onnx"), "rb") as f:
            self.assertEqual(self.r.execute_command("AI.MODELSTORE", "half", "ONNX", "CPU", "BLOB", f.read()), b"OK")
        tset(self.r, "hx", np.ones(3, np.float32))
        want = "ERR unsupported tensor type: output 0 (h) is a tensor(float16), which cannot be stored"
        self.assertEqual(self.err("AI.MODELEXECUTE", "half", "INPUTS", 1, "hx", "OUTPUTS", 1, "hy"), want)
        with self.raw() as c:  # a DAG answers an array, its failed op's error in it
            (rep,) = c.cmd("AI.DAGEXECUTE", "LOAD", 1, "hx", "|>", "AI.MODELEXECUTE", "half",
                           "INPUTS", 1, "hx", "OUTPUTS", 1, "hy")
        self.assertEqual(str(rep), want)
        self.assertEqual(self.r.exists("hy"), 0)

    def test_string_input_bounded_by_what_it_costs_the_engine(self):
        # A STRING element costs an engine about 128 bytes beyond its own
        # (Go, C and ONNX Runtime strings): a 40-byte AI.TENSORSET of 20M
        # empty strings took an engine worker to 2 GB when it ran (review).
        # Past what a run may take (proto-max-bulk-len), it is refused
        # before anything is built.
        self.assertEqual(store(self.r, "sid", "string_identity.onnx"), b"OK")
        self.r.execute_command("AI.TENSORSET", "s", "STRING", 5_000_000)
        e = self.err("AI.MODELEXECUTE", "sid", "INPUTS", 1, "s", "OUTPUTS", 1, "so")
        self.assertTrue(e.startswith("ERR unsupported tensor shape: input 0 holds 5000000 STRING elements, "
                                     "about 640000000 bytes in the engine, past the 536870912 bytes"), e)
        self.assertEqual(self.r.exists("so"), 0)
        self.r.execute_command("AI.TENSORSET", "s2", "STRING", 2, "VALUES", "a", "b")
        self.assertEqual(execute(self.r, "sid", ["s2"], ["so"]), b"OK")
        self.assertEqual(self.r.execute_command("AI.TENSORGET", "so", "VALUES"), [b"a", b"b"])

    def test_timeout_while_waiting_for_batch(self):
        # 5.2: a request waiting for MINBATCHSIZE with a small TIMEOUT.
        store(self.r, "bm", "linear.onnx", "BATCHSIZE", 4, "MINBATCHSIZE", 4)
        tset(self.r, "x", np.ones((1, 4), np.float32))
        t0 = time.monotonic()
        self.assertEqual(execute(self.r, "bm", ["x"], ["out"], "TIMEOUT", 100), b"TIMEDOUT")
        self.assertLess(time.monotonic() - t0, 3)
        self.assertEqual(self.r.exists("out"), 0)
        d = info(self.r, "bm")
        self.assertEqual((d["calls"], d["errors"], d["samples"]), (0, 0, 0))
        with self.raw() as c:
            self.assertEqual(c.cmd_raw("AI.MODELEXECUTE", "bm", "INPUTS", 1, "x", "OUTPUTS", 1, "out",
                                       "TIMEOUT", 50), b"+TIMEDOUT\r\n")
        # MODELRUN's TIMEOUT too; a batch-sized request runs at once.
        self.assertEqual(self.r.execute_command("AI.MODELRUN", "bm", "TIMEOUT", 50, "INPUTS", "x", "OUTPUTS", "out"),
                         b"TIMEDOUT")
        tset(self.r, "x4", np.ones((4, 4), np.float32))
        self.assertEqual(execute(self.r, "bm", ["x4"], ["out"], "TIMEOUT", 1000), b"OK")
        np.testing.assert_allclose(tget(self.r, "out"), linear_np(np.ones((4, 4), np.float32)), rtol=1e-6)

    def test_model_execution_timeout(self):
        self.aiconfig("MODEL_EXECUTION_TIMEOUT", 1000)
        store(self.r, "slow", "slow.onnx")
        tset(self.r, "sx", np.ones((1, 1), np.float32))
        t0 = time.monotonic()
        e = self.err("AI.MODELEXECUTE", "slow", "INPUTS", 1, "sx", "OUTPUTS", 1, "sy")
        elapsed = time.monotonic() - t0
        self.assertTrue(e.startswith("ERR "), e)
        self.assertIn("terminate", e)
        self.assertGreater(elapsed, 0.9)
        self.assertLess(elapsed, 4.0)
        self.assertEqual(self.r.exists("sy"), 0)
        d = info(self.r, "slow")
        self.assertEqual((d["calls"], d["errors"]), (1, 1))
        self.assertTrue(self.r.ping())
        self.assertLinearRuns("lin")

    def test_ping_fast_during_slow_run(self):
        # The smallest kill-switch timeout: slow.onnx runs for seconds even on
        # an idle machine, so the run is terminated after ~1 s.
        self.aiconfig("MODEL_EXECUTION_TIMEOUT", 1000)
        self.aiconfig("THREADS_PER_QUEUE", 1)
        store(self.r, "slow", "slow.onnx")
        tset(self.r, "sx", np.ones((1, 1), np.float32))
        result = {}

        def run():
            c = self.srv.client()
            try:
                execute(c, "slow", ["sx"], ["sy"])
                result["reply"] = "OK"
            except redis.ResponseError as e:
                result["reply"] = str(e)
            finally:
                c.close()

        t = threading.Thread(target=run)
        t0 = time.monotonic()
        t.start()
        time.sleep(0.3)  # let the run start (its stats appear only at the end)
        # One run at a time (THREADS_PER_QUEUE 1, RedisAI's default, 5.1;
        # ours is one worker per CPU): a request behind the slow run times
        # out in the queue.
        tset(self.r, "lx", np.ones((1, 4), np.float32))
        self.assertEqual(execute(self.r, "lin", ["lx"], ["ly"], "TIMEOUT", 100), b"TIMEDOUT")
        self.assertEqual(self.r.exists("ly"), 0)
        c = self.raw()
        latencies = []
        while t.is_alive() and time.monotonic() - t0 < 2.2:
            s = time.monotonic()
            self.assertEqual(c.cmd("PING"), "PONG")
            latencies.append(time.monotonic() - s)
            time.sleep(0.02)
        t.join(10)
        self.assertFalse(t.is_alive())
        self.assertGreater(len(latencies), 10)
        # A PING that waited for the run would take seconds. The test
        # machine is shared (load averages of 10+ on 2 cores seen), so a few
        # samples may be descheduled: 90% must be under 100 ms, all under 1 s.
        shown = ["%.3f" % v for v in latencies]
        latencies.sort()
        self.assertLess(latencies[int(len(latencies) * 0.9) - 1], 0.1, "PING latencies %s" % shown)
        self.assertLess(latencies[-1], 1.0, "PING latencies %s" % shown)
        self.assertIn("terminate", result["reply"])  # slow.onnx needs > 1 s


class DAGTest(ModelCase):
    """AI.DAGEXECUTE / _RO (3.9)."""

    def setUp(self):
        super().setUp()
        store(self.r, "lin", "linear.onnx")
        store(self.r, "add", "add_int.onnx")

    def test_routing_only(self):
        rep = self.r.execute_command(
            "AI.DAGEXECUTE", "ROUTING", "lin",
            "|>", "AI.TENSORSET", "t1", "FLOAT", 1, 4, "VALUES", 1, 1, 1, 1,
            "|>", "AI.MODELEXECUTE", "lin", "INPUTS", 1, "t1", "OUTPUTS", 1, "t2",
            "|>", "AI.TENSORGET", "t2", "VALUES")
        self.assertEqual(rep[:2], [b"OK", b"OK"])
        np.testing.assert_allclose([float(v) for v in rep[2]], linear_np(np.ones((1, 4)))[0], rtol=1e-6)
        # 1.1: float VALUES are bulk strings that round-trip to the float32
        # (%.17g "2.7999999523162842" or shortest "2.799999952316284").
        for v in rep[2]:
            self.assertIsInstance(v, bytes)
            self.assertEqual(float(np.float32(float(v))), float(v), v)
        self.assertEqual(self.r.exists("t1", "t2"), 0)  # DAG-local names
        self.assertEqual(info(self.r, "lin")["calls"], 1)
        # META BLOB inside a DAG.
        rep = self.r.execute_command("AI.DAGEXECUTE_RO", "ROUTING", "lin",
                                     "|>", "AI.TENSORSET", "t", "INT32", 2, "VALUES", 3, 4,
                                     "|>", "AI.TENSORGET", "t", "META", "BLOB")
        self.assertEqual(rep, [b"OK", [b"dtype", b"INT32", b"shape", [2], b"blob", np.array([3, 4], np.int32).tobytes()]])

    def test_load_persist_chain(self):
        a = np.array([1, 2, 3], np.int32)
        b = np.array([10, 20, 30], np.int32)
        tset(self.r, "a", a)
        tset(self.r, "b", b)
        rep = self.r.execute_command(
            "AI.DAGEXECUTE", "LOAD", 2, "a", "b", "PERSIST", 2, "d", "b", "TIMEOUT", 5000,
            "|>", "AI.MODELEXECUTE", "add", "INPUTS", 2, "a", "b", "OUTPUTS", 1, "c",
            "|>", "AI.MODELEXECUTE", "add", "INPUTS", 2, "c", "c", "OUTPUTS", 1, "d",
            "|>", "AI.TENSORGET", "c", "VALUES",
            "|>", "AI.TENSORSET", "b", "INT32", 1, "VALUES", 7)
        self.assertEqual(rep, [b"OK", b"OK", [11, 22, 33], b"OK"])
        np.testing.assert_array_equal(tget(self.r, "d"), 2 * (a + b))
        np.testing.assert_array_equal(tget(self.r, "b"), [7])  # last write wins
        self.assertEqual(self.r.exists("c"), 0)
        x, y = reference("linear")
        tset(self.r, "x", x)
        self.assertEqual(self.r.execute_command("AI.DAGEXECUTE", "LOAD", 1, "x", "PERSIST", 1, "y",
                                                "|>", "AI.MODELEXECUTE", "lin", "INPUTS", 1, "x", "OUTPUTS", 1, "y"),
                         [b"OK"])
        np.testing.assert_allclose(tget(self.r, "y"), y, rtol=1e-6, atol=1e-6)
        # _RO reads LOADed keys.
        rep = self.r.execute_command("AI.DAGEXECUTE_RO", "LOAD", 1, "x",
                                     "|>", "AI.MODELEXECUTE", "lin", "INPUTS", 1, "x", "OUTPUTS", 1, "o",
                                     "|>", "AI.TENSORGET", "o", "BLOB")
        self.assertEqual(rep[0], b"OK")
        np.testing.assert_allclose(np.frombuffer(rep[1], np.float32).reshape(3, 3), y, rtol=1e-6, atol=1e-6)
        self.assertEqual(self.r.exists("o"), 0)

    def test_dagrun_deprecated_forms(self):
        # AI.DAGRUN(_RO), deprecated but accepted by RedisAI 1.2.7
        # (REDISAI.md 3.10): LOAD/PERSIST/ROUTING optional, AI.MODELRUN ops.
        x, y = reference("linear")
        tset(self.r, "x", x)
        self.assertEqual(self.r.execute_command("AI.DAGRUN", "LOAD", 1, "x", "PERSIST", 1, "y",
                                                "|>", "AI.MODELRUN", "lin", "INPUTS", "x", "OUTPUTS", "y"),
                         [b"OK"])
        np.testing.assert_allclose(tget(self.r, "y"), y, rtol=1e-6, atol=1e-6)
        rep = self.r.execute_command("AI.DAGRUN_RO", "LOAD", 1, "x",
                                     "|>", "AI.MODELRUN", "lin", "INPUTS", "x", "OUTPUTS", "o",
                                     "|>", "AI.TENSORGET", "o", "BLOB")
        self.assertEqual(rep[0], b"OK")
        np.testing.assert_allclose(np.frombuffer(rep[1], np.float32).reshape(3, 3), y, rtol=1e-6, atol=1e-6)
        self.assertEqual(self.r.execute_command("AI.DAGRUN", "|>", "AI.TENSORSET", "t", "INT32", 2, "VALUES", 4, 5,
                                                "|>", "AI.TENSORGET", "t", "VALUES"), [b"OK", [4, 5]])
        self.assertEqual(self.r.exists("o", "t"), 0)
        D, S = "AI.DAGRUN", ["|>", "AI.TENSORSET", "t", "FLOAT", 1, "VALUES", 1]
        rows = [
            ("ERR wrong number of arguments for 'AI.DAGRUN' command", D, "|>"),
            ("ERR wrong number of arguments for 'AI.DAGRUN_RO' command", "AI.DAGRUN_RO", "|>"),
            ("ERR PERSIST cannot be specified in a read-only DAG", "AI.DAGRUN_RO", "PERSIST", 1, "t", *S),
            ("AI.MODELEXECUTE cannot be used in a deprecated AI.DAGRUN command", D, "LOAD", 1, "x",
             "|>", "AI.MODELEXECUTE", "lin", "INPUTS", 1, "x", "OUTPUTS", 1, "y"),
            ("ERR TIMEOUT not allowed within a DAG command", D, "LOAD", 1, "x",
             "|>", "AI.MODELRUN", "lin", "TIMEOUT", 5, "INPUTS", "x", "OUTPUTS", "y"),
            ("ERR INPUTS not specified", D, "LOAD", 1, "x", "|>", "AI.MODELRUN", "lin", "FOO", "x", "OUTPUTS", "y"),
            (NO_MODEL, D, "LOAD", 1, "x", "|>", "AI.MODELRUN", "nosuch", "FOO", "x", "OUTPUTS", "y"),
            (NO_MODEL, D, "LOAD", 1, "x", "|>", "AI.MODELRUN", "nosuch", "TIMEOUT", 5, "INPUTS", "x", "OUTPUTS", "y"),
            (IN_MISMATCH, D, "LOAD", 1, "x", "|>", "AI.MODELRUN", "lin", "INPUTS", "x", "x", "OUTPUTS", "y"),
            (NO_MODEL, D, "LOAD", 1, "x", "|>", "AI.MODELRUN", "nosuch", "INPUTS", "x", "OUTPUTS", "y"),
            ("Unsupported command within DAG", D, "|>", "SET", "k", "v"),
        ]
        for want, *args in rows:
            self.assertErr(want, *args)
        self.assertEqual(self.r.exists("t", "y2"), 0)

    def test_op_error_then_na_and_nothing_persisted(self):
        self.r.execute_command("AI.TENSORSET", "keep", "FLOAT", 1, "VALUES", 5)
        rep = self.r.execute_command(
            "AI.DAGEXECUTE", "PERSIST", 2, "o", "keep",
            "|>", "AI.TENSORSET", "keep", "FLOAT", 1, "VALUES", 6,
            "|>", "AI.TENSORSET", "t", "FLOAT", 1, 5, "VALUES", 1, 2, 3, 4, 5,
            "|>", "AI.MODELEXECUTE", "lin", "INPUTS", 1, "t", "OUTPUTS", 1, "o",
            "|>", "AI.TENSORGET", "o", "VALUES",
            "|>", "AI.MODELEXECUTE", "lin", "INPUTS", 1, "o", "OUTPUTS", 1, "o2")
        self.assertEqual(len(rep), 5)
        self.assertEqual(rep[:2], [b"OK", b"OK"])
        self.assertIsInstance(rep[2], redis.ResponseError)
        self.assertTrue(str(rep[2]).startswith("Got invalid dimensions for input: x"), str(rep[2]))
        self.assertEqual(rep[3:], [b"NA", b"NA"])
        self.assertEqual(self.r.exists("o", "o2", "t"), 0)
        self.assertEqual(self.r.execute_command("AI.TENSORGET", "keep", "VALUES"), [b"5"])
        d = info(self.r, "lin")
        self.assertEqual((d["calls"], d["errors"]), (1, 1))
        # The raw reply: an error element inside the array, then +NA.
        with self.raw() as c:
            raw = c.cmd_raw("AI.DAGEXECUTE", "ROUTING", "lin",
                            "|>", "AI.TENSORSET", "t", "FLOAT", 2, 5,
                            "|>", "AI.MODELEXECUTE", "lin", "INPUTS", 1, "t", "OUTPUTS", 1, "o",
                            "|>", "AI.TENSORGET", "o", "VALUES")
        self.assertTrue(raw.startswith(b"*3\r\n+OK\r\n-ERR Got invalid dimensions"), raw)
        self.assertTrue(raw.endswith(b"\r\n+NA\r\n"), raw)

    def test_after_an_op_error_tensors_are_still_set_and_read(self):
        """As RedisAI's DAG reply (dag.c, RedisAI_DagRun_Reply): after a
        failed op, a TENSORSET answers OK and a TENSORGET the tensor its
        name holds (LOADed, set, or made before the failure); model ops
        are not run (NA), and their outputs, like the failed op's, are NA
        (compatibility review: every op after the failure answered NA)."""
        tset(self.r, "fx", np.ones((1, 4), np.float32))
        self.r.execute_command("AI.TENSORSET", "v2in", "FLOAT", 1, 3, "VALUES", 1, 2, 3)
        rep = self.r.execute_command(
            "AI.DAGEXECUTE_RO", "LOAD", 2, "fx", "v2in",
            "|>", "AI.MODELEXECUTE", "lin", "INPUTS", 1, "fx", "OUTPUTS", 1, "ok1",
            "|>", "AI.TENSORSET", "t", "FLOAT", 2, "VALUES", 7, 8,
            "|>", "AI.MODELEXECUTE", "lin", "INPUTS", 1, "v2in", "OUTPUTS", 1, "fx",
            "|>", "AI.TENSORSET", "u", "INT8", 1, "VALUES", 1,
            "|>", "AI.TENSORGET", "t", "VALUES",
            "|>", "AI.TENSORGET", "v2in", "META",
            "|>", "AI.TENSORGET", "ok1", "META",
            "|>", "AI.TENSORGET", "fx", "META",
            "|>", "AI.MODELEXECUTE", "lin", "INPUTS", 1, "ok1", "OUTPUTS", 1, "ok2",
            "|>", "AI.TENSORGET", "ok2", "META")
        self.assertEqual(len(rep), 10)
        self.assertEqual(rep[:2], [b"OK", b"OK"])
        self.assertIsInstance(rep[2], redis.ResponseError)
        self.assertEqual(rep[3], b"OK")
        self.assertEqual(rep[4], [b"7", b"8"])
        self.assertEqual(rep[5], [b"dtype", b"FLOAT", b"shape", [1, 3]])
        self.assertEqual(rep[6], [b"dtype", b"FLOAT", b"shape", [1, 3]])
        self.assertEqual(rep[7:], [b"NA", b"NA", b"NA"])  # the failed op's output, a model op, its output

    def test_persist_wrongtype(self):
        tset(self.r, "x", np.ones((1, 4), np.float32))
        rep = self.r.execute_command("AI.DAGEXECUTE", "LOAD", 1, "x", "PERSIST", 1, "add",
                                     "|>", "AI.MODELEXECUTE", "lin", "INPUTS", 1, "x", "OUTPUTS", 1, "add")
        self.assertEqual(rep[0], b"OK")
        self.assertEqual(len(rep), 2)
        self.assertIsInstance(rep[1], redis.ResponseError)
        self.assertEqual(str(rep[1]), WRONGTYPE)
        self.assertEqual(self.r.type("add"), b"AI__MODEL")

    def test_dag_timeout(self):
        store(self.r, "bm", "linear.onnx", "BATCHSIZE", 4, "MINBATCHSIZE", 4)
        t0 = time.monotonic()
        rep = self.r.execute_command("AI.DAGEXECUTE", "ROUTING", "bm", "PERSIST", 1, "o", "TIMEOUT", 100,
                                     "|>", "AI.TENSORSET", "t", "FLOAT", 1, 4, "VALUES", 1, 2, 3, 4,
                                     "|>", "AI.MODELEXECUTE", "bm", "INPUTS", 1, "t", "OUTPUTS", 1, "o")
        self.assertEqual(rep, b"TIMEDOUT")
        self.assertLess(time.monotonic() - t0, 3)
        self.assertEqual(self.r.exists("o"), 0)

    def test_huge_timeout_is_no_timeout(self):
        # A TIMEOUT whose nanoseconds pass 2^63 waits as long as it can:
        # they wrapped around, and this one (2.4 billion years) was 64 ns,
        # so the run answered TIMEDOUT at once.
        huge = 76480200929599801
        rep = self.r.execute_command("AI.DAGEXECUTE", "ROUTING", "lin", "TIMEOUT", huge,
                                     "|>", "AI.TENSORSET", "t", "FLOAT", 1, 4, "VALUES", 1, 2, 3, 4,
                                     "|>", "AI.MODELEXECUTE", "lin", "INPUTS", 1, "t", "OUTPUTS", 1, "o",
                                     "|>", "AI.TENSORGET", "o", "META")
        self.assertEqual(rep[:2], [b"OK", b"OK"])
        tset(self.r, "hx", np.ones((1, 4), np.float32))
        self.assertEqual(self.r.execute_command("AI.MODELEXECUTE", "lin", "INPUTS", 1, "hx", "OUTPUTS", 1, "hy",
                                                "TIMEOUT", huge), b"OK")
        self.assertEqual(self.r.exists("hy"), 1)

    def test_ro_refuses_persist(self):
        self.assertErr("ERR PERSIST cannot be specified in a read-only DAG", "AI.DAGEXECUTE_RO", "ROUTING", "lin",
                       "PERSIST", 1, "t", "|>", "AI.TENSORSET", "t", "FLOAT", 1, "VALUES", 1)
        self.assertEqual(self.r.exists("t"), 0)


class AutoBatchingTest(ModelCase):
    """5.3: concurrent requests run as one batch."""

    def test_four_clients_batched_together(self):
        store(self.r, "bm", "linear.onnx", "BATCHSIZE", 4, "MINBATCHSIZE", 4, "MINBATCHTIMEOUT", 5000)
        rng = np.random.default_rng(3)
        xs = [rng.standard_normal((1, 4)).astype(np.float32) * (i + 1) for i in range(4)]
        clients = [self.srv.client() for _ in range(4)]
        for i, c in enumerate(clients):
            tset(c, "bx%d" % i, xs[i])
        barrier = threading.Barrier(4)
        results, errors = {}, []

        def worker(i):
            try:
                barrier.wait(5)
                t0 = time.monotonic()
                rep = execute(clients[i], "bm", ["bx%d" % i], ["by%d" % i])
                results[i] = (rep, time.monotonic() - t0)
            except Exception as e:  # reported below
                errors.append(repr(e))

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join(15)
        total = time.monotonic() - t0
        self.assertEqual(errors, [])
        self.assertEqual(sorted(results), [0, 1, 2, 3])
        for i in range(4):
            self.assertEqual(results[i][0], b"OK")
            got = tget(self.r, "by%d" % i)
            self.assertEqual(got.shape, (1, 3))
            np.testing.assert_allclose(got, linear_np(xs[i]), rtol=1e-5, atol=1e-5)
        # Without a full batch each would wait the 5 s MINBATCHTIMEOUT.
        self.assertLess(total, 2.5, results)
        d = info(self.r, "bm")
        self.assertEqual((d["calls"], d["samples"], d["errors"]), (4, 4, 0))
        for c in clients:
            c.close()

    def run_together(self, jobs):
        """Runs jobs (functions of a client) at once, each on its own
        client; returns their results and the wall time of the slowest."""
        clients = [self.srv.client() for _ in jobs]
        barrier = threading.Barrier(len(jobs))
        results, errors = [None] * len(jobs), []

        def worker(i):
            try:
                barrier.wait(5)
                results[i] = jobs[i](clients[i])
            except Exception as e:  # reported below
                errors.append(repr(e))

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(jobs))]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join(15)
        elapsed = time.monotonic() - t0
        for c in clients:
            c.close()
        self.assertEqual(errors, [])
        return results, elapsed

    def test_uneven_requests_split_back(self):
        # Batches of 1 and 3 rows make the MINBATCHSIZE of 4 together; the
        # 4 output rows go back 1 and 3.
        store(self.r, "bm", "linear.onnx", "BATCHSIZE", 4, "MINBATCHSIZE", 4, "MINBATCHTIMEOUT", 5000)
        xs = [np.array([[1, 2, 3, 4]], np.float32), np.arange(12, dtype=np.float32).reshape(3, 4) - 5]

        def job(i):
            def run(c):
                tset(c, "ux%d" % i, xs[i])
                self.assertEqual(execute(c, "bm", ["ux%d" % i], ["uy%d" % i]), b"OK")
                return tget(c, "uy%d" % i)
            return run

        outs, elapsed = self.run_together([job(0), job(1)])
        self.assertLess(elapsed, 2.5)
        for i in range(2):
            self.assertEqual(outs[i].shape, (xs[i].shape[0], 3))
            np.testing.assert_allclose(outs[i], linear_np(xs[i]), rtol=1e-5, atol=1e-5)
        d = info(self.r, "bm")
        self.assertEqual((d["calls"], d["samples"]), (2, 4))

    def test_string_requests_batched(self):
        store(self.r, "sb", "string_identity.onnx", "BATCHSIZE", 3, "MINBATCHSIZE", 3, "MINBATCHTIMEOUT", 5000)
        ins = [[b"a"], [b"", b"bb"]]  # 1 + 2 elements = MINBATCHSIZE 3

        def job(i):
            def run(c):
                c.execute_command("AI.TENSORSET", "sx%d" % i, "STRING", len(ins[i]), "BLOB",
                                  b"".join(v + b"\0" for v in ins[i]))
                self.assertEqual(execute(c, "sb", ["sx%d" % i], ["sy%d" % i]), b"OK")
                return c.execute_command("AI.TENSORGET", "sy%d" % i, "VALUES")
            return run

        outs, elapsed = self.run_together([job(0), job(1)])
        self.assertLess(elapsed, 2.5)
        self.assertEqual(outs, ins)
        self.assertEqual(info(self.r, "sb")["samples"], 3)

    def test_lone_request_waits_minbatchtimeout(self):
        store(self.r, "bm", "linear.onnx", "BATCHSIZE", 4, "MINBATCHSIZE", 3, "MINBATCHTIMEOUT", 200)
        x = np.array([[1, 2, 3, 4]], np.float32)
        tset(self.r, "x", x)
        t0 = time.monotonic()
        self.assertEqual(execute(self.r, "bm", ["x"], ["y"]), b"OK")
        elapsed = time.monotonic() - t0
        self.assertGreaterEqual(elapsed, 0.19)
        self.assertLess(elapsed, 1.0)
        np.testing.assert_allclose(tget(self.r, "y"), linear_np(x), rtol=1e-6)
        # A request of at least BATCHSIZE rows runs at once, alone (5.3.1).
        x4 = np.arange(16, dtype=np.float32).reshape(4, 4)
        tset(self.r, "x4", x4)
        t0 = time.monotonic()
        self.assertEqual(execute(self.r, "bm", ["x4"], ["y4"]), b"OK")
        self.assertLess(time.monotonic() - t0, 0.15)
        np.testing.assert_allclose(tget(self.r, "y4"), linear_np(x4), rtol=1e-6)
        d = info(self.r, "bm")
        self.assertEqual((d["calls"], d["samples"]), (2, 5))

    def send_execute(self, c, model, x, y):
        c.send(c.encode("AI.MODELEXECUTE", model, "INPUTS", 1, x, "OUTPUTS", 1, y))

    def test_batched_rows_equal_rows_run_alone(self):
        """Requests from several clients merge into one run (MINBATCHSIZE 6
        with a 60 s timeout: only a merged run can answer within the clients'
        20 s) and each gets the bytes the model gives its rows alone."""
        store(self.r, "lin", "linear.onnx", "BATCHSIZE", 8, "MINBATCHSIZE", 6, "MINBATCHTIMEOUT", 60000)
        store(self.r, "plain", "linear.onnx")
        rng = np.random.default_rng(3)
        xs = [rng.standard_normal((n, 4)).astype(np.float32) for n in (1, 2, 3)]
        conns = [self.raw(timeout=20) for _ in xs]
        for i, (c, x) in enumerate(zip(conns, xs)):
            self.assertEqual(c.cmd("AI.TENSORSET", "x%d" % i, "FLOAT", *x.shape, "BLOB", x.tobytes()), "OK")
        for i, c in enumerate(conns):
            self.send_execute(c, "lin", "x%d" % i, "y%d" % i)
        for c in conns:
            self.assertEqual(c.read_reply(), "OK")
        d = info(self.r, "lin")
        self.assertEqual((d["calls"], d["samples"], d["errors"]), (3, 6, 0))
        for i, x in enumerate(xs):
            got = self.r.execute_command("AI.TENSORGET", "y%d" % i, "BLOB")
            self.assertEqual(execute(self.r, "plain", ["x%d" % i], ["p%d" % i]), b"OK")
            # The same bytes as the model run on this client's rows alone.
            self.assertEqual(got, self.r.execute_command("AI.TENSORGET", "p%d" % i, "BLOB"), i)
            np.testing.assert_allclose(tget(self.r, "y%d" % i), linear_np(x), rtol=1e-5, atol=1e-5)

    def test_mlp_outputs_same_with_and_without_batching(self):
        store(self.r, "mb", "mlp.onnx", "BATCHSIZE", 4, "MINBATCHSIZE", 4, "MINBATCHTIMEOUT", 60000)
        store(self.r, "m", "mlp.onnx")
        rng = np.random.default_rng(5)
        conns = [self.raw(timeout=20) for _ in range(4)]
        for i, c in enumerate(conns):
            x = rng.standard_normal((1, 784)).astype(np.float32)
            self.assertEqual(c.cmd("AI.TENSORSET", "x%d" % i, "FLOAT", 1, 784, "BLOB", x.tobytes()), "OK")
        for i, c in enumerate(conns):
            self.send_execute(c, "mb", "x%d" % i, "y%d" % i)
        for c in conns:
            self.assertEqual(c.read_reply(), "OK")
        self.assertEqual(info(self.r, "mb")["calls"], 4)
        for i in range(4):
            self.assertEqual(execute(self.r, "m", ["x%d" % i], ["z%d" % i]), b"OK")
            a, b = tget(self.r, "y%d" % i), tget(self.r, "z%d" % i)
            self.assertEqual(a.shape, (1, 10))
            # A batch of 4 rows may take another GEMM kernel than 1 row:
            # equal to float32 rounding.
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)

    def test_client_gone_mid_batch(self):
        """A client that disconnects while its request waits in a batch does
        not break the batch: the others get their results, the server goes on."""
        store(self.r, "lin", "linear.onnx", "BATCHSIZE", 4, "MINBATCHSIZE", 3, "MINBATCHTIMEOUT", 60000)
        x = np.ones((1, 4), np.float32)
        tset(self.r, "x", x)
        gone = self.raw()
        self.send_execute(gone, "lin", "x", "ygone")
        gone.close()
        conns = [self.raw(timeout=20) for _ in range(2)]
        for i, c in enumerate(conns):
            self.send_execute(c, "lin", "x", "y%d" % i)
        for c in conns:
            self.assertEqual(c.read_reply(), "OK")
        for i in range(2):
            np.testing.assert_allclose(tget(self.r, "y%d" % i), linear_np(x), rtol=1e-6)
        self.assertTrue(self.r.ping())
        # The departed client's request ran in the batch too.
        poll(lambda: self.r.exists("ygone") == 1, timeout=10, what="the departed client's output")
        self.assertEqual(info(self.r, "lin")["calls"], 3)
        store(self.r, "lin2", "linear.onnx")
        self.assertLinearRuns("lin2")

    def test_client_killed_mid_batch(self):
        """CLIENT KILL of a client whose request waits for MINBATCHSIZE
        closes its connection at once, as Redis frees a blocked client, and
        withdraws the request: it never runs, and its row does not make up
        a later batch (models review: the connection stayed open until the
        run, and two later rows with it made a MINBATCHSIZE of 3)."""
        store(self.r, "lin", "linear.onnx", "BATCHSIZE", 4, "MINBATCHSIZE", 3, "MINBATCHTIMEOUT", 60000)
        tset(self.r, "x", np.ones((1, 4), np.float32))
        victim = self.raw(timeout=10)
        vid = victim.cmd("CLIENT", "ID")
        self.send_execute(victim, "lin", "x", "ykilled")
        poll(lambda: self.r.info("clients")["blocked_clients"] == 1, what="the request to wait")
        self.assertEqual(self.r.execute_command("CLIENT", "KILL", "ID", vid), 1)
        t0 = time.monotonic()
        self.assertFalse(victim.is_open(5))
        self.assertLess(time.monotonic() - t0, 3)
        self.assertNotIn("id=%d " % vid, self.r.execute_command("CLIENT", "LIST").decode())
        self.assertEqual(self.r.info("clients")["blocked_clients"], 0)
        conns = [self.raw(timeout=10) for _ in range(2)]
        for i, c in enumerate(conns):
            c.send(c.encode("AI.MODELEXECUTE", "lin", "INPUTS", 1, "x", "OUTPUTS", 1, "y%d" % i, "TIMEOUT", 500))
        self.assertEqual([c.read_reply() for c in conns], ["TIMEDOUT", "TIMEDOUT"])
        self.assertEqual(self.r.exists("ykilled", "y0", "y1"), 0)
        self.assertEqual(info(self.r, "lin")["calls"], 0)

    def test_client_gone_mid_batch(self):
        """A client that closes its connection while its request waits for
        MINBATCHSIZE is dropped, as Redis frees a blocked client whose read
        finds the end of the stream: its slot is free again, its row does
        not make up a later batch, its output is never stored (engine
        review: three closed clients stayed in CLIENT LIST, their sockets
        in CLOSE-WAIT, and a fourth request ran at once with their rows)."""
        store(self.r, "lin", "linear.onnx", "BATCHSIZE", 16, "MINBATCHSIZE", 4, "MINBATCHTIMEOUT", 60000)
        tset(self.r, "x", np.ones((1, 4), np.float32))
        gone = []
        for i in range(3):
            c = self.raw(timeout=10)
            gone.append(c.cmd("CLIENT", "ID"))
            self.send_execute(c, "lin", "x", "ygone%d" % i)
        poll(lambda: self.r.info("clients")["blocked_clients"] == 3, what="the requests to wait")
        for c in self.srv._raws[-3:]:
            c.sock.close()
        poll(lambda: self.r.info("clients")["blocked_clients"] == 0, timeout=5, what="the gone clients to be dropped")
        listed = self.r.execute_command("CLIENT", "LIST").decode()
        for cid in gone:
            self.assertNotIn("id=%d " % cid, listed)
        live = self.raw(timeout=10)
        live.send(live.encode("AI.MODELEXECUTE", "lin", "INPUTS", 1, "x", "OUTPUTS", 1, "ylive", "TIMEOUT", 500))
        self.assertEqual(live.read_reply(), "TIMEDOUT")
        self.assertEqual(self.r.exists("ygone0", "ygone1", "ygone2", "ylive"), 0)
        self.assertEqual(info(self.r, "lin")["calls"], 0)
        # So is a client blocked in WAIT (here for a replica that never comes).
        w = self.raw(timeout=10)
        wid = w.cmd("CLIENT", "ID")
        w.send(w.encode("WAIT", 1, 0))
        poll(lambda: self.r.info("clients")["blocked_clients"] == 1, what="WAIT to block")
        w.sock.close()
        poll(lambda: self.r.info("clients")["blocked_clients"] == 0, timeout=5, what="the WAIT client to be dropped")
        self.assertNotIn("id=%d " % wid, self.r.execute_command("CLIENT", "LIST").decode())


class HostileModelTest(ModelCase):
    """Broken and hostile blobs: an error reply, the server keeps serving,
    and a model already at the key stays."""

    def test_output_of_too_high_a_rank_is_not_stored(self):
        """A run whose output has more dimensions than a tensor may have
        (255) is refused before the output is stored: stored, it could be
        neither logged nor saved, and every later write of every client
        was refused with MISCONF (pure-Go engine review)."""
        store(self.r, "rank", "rank.onnx")
        tset(self.r, "s3", np.ones(3, np.int64))
        self.assertEqual(execute(self.r, "rank", ["s3"], ["y3"]), b"OK")
        self.assertEqual(tget(self.r, "y3").shape, (1, 1, 1))
        tset(self.r, "s300", np.ones(300, np.int64))
        self.assertErr("ERR tensor rank exceeds 255", "AI.MODELEXECUTE", "rank", "INPUTS", 1, "s300", "OUTPUTS", 1, "y300")
        self.assertEqual(self.r.exists("y300"), 0)
        self.assertEqual(self.r.execute_command("AI.TENSORSET", "after", "INT8", 1, "VALUES", 1), b"OK")
        self.assertTrue(self.r.execute_command("SAVE"))

    def setUp(self):
        super().setUp()
        store(self.r, "victim", "linear.onnx", "TAG", "good")
        self.sha = modelinfo(self.r, "victim")["sha256"]

    def check(self, data, contains=None):
        for key in ("victim", "fresh"):
            t0 = time.monotonic()
            e = self.err("AI.MODELSTORE", key, "ONNX", "CPU", "BLOB", data)
            self.assertLess(time.monotonic() - t0, 5)
            self.assertTrue(e.startswith("ERR "), e)
            self.assertNotIn("\n", e)
            if contains:
                self.assertIn(contains, e)
        self.srv.assert_serving()
        self.assertEqual(self.r.exists("fresh"), 0)
        self.assertEqual(modelinfo(self.r, "victim")["sha256"], self.sha)
        self.assertEqual(self.r.execute_command("AI.MODELGET", "victim", "META")[5], b"good")
        self.assertLinearRuns("victim")
        return e

    def test_html_page(self):
        # RedisAI's exact text, nothing after it (compatibility review).
        self.assertEqual(self.check(model_bytes("html.onnx")), "ERR Failed to load model because protobuf parsing failed.")

    def test_truncated_protobuf(self):
        self.assertEqual(self.check(model_bytes("truncated.onnx")),
                         "ERR Failed to load model because protobuf parsing failed.")

    def test_empty_blob(self):
        self.assertEqual(self.check(b""), "ERR No graph was found in the protobuf.")

    def test_random_bytes(self):
        self.check(np.random.default_rng(99).integers(0, 256, 4096, dtype=np.uint8).tobytes())

    def test_graph_without_nodes(self):
        self.check(model_bytes("no_nodes.onnx"))

    def test_unknown_op(self):
        self.check(model_bytes("unknown_op.onnx"), "NoSuchOperator")

    def test_external_data_initializer(self):
        # RedisAI's words (REDISAI.md §3.3), with ERR as every refusal here.
        self.check(model_bytes("external_data.onnx"), "ERR Initializer tensors with external data is not allowed.")

    def test_tensor_size_mismatch(self):
        self.check(model_bytes("bad_size.onnx"))

    def test_deeply_nested_protobuf(self):
        self.check(model_bytes("deep.onnx"))

    def test_max_model_size(self):
        old = self.r.config_get("max-model-size")["max-model-size"]
        self.addCleanup(self.r.config_set, "max-model-size", old)
        self.assertTrue(self.r.config_set("max-model-size", 100_000))
        # The refusal comes on the first chunk's length header; the server
        # skips what follows only up to twice max-model-size, so for this
        # 2.6 MB model it replies and then closes the connection: each
        # attempt gets a connection of its own, and must read the error.
        mlp = model_bytes("mlp.onnx")
        for key, chunks in (("victim", [mlp]), ("fresh", [mlp]), ("fresh", split_n(mlp, 50))):
            with self.raw() as c:
                rep = c.cmd("AI.MODELSTORE", key, "ONNX", "CPU", "BLOB", *chunks)
                self.assertIsInstance(rep, ServerError)
                self.assertEqual(rep.text, "ERR model exceeds max-model-size")
        self.srv.assert_serving()
        self.assertEqual(self.r.exists("fresh"), 0)
        self.assertEqual(modelinfo(self.r, "victim")["sha256"], self.sha)
        self.assertLinearRuns("victim")

    def test_hostile_in_chunks_and_modelset(self):
        data = model_bytes("html.onnx")
        e = self.err("AI.MODELSET", "victim", "ONNX", "CPU", "BLOB", *split_n(data, 7))
        self.assertIn("protobuf parsing failed", e)
        self.assertLinearRuns("victim")


class MaxModelsTest(ModelCase):
    SERVER_ARGS = ("--max-models", 2)

    def test_evicts_oldest(self):
        store(self.r, "a", "linear.onnx")
        store(self.r, "b", "add_int.onnx")
        self.r.execute_command("AI.TENSORSET", "t", "FLOAT", 1, "VALUES", 1)  # tensors do not count
        self.assertEqual(self.r.exists("a", "b", "t"), 3)
        store(self.r, "c", "linear.onnx")
        self.assertEqual(self.r.exists("a"), 0)
        self.assertEqual(self.r.exists("b", "c", "t"), 3)
        self.assertEqual(sorted(k for k, _ in self.r.execute_command("AI._MODELSCAN")), [b"b", b"c"])
        self.assertLinearRuns("c")
        # Storing again at b makes it the newest: c goes next.
        store(self.r, "b", "add_int.onnx")
        store(self.r, "d", "string_identity.onnx")
        self.assertEqual(sorted(k for k, _ in self.r.execute_command("AI._MODELSCAN")), [b"b", b"d"])
        self.assertErr(NO_RUN_INFO, "AI.INFO", "c")
        self.assertEqual(self.r.execute_command("CONFIG", "GET", "max-models"), [b"max-models", b"2"])
        # Counted as Redis counts evictions (operator review: no field).
        self.assertEqual(self.r.info("stats")["evicted_keys"], 2)


class MaxMemoryTest(ModelCase):
    SERVER_ARGS = ("--maxmemory", "1mb")

    def test_big_model_refused(self):
        data = model_bytes("mlp.onnx")
        self.assertGreater(len(data), 2 << 20)
        e = self.err("AI.MODELSTORE", "big", "ONNX", "CPU", "BLOB", data)
        self.assertTrue(e.startswith("OOM "), e)
        self.assertEqual(self.r.exists("big"), 0)
        self.assertEqual(self.r.execute_command("AI._MODELSCAN"), [])
        # A small model still fits and runs.
        self.assertEqual(store(self.r, "small", "linear.onnx"), b"OK")
        self.assertLinearRuns("small")

    def test_model_bytes_count_once(self):
        """Model bytes count against maxmemory, once per distinct blob, and
        are given back when the last key using them goes."""
        import onnx

        def padded(fill):
            m = onnx.load_from_string(model_bytes("linear.onnx"))
            m.doc_string = fill * 400_000
            return m.SerializeToString()

        a, b, c = padded("a"), padded("b"), padded("c")
        self.assertEqual(store(self.r, "a", a), b"OK")
        self.assertEqual(store(self.r, "b", b), b"OK")
        self.assertEqual(store(self.r, "b2", b), b"OK")  # shared: no new bytes
        e = self.err("AI.MODELSTORE", "c", "ONNX", "CPU", "BLOB", c)
        self.assertTrue(e.startswith("OOM "), e)
        self.assertEqual(self.r.exists("c"), 0)
        self.assertEqual(self.r.delete("a"), 1)
        self.assertEqual(store(self.r, "c", c), b"OK")
        self.assertLinearRuns("c")
        self.assertLinearRuns("b2")


class ModelDirTest(ModelCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="enclaveai-modeldir-")
        cls.mdir = os.path.join(cls.tmp, "models")
        cls.outside = os.path.join(cls.tmp, "outside")
        os.makedirs(os.path.join(cls.mdir, "sub"))
        os.makedirs(cls.outside)
        for d in (cls.mdir, os.path.join(cls.mdir, "sub"), cls.outside):
            shutil.copy(os.path.join(MODELS, "linear.onnx"), d)
        os.symlink(os.path.join(cls.outside, "linear.onnx"), os.path.join(cls.mdir, "escape.onnx"))
        os.symlink(cls.outside, os.path.join(cls.mdir, "outdir"))
        os.symlink(os.path.join(cls.mdir, "sub", "linear.onnx"), os.path.join(cls.mdir, "inside.onnx"))
        cls.SERVER_ARGS = ("--model-dir", cls.mdir)
        super().setUpClass()

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_file_inside(self):
        for i, path in enumerate(("linear.onnx", "sub/linear.onnx", "./sub/../linear.onnx", "inside.onnx",
                                  os.path.join(self.mdir, "linear.onnx"))):
            key = "f%d" % i
            self.assertEqual(self.r.execute_command("AI.MODELSTORE", key, "ONNX", "CPU", "TAG", "file",
                                                    "FILE", path), b"OK", path)
            self.assertEqual(self.r.execute_command("AI.MODELGET", key, "BLOB"), model_bytes("linear.onnx"))
            self.assertLinearRuns(key)

    def test_file_escapes_refused(self):
        for path in ("../outside/linear.onnx", "sub/../../outside/linear.onnx",
                     os.path.join(self.outside, "linear.onnx"), "/etc/passwd",
                     "escape.onnx", "outdir/linear.onnx", "missing.onnx", "sub", ""):
            self.assertErr(MODEL_FILE_ERR, "AI.MODELSTORE", "m", "ONNX", "CPU", "FILE", path)
        self.assertEqual(self.r.exists("m"), 0)
        self.srv.assert_serving()


class NoModelDirTest(ModelCase):
    def test_file_needs_model_dir(self):
        self.assertErr("ERR FILE needs the model-dir directive", "AI.MODELSTORE", "m", "ONNX", "CPU",
                       "FILE", os.path.join(MODELS, "linear.onnx"))
        self.assertEqual(self.r.exists("m"), 0)


class ConfServer(Server):
    """A Server started with a config file as its first argument, as
    redis-server takes it (the harness puts --port first)."""

    def __init__(self, conf, *args):
        super().__init__(*args)
        self.conf = conf

    def start(self):
        binary = harness.server_binary()
        self.dir = tempfile.mkdtemp(prefix="enclaveai-test-")
        self.stderr_path = os.path.join(self.dir, "server.stderr")
        for _ in range(3):
            self.port = harness.free_port()
            with open(self.stderr_path, "wb") as errf:
                self.proc = subprocess.Popen(
                    [binary, self.conf, "--port", str(self.port), "--dir", self.dir] + self.args,
                    cwd=self.dir, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errf)
            try:
                self._wait_ready()
                return self
            except harness._PortTaken:
                continue
        raise RuntimeError("could not bind a free port in 3 attempts:\n" + self.stderr())


class LoadModelTest(unittest.TestCase):
    """`loadmodel` lines in a config file store models at start."""

    def test_models_available_at_start(self):
        tmp = tempfile.mkdtemp(prefix="enclaveai-conf-")
        self.addCleanup(shutil.rmtree, tmp, True)
        conf = os.path.join(tmp, "enclaveai.conf")
        with open(conf, "w") as f:
            f.write("# startup models\n")
            f.write("loadmodel boot ONNX CPU %s TAG boot BATCHSIZE 2\n" % os.path.join(MODELS, "linear.onnx"))
            f.write("loadmodel adder ONNX CPU %s\n" % os.path.join(MODELS, "add_int.onnx"))
        srv = ConfServer(conf).start()
        self.addCleanup(srv.stop)
        wait_loaded(srv)
        r = srv.client()
        self.assertEqual(sorted(r.execute_command("AI._MODELSCAN")), [[b"adder", b""], [b"boot", b"boot"]])
        meta = r.execute_command("AI.MODELGET", "boot", "META")
        self.assertEqual(meta[4:8], [b"tag", b"boot", b"batchsize", 2])
        self.assertEqual(r.execute_command("AI.MODELGET", "boot", "BLOB"), model_bytes("linear.onnx"))
        x = np.array([[1, 2, 3, 4]], np.float32)
        tset(r, "x", x)
        self.assertEqual(execute(r, "boot", ["x"], ["y"]), b"OK")
        np.testing.assert_allclose(tget(r, "y"), linear_np(x), rtol=1e-6)
        tset(r, "a", np.array([2, 3], np.int32))
        self.assertEqual(execute(r, "adder", ["a", "a"], ["c"]), b"OK")
        np.testing.assert_array_equal(tget(r, "c"), [4, 6])

    def test_bad_model_stops_start(self):
        """A loadmodel line whose model fails to store stops the start with
        the store's own error, not a guess from the reply's first byte."""
        tmp = tempfile.mkdtemp(prefix="enclaveai-conf-")
        self.addCleanup(shutil.rmtree, tmp, True)
        bad = os.path.join(tmp, "bad.onnx")
        with open(bad, "wb") as f:
            f.write(b"\x08\x07not a model")
        out = subprocess.run([harness.server_binary(), "--port", str(harness.free_port()), "--dir", tmp,
                              "--loadmodel", "bad", "ONNX", "CPU", bad], capture_output=True, text=True, timeout=60)
        self.assertNotEqual(out.returncode, 0)
        self.assertRegex(out.stderr, r'msg=fatal err="loadmodel bad: [^"]*model')
        self.assertIsNone(harness.CRASH_PATTERNS.search(out.stderr), out.stderr)


class ConcurrencyTest(ModelCase):
    """Runs, stores and deletes from many clients at once."""

    DURATION = 3.0

    def test_runs_while_models_churn(self):
        store(self.r, "hot", "linear.onnx")
        stop = threading.Event()
        problems, counts = [], [0] * 8
        allowed = (NO_MODEL[4:], "Got invalid dimensions for input", "Unexpected input data type",
                   "Invalid rank for input", IN_MISMATCH)

        def worker(i):
            c = self.srv.client()
            rng = np.random.default_rng(i)
            own = "own%d" % i
            store(c, own, "linear.onnx")
            try:
                while not stop.is_set():
                    x = rng.standard_normal((1 + i % 3, 4)).astype(np.float32)
                    tset(c, "cx%d" % i, x)
                    for key in (own, "hot"):
                        try:
                            rep = execute(c, key, ["cx%d" % i], ["cy%d" % i])
                        except redis.ResponseError as e:
                            if key == own or not str(e).startswith(allowed):
                                problems.append("%s: %s" % (key, e))
                            continue
                        if rep != b"OK":
                            problems.append("%s: reply %r" % (key, rep))
                            continue
                        got = tget(c, "cy%d" % i)
                        if got.shape != (x.shape[0], 3) or not np.allclose(got, linear_np(x), rtol=1e-5, atol=1e-5):
                            problems.append("%s: wrong result %r for %r" % (key, got, x))
                        counts[i] += 1
            except Exception as e:
                problems.append("worker %d: %r" % (i, e))
            finally:
                c.close()

        def churner():
            c = self.srv.client()
            models = ["linear.onnx", "add_int.onnx", "string_identity.onnx", "mlp.onnx"]
            n = 0
            try:
                while not stop.is_set():
                    n += 1
                    store(c, "churn%d" % (n % 5), models[n % len(models)], "TAG", str(n))
                    if n % 3 == 0:
                        c.execute_command("AI.MODELDEL", "churn%d" % ((n + 2) % 5)) if c.exists("churn%d" % ((n + 2) % 5)) else None
                    if n % 4 == 0:
                        c.delete("hot")
                    elif n % 4 == 1:
                        store(c, "hot", "add_int.onnx")
                    else:
                        store(c, "hot", "linear.onnx", *(("BATCHSIZE", 4) if n % 8 == 2 else ()))
                    if n % 7 == 0:
                        k = store(c, "*", "linear.onnx")
                        c.delete(k)
            except Exception as e:
                problems.append("churner: %r" % (e,))
            finally:
                c.close()

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)] + [threading.Thread(target=churner)]
        for t in threads:
            t.start()
        time.sleep(self.DURATION)
        stop.set()
        for t in threads:
            t.join(20)
        self.assertFalse(any(t.is_alive() for t in threads))
        self.assertEqual(problems[:5], [])
        self.assertTrue(all(n >= 5 for n in counts), counts)
        self.srv.assert_serving()
        self.assertLinearRuns("own0")


if __name__ == "__main__":
    unittest.main()
