"""Token authentication and upload policy (commands/jwt.go, jwtauth/,
commands/policy.go) against the real server: tokens are signed here with
Debian's python3-jwt and python3-cryptography, as a tenant's identity
provider would, and the server only holds the public keys.

A token is ES256 only; wrong, expired, not-yet-valid, tampered, wrongly
signed (another key, alg none, HS256 keyed with the public key, RS256) or
wrongly addressed (issuer, audience) tokens get -WRONGPASS and nothing else,
and no token ever reaches the log. A token's sub is a tenant who owns
models and tensors as a configured user does; max-models counts per tenant.
Uploads refused by policy are refused on the first chunk's length header:
the server's peak RSS does not grow by the chunk's size."""

import base64
import hashlib
import hmac
import json
import os
import sys
import tempfile
import socket
import time
import unittest

import jwt
import redis
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import RawConn, Server, ServerError, poll, proc_status, reset_peak  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
WRONGPASS = "WRONGPASS invalid username-password pair or user is disabled."
NOAUTH = "NOAUTH Authentication required."
ISSUER, AUDIENCE = "https://idp.example", "enclaveai"


def linear_onnx():
    with open(os.path.join(HERE, "models", "linear.onnx"), "rb") as f:
        return f.read()


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class Keys:
    """Two signing keys (rotation) whose public halves go in one PEM file,
    and a key the server does not know."""

    def __init__(self):
        self.k1, self.k2, self.other = (ec.generate_private_key(ec.SECP256R1()) for _ in range(3))
        self.dir = tempfile.mkdtemp(prefix="enclaveai-jwt-")
        self.pem = b"".join(self.public_pem(k) for k in (self.k1, self.k2))
        self.path = os.path.join(self.dir, "jwt.pem")
        with open(self.path, "wb") as f:
            f.write(self.pem)

    @staticmethod
    def public_pem(k):
        return k.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo)

    def token(self, sub, key=None, exp=3600, **claims):
        now = int(time.time())
        body = {"sub": sub, "iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + exp}
        body.update(claims)
        body = {k: v for k, v in body.items() if v is not None}
        return jwt.encode(body, key or self.k1, algorithm="ES256")

    def server_args(self, *more):
        return ("--jwt-public-key-file", self.path, "--jwt-issuer", ISSUER,
                "--jwt-audience", AUDIENCE, "--jwt-leeway", "1") + more


class TokenAuthTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.keys = Keys()
        # olivia and oscar (an admin) are switched off; ops is an admin.
        cls.srv = Server(*cls.keys.server_args("--max-models", "1", "--user", "olivia", "off", ">po",
                                               "--user", "oscar", "off", ">pz", "+@admin",
                                               "--user", "ops", "on", ">pops", "+@admin")).start()
        cls.tokens = []

    @classmethod
    def tearDownClass(cls):
        err = cls.srv.stderr()
        cls.srv.stop()
        # No token, nor any part of one, is ever logged.
        for t in cls.tokens:
            for part in t.split("."):
                assert len(part) < 16 or part not in err, "a token part reached the log"

    def token(self, *a, **kw):
        t = self.keys.token(*a, **kw)
        self.tokens.append(t)
        return t

    def raw(self):
        c = self.srv.raw()
        self.addCleanup(c.close)
        return c

    def tenant(self, sub):
        c = self.srv.client(username=sub, password=self.token(sub))
        self.addCleanup(c.close)
        for key in c.scan_iter():
            try:
                c.delete(key)
            except redis.exceptions.NoPermissionError:
                pass
        return c

    def assertRefused(self, token, user=None):
        c = self.raw()
        args = ("AUTH", user, token) if user else ("AUTH", token)
        reply = c.cmd(*args)
        self.assertIsInstance(reply, ServerError)
        self.assertEqual(reply.text, WRONGPASS)
        self.assertEqual(c.cmd("ACL", "WHOAMI"), b"default")

    def test_valid_token_forms(self):
        t = self.token("alice")
        c = self.raw()
        self.assertEqual(c.cmd("AUTH", t), "OK")
        self.assertEqual(c.cmd("ACL", "WHOAMI"), b"alice")
        self.assertEqual(c.cmd("AUTH", "bob", self.token("bob")), "OK")
        self.assertEqual(c.cmd("ACL", "WHOAMI"), b"bob")
        hello = c.cmd("HELLO", "3", "AUTH", "alice", t)
        self.assertEqual(hello[b"proto"], 3)
        self.assertEqual(c.cmd("ACL", "WHOAMI"), b"alice")
        # Rotation: a token signed by the second key passes too.
        self.assertEqual(c.cmd("AUTH", self.token("carol", key=self.keys.k2)), "OK")
        # redis-py's own AUTH at connect.
        r = self.srv.client(username="dave", password=self.token("dave"))
        self.assertEqual(r.acl_whoami(), "dave")
        self.assertIn(b"user=dave", r.execute_command("CLIENT", "INFO"))

    def test_refused_tokens(self):
        k = self.keys
        pub_pem = Keys.public_pem(k.k1)
        header = lambda alg: b64(json.dumps({"alg": alg, "typ": "JWT"}).encode())  # noqa: E731
        body = b64(json.dumps({"sub": "alice", "iss": ISSUER, "aud": AUDIENCE,
                               "exp": int(time.time()) + 3600}).encode())
        hs_input = header("HS256") + "." + body
        hs256 = hs_input + "." + b64(hmac.new(pub_pem, hs_input.encode(), hashlib.sha256).digest())
        rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        good = self.token("alice")
        tampered_body = b64(json.dumps({"sub": "mallory", "iss": ISSUER, "aud": AUDIENCE,
                                        "exp": int(time.time()) + 3600}).encode())
        head, _, sig = good.split(".")
        cases = {
            "expired": self.token("alice", exp=-120),
            "not yet valid": self.token("alice", nbf=int(time.time()) + 120),
            "no exp": jwt.encode({"sub": "alice", "iss": ISSUER, "aud": AUDIENCE}, k.k1, algorithm="ES256"),
            "wrong key": self.token("alice", key=k.other),
            "alg none": header("none") + "." + body + ".",
            "alg none with a signature": header("none") + "." + body + "." + b64(b"x"),
            "HS256 keyed with the public key": hs256,
            "RS256": jwt.encode({"sub": "alice", "iss": ISSUER, "aud": AUDIENCE,
                                 "exp": int(time.time()) + 3600}, rsa_key, algorithm="RS256"),
            "wrong audience": self.token("alice", aud="someone-else"),
            "wrong issuer": self.token("alice", iss="https://evil.example"),
            "tampered payload": head + "." + tampered_body + "." + sig,
            "sub default": self.token("default"),
            # off holds for tokens too (security review: both logged in).
            "a user switched off": self.token("olivia"),
            "an admin switched off": self.token("oscar"),
        }
        self.tokens.extend(cases.values())
        for name, t in cases.items():
            with self.subTest(name):
                self.assertRefused(t)
                self.assertRefused(t, user="olivia" if name == "a user switched off" else
                                   "oscar" if name == "an admin switched off" else "alice")
        # A valid token for another user than AUTH names.
        self.assertRefused(good, user="bob")
        # HELLO AUTH: the same single reply.
        c = self.raw()
        reply = c.cmd("HELLO", "3", "AUTH", "alice", cases["expired"])
        self.assertEqual(reply.text, WRONGPASS)

    def test_token_expiry_ends_the_login(self):
        c = self.raw()
        # exp 2 s from now, jwt-leeway 1: the login lapses within 4 s.
        self.assertEqual(c.cmd("AUTH", self.token("alice", exp=2)), "OK")
        self.assertEqual(c.cmd("PING"), "PONG")
        poll(lambda: isinstance(c.cmd("PING"), ServerError), timeout=6, interval=0.2, what="the login to lapse")
        self.assertEqual(c.cmd("AI.TENSORGET", "x", "META").text, NOAUTH)
        self.assertEqual(c.cmd("AUTH", self.token("alice")), "OK")
        self.assertEqual(c.cmd("PING"), "PONG")

    def test_a_monitor_gets_nothing_once_its_token_lapses(self):
        """MONITOR under a token: its stream stops when the login lapses
        (security review: it went on, other tenants' commands included,
        while the same token got NOAUTH elsewhere)."""
        t = self.token("ops", exp=2)  # exp 2 s from now, jwt-leeway 1
        mon, probe, other = self.raw(), self.raw(), self.raw()
        self.assertEqual(mon.cmd("AUTH", t), "OK")
        self.assertEqual(probe.cmd("AUTH", t), "OK")
        self.assertEqual(mon.cmd("MONITOR"), "OK")
        self.assertEqual(other.cmd("ECHO", "before-lapse"), b"before-lapse")
        self.assertIn('"before-lapse"', mon.read_reply())
        poll(lambda: isinstance(probe.cmd("PING"), ServerError), timeout=6, interval=0.2, what="the login to lapse")
        self.assertEqual(other.cmd("ECHO", "after-lapse"), b"after-lapse")
        mon.sock.settimeout(1.5)
        lines = []  # the probe's PINGs from before the lapse come first
        try:
            while True:
                lines.append(mon.read_reply())
        except socket.timeout:
            pass
        self.assertFalse([ln for ln in lines if "after-lapse" in ln], lines)

    def test_two_tenants(self):
        alice, bob = self.tenant("alice"), self.tenant("bob")
        model = linear_onnx()
        self.assertEqual(alice.execute_command("AI.MODELSTORE", "am", "ONNX", "CPU", "BLOB", model), b"OK")
        self.assertEqual(bob.execute_command("AI.MODELSTORE", "bm", "ONNX", "CPU", "BLOB", model), b"OK")
        alice.execute_command("AI.TENSORSET", "ax", "FLOAT", 1, 4, "VALUES", 1, 2, 3, 4)
        for cmd in (("AI.MODELEXECUTE", "am", "INPUTS", 1, "ax", "OUTPUTS", 1, "by"),
                    ("AI.TENSORGET", "ax", "VALUES"), ("AI.MODELDEL", "am"), ("DEL", "ax")):
            with self.assertRaises(redis.exceptions.NoPermissionError):
                bob.execute_command(*cmd)
        self.assertEqual(alice.execute_command("AI.MODELEXECUTE", "am", "INPUTS", 1, "ax", "OUTPUTS", 1, "ay"), b"OK")
        self.assertEqual(alice.execute_command("AI._MODELSCAN")[0][0], b"am")
        # max-models 1 is per tenant: alice's second model evicts her first,
        # never bob's.
        self.assertEqual(alice.execute_command("AI.MODELSTORE", "am2", "ONNX", "CPU", "BLOB", model), b"OK")
        self.assertEqual(alice.exists("am"), 0)
        self.assertEqual(bob.exists("bm"), 1)
        self.assertEqual([m[0] for m in bob.execute_command("AI._MODELSCAN")], [b"bm"])


class UploadPolicyTest(unittest.TestCase):
    """Each policy on a server of its own."""

    def setUp(self):
        self.keys = Keys()

    def start(self, *args):
        srv = Server(*self.keys.server_args(*args)).start()
        self.addCleanup(srv.stop)
        return srv

    def assertRefusedBeforeBuffering(self, srv, client, exc, text, key="m"):
        # 2 x 200 MB chunks: the first one's header is enough to refuse, so
        # the peak RSS does not grow by them.
        pid = srv.proc.pid
        reset_peak(pid)
        before = proc_status(pid, "VmHWM")
        chunk = bytes(200 << 20)
        with self.assertRaises(exc) as cm:
            client.execute_command("AI.MODELSTORE", key, "ONNX", "CPU", "BLOB", chunk, chunk)
        self.assertEqual(str(cm.exception), text)
        self.assertLess(proc_status(pid, "VmHWM") - before, 100 << 20)
        self.assertTrue(client.ping())

    def test_modelstore_requires_auth(self):
        srv = self.start("--modelstore-requires-auth", "yes")
        anon = srv.client()
        self.assertRefusedBeforeBuffering(srv, anon, redis.exceptions.NoPermissionError,
                                          "model uploads need an authenticated user (modelstore-requires-auth yes)")
        with self.assertRaises(redis.exceptions.NoPermissionError):
            anon.execute_command("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", linear_onnx())
        alice = srv.client(password=self.keys.token("alice"))
        self.assertEqual(alice.execute_command("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", linear_onnx()), b"OK")

    def test_allow_modelstore_no(self):
        path = os.path.join(HERE, "models", "linear.onnx")
        srv = self.start("--allow-modelstore", "no", "--loadmodel", "fixed", "ONNX", "CPU", path)
        alice = srv.client(password=self.keys.token("alice"))
        text = "model uploads and deletes are disabled on this server (allow-modelstore no)"
        self.assertRefusedBeforeBuffering(srv, alice, redis.exceptions.ResponseError, text)
        for cmd in (("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", linear_onnx()),
                    ("AI.MODELSET", "m", "ONNX", "CPU", "BLOB", linear_onnx()),
                    ("AI.MODELDEL", "fixed")):
            with self.assertRaises(redis.exceptions.ResponseError) as cm:
                srv.client().execute_command(*cmd)
            self.assertEqual(str(cm.exception), text)
        for cmd in (("DEL", "fixed"), ("UNLINK", "fixed"), ("RENAME", "fixed", "other"),
                    ("EXPIRE", "fixed", 1), ("PERSIST", "fixed"), ("FLUSHALL",)):
            with self.assertRaises(redis.exceptions.ResponseError) as cm:
                srv.client().execute_command(*cmd)
            self.assertEqual(str(cm.exception), text)
        # The loadmodel model is there and runs.
        r = srv.client()
        r.execute_command("AI.TENSORSET", "x", "FLOAT", 1, 4, "VALUES", 1, 2, 3, 4)
        self.assertEqual(r.execute_command("AI.MODELEXECUTE", "fixed", "INPUTS", 1, "x", "OUTPUTS", 1, "y"), b"OK")

    def test_max_model_bytes_per_user(self):
        model = linear_onnx()
        srv = self.start("--max-model-bytes-per-user", str(len(model) * 3 // 2))
        alice = srv.client(password=self.keys.token("alice"))
        bob = srv.client(password=self.keys.token("bob"))
        text = "model upload refused: the user's models would pass max-model-bytes-per-user"
        self.assertEqual(alice.execute_command("AI.MODELSTORE", "a1", "ONNX", "CPU", "BLOB", model), b"OK")
        with self.assertRaises(redis.exceptions.ResponseError) as cm:
            alice.execute_command("AI.MODELSTORE", "a2", "ONNX", "CPU", "BLOB", model)
        self.assertEqual(str(cm.exception), text)
        self.assertRefusedBeforeBuffering(srv, alice, redis.exceptions.ResponseError, text, key="a3")
        # Replacing her own model does not count the one it replaces; bob
        # has a budget of his own.
        self.assertEqual(alice.execute_command("AI.MODELSTORE", "a1", "ONNX", "CPU", "BLOB", model), b"OK")
        self.assertEqual(bob.execute_command("AI.MODELSTORE", "b1", "ONNX", "CPU", "BLOB", model), b"OK")
        # Freeing room lets her upload again.
        self.assertEqual(alice.execute_command("AI.MODELDEL", "a1"), b"OK")
        self.assertEqual(alice.execute_command("AI.MODELSTORE", "a2", "ONNX", "CPU", "BLOB", model), b"OK")
        # Stores queued in one transaction compile before any is stored:
        # the budget is checked again as each is stored.
        self.assertEqual(bob.execute_command("AI.MODELDEL", "b1"), b"OK")
        p = bob.pipeline(transaction=True)
        for k in ("b2", "b3"):
            p.execute_command("AI.MODELSTORE", k, "ONNX", "CPU", "BLOB", model)
        res = p.execute(raise_on_error=False)
        self.assertEqual(res[0], b"OK")
        self.assertIn(text, str(res[1]))
        self.assertEqual(bob.exists("b2", "b3"), 1)

    def test_bad_key_file_stops_the_start(self):
        bad = os.path.join(self.keys.dir, "rsa.pem")
        with open(bad, "wb") as f:
            f.write(rsa.generate_private_key(public_exponent=65537, key_size=2048).public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
        with self.assertRaises(RuntimeError) as cm:
            Server("--jwt-public-key-file", bad).start()
        self.assertIn("not an ECDSA P-256 key", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
