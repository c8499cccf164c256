"""Running a model by its hash (commands/digest.go) and signed inference
receipts (commands/receipt.go), against the real server with two tenants
authenticated by tokens (test_jwt.Keys).

EXPECT is checked on the very model value the run uses: a model replaced
between AI.MODELFIND and AI.MODELEXECUTE is refused, never run."""

import base64
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import redis
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import REPO, Server  # noqa: E402
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
        for extra, err in ((("abc",), "a model digest is a SHA-256 in hex (64 digits)"),
                           ((d_lin, "X"), "Invalid argument: X")):
            with self.assertRaises(redis.exceptions.ResponseError, msg=extra) as cm:
                a.execute_command(*dag, "EXPECT", *extra)
            self.assertEqual(str(cm.exception), err)
        # Bob cannot run alice's model whatever its digest.
        with self.assertRaises(redis.exceptions.NoPermissionError):
            b.execute_command("AI.MODELEXECUTE", "m2", "INPUTS", 1, "x", "OUTPUTS", 1, "y", "EXPECT", d_lin)


def b64d(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def b64e(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def sha(b):
    return hashlib.sha256(b).hexdigest()


def verify_receipt(jws):
    """Checks a receipt with python3-cryptography alone: ES256 over
    header.payload with the P-256 key in the header. Returns (payload,
    public key); raises InvalidSignature."""
    h, p, s = jws.split(".")
    header = json.loads(b64d(h))
    assert header["alg"] == "ES256" and header["typ"] == "enclaveai-receipt+jws", header
    jwk = header["jwk"]
    assert jwk["kty"] == "EC" and jwk["crv"] == "P-256", jwk
    pub = ec.EllipticCurvePublicNumbers(int.from_bytes(b64d(jwk["x"]), "big"), int.from_bytes(b64d(jwk["y"]), "big"),
                                        ec.SECP256R1()).public_key()
    sig = b64d(s)
    assert len(sig) == 64
    der_sig = encode_dss_signature(int.from_bytes(sig[:32], "big"), int.from_bytes(sig[32:], "big"))
    pub.verify(der_sig, (h + "." + p).encode(), ec.ECDSA(hashes.SHA256()))
    return json.loads(b64d(p)), pub


class ReceiptTest(TrustCase):
    def attest(self):
        nonce = os.urandom(32)
        rep = self.alice.execute_command("AI.ATTEST", nonce)
        return nonce, dict(zip([k.decode() for k in rep[::2]], rep[1::2]))

    def cli(self, *args):
        p = subprocess.run([os.path.join(REPO, "bin", "enclaveai-cli"), "receipt", "verify"] + list(args),
                           capture_output=True, text=True, timeout=30)
        return p.returncode, p.stdout + p.stderr

    def test_receipt(self):
        a = self.alice
        model = linear_onnx()
        x = np.array([[1, 2, 3, 4]], dtype=np.float32)
        a.execute_command("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", model)
        a.execute_command("AI.TENSORSET", "x", "FLOAT", 1, 4, "BLOB", x.tobytes())
        nonce = os.urandom(24)
        jws = a.execute_command("AI.MODELEXECUTE", "m", "INPUTS", 1, "x", "OUTPUTS", 1, "y",
                                "EXPECT", sha(model), "RECEIPT", nonce).decode()
        y = a.execute_command("AI.TENSORGET", "y", "BLOB")
        payload, pub = verify_receipt(jws)
        # Every digest recomputed from the bytes this test sent and read back.
        self.assertEqual(payload["v"], 1)
        self.assertEqual(payload["typ"], "enclaveai.inference")
        self.assertEqual(payload["user"], "alice")
        self.assertEqual(payload["nonce"], b64e(nonce))
        self.assertEqual(payload["models"], [{"key": "m", "sha256": sha(model)}])
        self.assertEqual(payload["inputs"], [{"key": "x", "dtype": "FLOAT", "shape": [1, 4], "sha256": sha(x.tobytes())}])
        self.assertEqual(payload["outputs"][0]["key"], "y")
        self.assertEqual(payload["outputs"][0]["sha256"], sha(y))
        # The key is the one AI.ATTEST binds into the enclave's report data.
        att_nonce, att = self.attest()
        der = att["receipt_public_key"]
        self.assertEqual(serialization.load_der_public_key(der).public_numbers(), pub.public_numbers())
        self.assertEqual(payload["server"]["key_id"], sha(der))
        report = att["evidence"][14:]
        self.assertEqual(report[48:80], hashlib.sha256(b"EnclaveAI receipt key v1\x00" + der).digest())

        # enclaveai-cli checks it all too; a tampered receipt is refused.
        d = tempfile.mkdtemp(prefix="enclaveai-receipt-")
        files = {"r": jws.encode(), "ev": att["evidence"], "tls": att["tls_public_key"], "x": x.tobytes(),
                 "y": y, "bad": b"\0" * len(y)}
        for name, data in files.items():
            with open(os.path.join(d, name), "wb") as f:
                f.write(data)
        path = lambda n: os.path.join(d, n)  # noqa: E731
        common = ["-evidence", path("ev"), "-attest-nonce", att_nonce.hex(), "-allow-simulated",
                  "-nonce-hex", nonce.hex(), "-model-sha256", sha(model), "-tensor", "x=" + path("x")]
        if att["tls_public_key"]:
            common += ["-tls-key", path("tls")]
        rc, out = self.cli("-receipt", path("r"), *common, "-tensor", "y=" + path("y"))
        self.assertEqual(rc, 0, out)
        self.assertIn("VERIFIED", out)
        rc, out = self.cli("-receipt", path("r"), *common, "-tensor", "y=" + path("bad"))
        self.assertEqual(rc, 1, out)
        self.assertIn("FAILED: tensor y", out)
        rc, out = self.cli("-receipt", path("r"), *common[:-4], "-nonce-hex", "00")
        self.assertEqual(rc, 1, out)
        self.assertIn("FAILED: nonce", out)
        # Without -nonce a replayed receipt would verify: the CLI says so.
        base = ["-evidence", path("ev"), "-attest-nonce", att_nonce.hex(), "-allow-simulated"]
        if att["tls_public_key"]:
            base += ["-tls-key", path("tls")]
        rc, out = self.cli("-receipt", path("r"), *base)
        self.assertEqual(rc, 0, out)
        self.assertIn("nonce not checked", out)
        # A run whose output went onto its input key names the key twice,
        # with other bytes each time: -input and -output tell them apart,
        # and -tensor matches either (security review: it matched neither).
        jws2 = a.execute_command("AI.MODELEXECUTE", "m", "INPUTS", 1, "x", "OUTPUTS", 1, "x", "RECEIPT", nonce).decode()
        xout = a.execute_command("AI.TENSORGET", "x", "BLOB")
        for name, data in (("r2", jws2.encode()), ("xout", xout)):
            with open(path(name), "wb") as f:
                f.write(data)
        same = base + ["-nonce-hex", nonce.hex()]
        for flags, rc_want in ((["-input", "x=" + path("x"), "-output", "x=" + path("xout")], 0),
                               (["-tensor", "x=" + path("x"), "-tensor", "x=" + path("xout")], 0),
                               (["-input", "x=" + path("xout")], 1),
                               (["-output", "x=" + path("x")], 1)):
            rc, out = self.cli("-receipt", path("r2"), *same, *flags)
            self.assertEqual(rc, rc_want, (flags, out))
        # Tampered: the output digest changed, the signature kept.
        h, p, s = jws.split(".")
        forged = dict(payload)
        forged["outputs"] = [dict(payload["outputs"][0], sha256=sha(b"\0" * len(y)))]
        tampered = h + "." + b64e(json.dumps(forged).encode()) + "." + s
        with self.assertRaises(InvalidSignature):
            verify_receipt(tampered)
        with open(path("r"), "w") as f:
            f.write(tampered)
        rc, out = self.cli("-receipt", path("r"), *common, "-tensor", "y=" + path("bad"))
        self.assertEqual(rc, 1, out)
        self.assertIn("FAILED: receipt: signature does not verify", out)
        # A receipt from another server's key does not pass this attestation.
        other = Server(*self.keys.server_args()).start()
        try:
            o = other.client(password=self.keys.token("alice"))
            o.execute_command("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", model)
            o.execute_command("AI.TENSORSET", "x", "FLOAT", 1, 4, "BLOB", x.tobytes())
            with open(path("r"), "wb") as f:
                f.write(o.execute_command("AI.MODELEXECUTE", "m", "INPUTS", 1, "x", "OUTPUTS", 1, "y", "RECEIPT", nonce))
        finally:
            other.stop()
        rc, out = self.cli("-receipt", path("r"), *common)
        self.assertEqual(rc, 1, out)
        self.assertIn("FAILED: attestation", out)

    def test_dag_receipt(self):
        a = self.alice
        model = linear_onnx()
        x = np.array([[4, 3, 2, 1]], dtype=np.float32)
        a.execute_command("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", model)
        reply = a.execute_command("AI.DAGEXECUTE", "PERSIST", 1, "y", "RECEIPT", "n-1",
                                  "|>", "AI.TENSORSET", "x", "FLOAT", 1, 4, "BLOB", x.tobytes(),
                                  "|>", "AI.MODELEXECUTE", "m", "INPUTS", 1, "x", "OUTPUTS", 1, "y",
                                  "|>", "AI.TENSORGET", "y", "BLOB")
        self.assertEqual(reply[:2], [b"OK", b"OK"])
        y = reply[2]
        payload, _ = verify_receipt(reply[3].decode())
        self.assertEqual(payload["typ"], "enclaveai.dag")
        self.assertEqual(payload["nonce"], b64e(b"n-1"))
        self.assertEqual(payload["models"], [{"key": "m", "sha256": sha(model)}])
        self.assertEqual([(t["key"], t["sha256"]) for t in payload["inputs"]], [("x", sha(x.tobytes()))])
        self.assertEqual([(t["key"], t["sha256"]) for t in payload["outputs"]], [("y", sha(y)), ("y", sha(y))])
        self.assertEqual(a.execute_command("AI.TENSORGET", "y", "BLOB"), y)

    def test_receipt_errors(self):
        a = self.alice
        a.execute_command("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", linear_onnx())
        a.execute_command("AI.TENSORSET", "x", "FLOAT", 1, 4, "VALUES", 1, 2, 3, 4)
        for args in (("RECEIPT",), ("RECEIPT", ""), ("RECEIPT", "x" * 1025)):
            with self.assertRaises(redis.exceptions.ResponseError) as cm:
                a.execute_command("AI.MODELEXECUTE", "m", "INPUTS", 1, "x", "OUTPUTS", 1, "y", *args)
            self.assertEqual(str(cm.exception), "RECEIPT takes a nonce of 1 to 1024 bytes")


if __name__ == "__main__":
    unittest.main()
