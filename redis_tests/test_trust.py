"""Running a model by its hash (commands/digest.go) and signed inference
receipts (commands/receipt.go), against the real server with two tenants
authenticated by tokens (test_jwt.Keys).

EXPECT is checked on the very model value the run uses: a model replaced
between AI.MODELFIND and AI.MODELEXECUTE is refused, never run."""

import hashlib
import os
import sys
import unittest

import redis

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Server  # noqa: E402
from test_jwt import Keys, linear_onnx  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
MISMATCH = "EXPECT: the model under the key does not have the expected SHA-256"


def mlp_onnx():
    with open(os.path.join(HERE, "models", "mlp.onnx"), "rb") as f:
        return f.read()


class TrustCase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.keys = Keys()
        cls.srv = Server(*cls.keys.server_args()).start()

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()

    def tenant(self, sub):
        c = self.srv.client(password=self.keys.token(sub))
        self.addCleanup(c.close)
        for key in c.scan_iter():
            try:
                c.delete(key)
            except redis.exceptions.NoPermissionError:
                pass
        return c

    def setUp(self):
        self.alice, self.bob = self.tenant("alice"), self.tenant("bob")


class ExpectTest(TrustCase):
    def test_modelfind_and_expect(self):
        a, b = self.alice, self.bob
        lin, mlp = linear_onnx(), mlp_onnx()
        d_lin, d_mlp = hashlib.sha256(lin).hexdigest(), hashlib.sha256(mlp).hexdigest()
        self.assertEqual(a.execute_command("AI.MODELSTORE", "m1", "ONNX", "CPU", "BLOB", lin), b"OK")
        self.assertEqual(a.execute_command("AI.MODELSTORE", "m2", "ONNX", "CPU", "BLOB", lin), b"OK")
        uuid = a.execute_command("AI.MODELSTORE", "*", "ONNX", "CPU", "BLOB", mlp)
        self.assertEqual(b.execute_command("AI.MODELSTORE", "bm", "ONNX", "CPU", "BLOB", lin), b"OK")
        # The caller's keys only; upper-case hex too; none is an empty list.
        self.assertEqual(a.execute_command("AI.MODELFIND", d_lin), [b"m1", b"m2"])
        self.assertEqual(a.execute_command("AI.MODELFIND", d_lin.upper()), [b"m1", b"m2"])
        self.assertEqual(a.execute_command("AI.MODELFIND", d_mlp), [uuid])
        self.assertEqual(b.execute_command("AI.MODELFIND", d_lin), [b"bm"])
        self.assertEqual(b.execute_command("AI.MODELFIND", d_mlp), [])
        for bad in ("abc", "z" * 64, d_lin + "00"):
            with self.assertRaises(redis.exceptions.ResponseError) as cm:
                a.execute_command("AI.MODELFIND", bad)
            self.assertEqual(str(cm.exception), "a model digest is a SHA-256 in hex (64 digits)")

        a.execute_command("AI.TENSORSET", "x", "FLOAT", 1, 4, "VALUES", 1, 2, 3, 4)
        run = ("AI.MODELEXECUTE", "m1", "INPUTS", 1, "x", "OUTPUTS", 1, "y")
        self.assertEqual(a.execute_command(*run, "EXPECT", d_lin), b"OK")
        self.assertEqual(a.execute_command(*run, "TIMEOUT", 1000, "EXPECT", d_lin), b"OK")
        self.assertEqual(a.execute_command(*run, "EXPECT", d_lin, "TIMEOUT", 1000), b"OK")
        a.delete("y")
        with self.assertRaises(redis.exceptions.ResponseError) as cm:
            a.execute_command(*run, "EXPECT", d_mlp)
        self.assertEqual(str(cm.exception), MISMATCH)
        self.assertEqual(a.exists("y"), 0)  # refused, not run
        # Replaced between MODELFIND and EXECUTE: refused.
        found = a.execute_command("AI.MODELFIND", d_lin)[0]
        self.assertEqual(a.execute_command("AI.MODELSTORE", found, "ONNX", "CPU", "BLOB", mlp), b"OK")
        with self.assertRaises(redis.exceptions.ResponseError) as cm:
            a.execute_command("AI.MODELEXECUTE", found, "INPUTS", 1, "x", "OUTPUTS", 1, "y", "EXPECT", d_lin)
        self.assertEqual(str(cm.exception), MISMATCH)
        self.assertEqual(a.exists("y"), 0)
        # In a DAG.
        dag = ("AI.DAGEXECUTE", "LOAD", 1, "x", "PERSIST", 1, "dy", "|>", "AI.MODELEXECUTE", "m2",
               "INPUTS", 1, "x", "OUTPUTS", 1, "dy")
        self.assertEqual(a.execute_command(*dag, "EXPECT", d_lin), [b"OK"])
        a.delete("dy")
        with self.assertRaises(redis.exceptions.ResponseError) as cm:
            a.execute_command(*dag, "EXPECT", d_mlp)
        self.assertEqual(str(cm.exception), MISMATCH)
        self.assertEqual(a.exists("dy"), 0)
        # Bob cannot run alice's model whatever its digest.
        with self.assertRaises(redis.exceptions.NoPermissionError):
            b.execute_command("AI.MODELEXECUTE", "m2", "INPUTS", 1, "x", "OUTPUTS", 1, "y", "EXPECT", d_lin)


if __name__ == "__main__":
    unittest.main()
