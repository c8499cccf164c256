"""Models that crashed ONNX Runtime inside the server get clean errors, and
the server stays up (issue 16).

The models are modelstore/testdata/crash/*.onnx, written by
fuzzmodels/regressions.py (`make test` runs it); index.json says, per
model, whether the sanitizer refuses it at store ("refused"), rewrites its
integer division ("guarded"), leaves it to ONNX Runtime ("clean"), or
cannot see what crashes it, where an engine worker dies of it, at store or
at run, and the server answers ("contained"). A
short sample of the generated crash hunt (fuzzmodels/hunt.py, 4000 models,
at most 50 s) must find nothing.
"""

import json
import math
import os
import subprocess
import sys
import time
import unittest

import numpy as np
import redis

from harness import REPO, ServerTestCase, model_bytes as test_model, server_binary

CRASH_DIR = os.path.join(REPO, "modelstore", "testdata", "crash")
NP = {"FLOAT": np.float32, "DOUBLE": np.float64, "INT8": np.int8, "INT16": np.int16, "INT32": np.int32,
      "INT64": np.int64, "UINT8": np.uint8, "UINT16": np.uint16, "UINT32": np.uint32, "UINT64": np.uint64,
      "BOOL": np.bool_}


def cases():
    with open(os.path.join(CRASH_DIR, "index.json")) as f:
        return json.load(f)


def model_bytes(name):
    with open(os.path.join(CRASH_DIR, name + ".onnx"), "rb") as f:
        return f.read()


def number(x):
    return float(x) if isinstance(x, str) else x  # "nan", "inf" as regressions.py writes them


def guarded(op, a, b, npt):
    """The documented result of a guarded integer Div or Mod (fmod 0)."""
    info = np.iinfo(npt)
    a, b = int(a), int(b)
    if b == 0 or (info.min < 0 and a == info.min and b == -1):
        b = 1
    if op == "div":
        q = abs(a) // abs(b)
        return q if (a < 0) == (b < 0) else -q
    return a - b * (a // b)  # Python's floor modulo: the sign of the divisor


def limited(text):
    """Whether an error is the engine workers' restart rate limit (a worker
    slot restarts at most 5 times in 10 s; the "contained" models crash
    one each): worker.ErrRestartLimited."""
    return "engine worker restarting too often" in text


class TestCrashModels(ServerTestCase):

    def command(self, *args):
        """execute_command, waiting out the restart rate limit."""
        for _ in range(30):
            try:
                return self.r.execute_command(*args)
            except redis.ResponseError as e:
                if not limited(str(e)):
                    raise
                time.sleep(0.5)
        return self.r.execute_command(*args)

    def store(self, name):
        """AI.MODELSTORE of a crash model: None on OK, else the error text."""
        try:
            self.command("AI.MODELSTORE", name, "ONNX", "CPU", "BLOB", model_bytes(name))
            return None
        except redis.ResponseError as e:
            return str(e)

    def feed(self, c):
        names = []
        for name, typ, shape, values in c["feeds"]:
            arr = np.array([number(v) for v in values], dtype=NP[typ]).reshape(shape)
            self.r.execute_command("AI.TENSORSET", name, typ, *shape, "BLOB", arr.tobytes())
            names.append(name)
        return names

    def test_every_crash_model_is_refused_or_safe(self):
        for name, c in sorted(cases().items()):
            with self.subTest(model=name):
                err = self.store(name)
                if c["expect"] == "refused":
                    self.assertIsNotNone(err, "stored a model that crashed ONNX Runtime")
                    self.assertTrue(err.startswith("model refused: node "), err)
                elif c["expect"] == "guarded":
                    self.assertIsNone(err)
                    # AI.MODELGET returns what the client uploaded, not the rewrite.
                    blob = self.r.execute_command("AI.MODELGET", name, "BLOB")
                    self.assertEqual(bytes(blob), model_bytes(name))
                elif c["expect"] == "contained" and c["stage"] == "store":
                    # It crashes ONNX Runtime while the session is created: the
                    # worker creating it dies, the store is refused.
                    self.assertIsNotNone(err)
                    self.assertRegex(err, r"^model could not be loaded: engine worker died \(SIG[A-Z]+\) "
                                          r"while creating its session")
                elif c["expect"] == "contained":
                    self.assertIsNone(err)
                if err is None and c["feeds"] and not c.get("timeout"):
                    names = self.feed(c)
                    try:
                        outs = ["out%d" % i for i in range(c.get("outputs", 1))]
                        self.command("AI.MODELEXECUTE", name, "INPUTS", len(names), *names,
                                     "OUTPUTS", len(outs), *outs, "TIMEOUT", 5000)
                        died = False
                    except Exception as e:
                        died = "engine worker died" in str(e)
                    # Only what crashes at run on hidden shapes may take a worker down.
                    self.assertEqual(died, c["expect"] == "contained")
                self.assertTrue(self.srv.alive(), self.srv.stderr()[-3000:])
                self.assertTrue(self.r.ping())

    def test_guarded_division_results(self):
        for name, c in sorted(cases().items()):
            if c["expect"] != "guarded" or not name.endswith("_run"):
                continue
            with self.subTest(model=name):
                self.assertIsNone(self.store(name))
                names = self.feed(c)
                self.command("AI.MODELEXECUTE", name, "INPUTS", 2, *names, "OUTPUTS", 1, "out")
                typ = c["feeds"][0][1]
                got = np.frombuffer(self.r.execute_command("AI.TENSORGET", "out", "BLOB"), dtype=NP[typ])
                a = np.array([number(v) for v in c["feeds"][0][3]], dtype=NP[typ])
                b = np.array([number(v) for v in c["feeds"][1][3]], dtype=NP[typ])
                want = [guarded(name[:3], x, y, NP[typ]) for x, y in zip(a, b)]
                self.assertEqual([int(x) for x in got], want)

    def test_float_division_is_ieee(self):
        self.assertIsNone(self.store("div_float"))
        names = self.feed(cases()["div_float"])
        self.r.execute_command("AI.MODELEXECUTE", "div_float", "INPUTS", 2, *names, "OUTPUTS", 1, "out")
        got = np.frombuffer(self.r.execute_command("AI.TENSORGET", "out", "BLOB"), dtype=np.float32)
        self.assertEqual((got[0], got[1]), (np.inf, -np.inf))
        self.assertTrue(math.isnan(got[2]))

    def test_loop_bomb_is_killed_by_timeout(self):
        # 2^62 trips cannot be refused at store (exporters write INT64_MAX
        # trip counts for while loops); the execution timeout ends it.
        self.r.execute_command("AI.CONFIG", "MODEL_EXECUTION_TIMEOUT", 1000)
        try:
            self.assertIsNone(self.store("bomb_loop_trips"))
            names = self.feed(cases()["bomb_loop_trips"])
            with self.assertRaises(Exception) as cm:
                self.r.execute_command("AI.MODELEXECUTE", "bomb_loop_trips", "INPUTS", 1, *names, "OUTPUTS", 1, "out")
            self.assertIn("terminate", str(cm.exception))
        finally:
            self.r.execute_command("AI.CONFIG", "MODEL_EXECUTION_TIMEOUT", 5000)
        self.assertTrue(self.r.ping())

    def test_hunt_sample_finds_nothing(self):
        # A fixed-seed sample of `make fuzz-models` against a server of its own:
        # the same 4000 models each time (fewer if the machine is slow).
        out = subprocess.run([sys.executable, os.path.join(REPO, "fuzzmodels", "hunt.py"),
                              "--seconds", "50", "--models", "4000", "--seed", "7", "--check", "--shrink", "0",
                              "--binary", server_binary(), "--out", os.path.join(self.srv.dir, "hunt")],
                             capture_output=True, text=True, timeout=180)
        self.assertEqual(out.returncode, 0, out.stdout[-4000:] + out.stderr[-4000:])


class TestPadLeak(ServerTestCase):
    """ONNX Runtime 1.24.1's Pad fills a reflect pad that reaches what is
    left of its axis, and a wrap pad past it, with memory it never wrote:
    in the engine worker, tensors other models left there. The server
    refuses such pads, at AI.MODELSTORE where they and the shape are
    constants, else at the run, before ONNX Runtime pads
    (modelstore/padguard.go); the build before answered with the worker's
    memory."""

    PATTERN = 1234.5  # a float a tensor of another model is made of

    def fill_worker(self):
        """Runs a tensor of PATTERN through another model, then deletes it:
        with a larger one before it (glibc then keeps the freed block in its
        heap), the next model's first run gets that block."""
        for n, value in ((1_000_000, 1.0), (500_000, self.PATTERN)):
            self.r.execute_command("AI.MODELSTORE", "fill", "ONNX", "CPU", "BLOB", test_model("relu.onnx"))
            self.r.execute_command("AI.TENSORSET", "f", "FLOAT", n, "BLOB", np.full(n, value, np.float32).tobytes())
            self.r.execute_command("AI.MODELEXECUTE", "fill", "INPUTS", 1, "f", "OUTPUTS", 1, "fo")
            self.r.delete("fill", "f", "fo")

    def pad(self, model, x, pads):
        """Runs model on the FLOAT matrix x and pads: its output, or the
        error's text."""
        x = np.array(x, np.float32)
        self.r.execute_command("AI.TENSORSET", "x", "FLOAT", *x.shape, "BLOB", x.tobytes())
        self.r.execute_command("AI.TENSORSET", "p", "INT64", 4, "VALUES", *pads)
        try:
            self.r.execute_command("AI.MODELEXECUTE", model, "INPUTS", 2, "x", "p", "OUTPUTS", 1, "y")
        except redis.ResponseError as e:
            return str(e)
        shape = self.r.execute_command("AI.TENSORGET", "y", "META")[3]
        return np.frombuffer(self.r.execute_command("AI.TENSORGET", "y", "BLOB"), np.float32).reshape(shape)

    def assertRefused(self, got, x, mode):
        if not isinstance(got, str):
            foreign = ~np.isin(got, np.array(x, np.float32))
            self.fail("the run gave %d elements that are not the input's (%d of them the other model's %g, %d other "
                      "nonzero ones): %s" % (foreign.sum(), (got == self.PATTERN).sum(), self.PATTERN,
                                             (foreign & (got != 0) & (got != self.PATTERN)).sum(), got.ravel()[:16]))
        self.assertEqual(got, 'model refused: node "pad" (Pad): %s pads %s what is left of an axis: a pad must be %s '
                              'what is left of its axis after negative pads, or ONNX Runtime returns memory it never '
                              'wrote' % ((mode, "reach", "less than") if mode == "reflect" else (mode, "pass", "at most")))

    def test_reflect_pads_past_the_axis_are_refused_at_the_run(self):
        self.fill_worker()
        self.r.execute_command("AI.MODELSTORE", "pad", "ONNX", "CPU", "BLOB", test_model("pad_reflect.onnx"))
        self.assertRefused(self.pad("pad", [[1, 2]], [0, 1000, 0, 0]), [[1, 2]], "reflect")
        # As large as the axis, at its end, and as large as what negative pads leave.
        for pads in ([0, 3, 0, 0], [0, 0, 0, 3], [0, -1, 0, 2]):
            self.assertRefused(self.pad("pad", [[1, 2, 3]], pads), [[1, 2, 3]], "reflect")
        # Pads that fit are ONNX Runtime's: numpy's reflection.
        x = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
        np.testing.assert_array_equal(self.pad("pad", x, [1, 2, 0, 2]), np.pad(x, ((1, 0), (2, 2)), mode="reflect"))
        self.assertTrue(self.srv.alive(), self.srv.stderr()[-3000:])

    def test_wrap_pads_past_the_axis_are_refused_at_the_run(self):
        self.fill_worker()
        self.r.execute_command("AI.MODELSTORE", "pad", "ONNX", "CPU", "BLOB", test_model("pad_wrap.onnx"))
        self.assertRefused(self.pad("pad", [[1, 2]], [0, 1000, 0, 0]), [[1, 2]], "wrap")
        np.testing.assert_array_equal(self.pad("pad", [[1, 2, 3]], [0, 3, 0, 2]),
                                      np.pad(np.array([[1, 2, 3]], np.float32), ((0, 0), (3, 2)), mode="wrap"))

    def test_constant_pads_past_the_axis_are_refused_at_store(self):
        with self.assertRaises(redis.ResponseError) as cm:
            self.r.execute_command("AI.MODELSTORE", "pad", "ONNX", "CPU", "BLOB", test_model("pad_reflect_static.onnx"))
        self.assertEqual(str(cm.exception), 'model refused: node "pad" (Pad): reflect pads 3 and 0 of axis 1 (of 3 '
                                            'elements, 3 left after negative pads): a pad must be less than what is '
                                            'left of its axis after negative pads, or ONNX Runtime returns memory it '
                                            'never wrote')


if __name__ == "__main__":
    unittest.main()
