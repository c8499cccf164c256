"""Black-box tests of the Python client package clients/python (enclaveai)
against the real server: attestation (simulated evidence refused by
default, accepted only when allowed, bound to the TLS key), uploads from a
path or bytes with the server's digest checked, streamed with bounded
memory, runs on numpy, torch and lists, the model list, info and delete;
and that the package installs with pip into a venv without the network.

    make build models
    /usr/bin/python3 -m unittest redis_tests.test_client -v
"""

import hashlib
import os
import time
import subprocess
import sys
import tempfile
import unittest
import warnings

import numpy as np
import redis

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "models"))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "clients", "python"))
from harness import REPO, Server, free_port, proc_status, recording_listener, reset_peak, server_binary  # noqa: E402
import enclaveai  # noqa: E402
from enclaveai import attest as eattest  # noqa: E402

MODELS = os.path.join(HERE, "models")
LINEAR = os.path.join(MODELS, "linear.onnx")
DEV = enclaveai.Policy(allow_simulated=True)
MiB = 1 << 20


def start_with_tls():
    """A server with a TLS port too (retried if that port was taken)."""
    for _ in range(3):
        tls_port = free_port()
        srv = Server("--tls-port", tls_port)
        try:
            return srv.start(), tls_port
        except RuntimeError as e:
            if "address already in use" not in str(e):
                raise
    raise RuntimeError("no free TLS port")


class AttestBeforeAuthTest(unittest.TestCase):
    def test_the_password_goes_only_to_an_attested_server(self):
        """The client checks the evidence before redis-py's AUTH or HELLO:
        a server that cannot attest never gets the password (the client
        sent AUTH first, and the server asked for it before AI.ATTEST)."""
        for protocol in (2, 3):
            with self.subTest(protocol=protocol):
                port, got = recording_listener(self)
                with self.assertRaises((redis.ResponseError, enclaveai.AttestationError)):
                    enclaveai.Client("127.0.0.1", port, attest=DEV, password="sekret", protocol=protocol)
                sent = b"".join(got)
                self.assertTrue(sent.startswith(b"*2\r\n$9\r\nAI.ATTEST\r\n"), sent[:80])
                self.assertNotIn(b"sekret", sent)
                self.assertNotIn(b"AUTH", sent)

    def test_a_server_with_a_password_attests_first(self):
        """AI.ATTEST is answered before AUTH (other commands are not), and
        the client attests, then authenticates, with either protocol."""
        srv = Server(password="pw").start()
        self.addCleanup(srv.stop)
        c = srv.raw(auth=False)
        rep = c.cmd("AI.ATTEST", os.urandom(32))
        self.assertIsInstance(rep, list)
        self.assertIn(b"evidence", rep)
        self.assertTrue(str(c.cmd("AI.TENSORGET", "x", "META")).startswith("NOAUTH"))
        for protocol in (2, 3):
            with self.subTest(protocol=protocol):
                cl = enclaveai.Client("127.0.0.1", srv.port, attest=DEV, password="pw", protocol=protocol)
                self.addCleanup(cl.close)
                self.assertIsNotNone(cl.attestation)
                cl.upload_model(LINEAR, key="lin%d" % protocol, progress=False)
                self.assertEqual(cl.run_model("lin%d" % protocol, [np.ones((2, 4), np.float32)]).as_numpy().shape, (2, 3))
        with self.assertRaisesRegex(redis.ResponseError, "WRONGPASS"):
            enclaveai.Client("127.0.0.1", srv.port, attest=DEV, password="wrong")
        # With health checks on, redis-py would PING before AI.ATTEST, and
        # before AUTH that is NOAUTH (diff review).
        cl = enclaveai.Client("127.0.0.1", srv.port, attest=DEV, password="pw", health_check_interval=30)
        self.addCleanup(cl.close)
        self.assertTrue(cl.redis.ping())

    def test_unauthenticated_attests_are_bounded(self):
        """Before AUTH, beyond a connection's first, clients share
        attest-rate AI.ATTEST a second (in SGX each is a quote); past it
        they are refused until the budget refills, and INFO counts the
        refusals. An authenticated client is not counted, and attest-rate
        0 lifts the bound."""
        srv = Server("--attest-rate", "3", password="pw").start()
        self.addCleanup(srv.stop)
        c = srv.raw(auth=False)
        replies = [c.cmd("AI.ATTEST", os.urandom(32)) for _ in range(7)]
        refused = [r for r in replies if "attest-rate" in str(r)]
        self.assertGreaterEqual(len(refused), 2, replies)
        self.assertIsInstance(replies[0], list)
        # A connection's first AI.ATTEST is answered whatever the budget:
        # one connection asking in a loop kept every client from
        # connecting (diff review).
        for _ in range(3):
            self.assertIsInstance(srv.raw(auth=False).cmd("AI.ATTEST", os.urandom(32)), list)
        cl = enclaveai.Client("127.0.0.1", srv.port, attest=DEV, password="pw")
        self.addCleanup(cl.close)
        self.assertIsNotNone(cl.attestation)
        admin = srv.client()
        for _ in range(10):
            self.assertIn(b"evidence", admin.execute_command("AI.ATTEST", os.urandom(32)))
        self.assertGreaterEqual(int(admin.info("enclave")["attest_refused"]), 2)
        admin.config_set("attest-rate", 0)
        for _ in range(10):
            self.assertIsInstance(c.cmd("AI.ATTEST", os.urandom(32)), list)
        # The budget refills at the rate.
        admin.config_set("attest-rate", 3)
        time.sleep(1.1)
        self.assertIsInstance(c.cmd("AI.ATTEST", os.urandom(32)), list)


class RedirectTest(unittest.TestCase):
    def test_redirections_of_every_redis_py(self):
        """Cluster redirections as redis-py 4.3 raises them (a plain
        ResponseError, "MOVED 3300 host:port") and as 6 and later do (the
        classes, the word taken off the text): the client follows both
        (review: the word check alone missed them on a pip install)."""
        from redis import exceptions
        c = enclaveai.Client.__new__(enclaveai.Client)
        refreshed = []
        c._slots = type("Slots", (), {"refresh": staticmethod(lambda: refreshed.append(1))})()
        c._at = lambda host, port: (host, port)
        self.assertEqual(c._redirect(exceptions.MovedError("3300 127.0.0.1:7001")), ("MOVED", ("127.0.0.1", 7001)))
        self.assertEqual(c._redirect(exceptions.ResponseError("MOVED 3300 127.0.0.1:7003")),
                         ("MOVED", ("127.0.0.1", 7003)))
        self.assertEqual(refreshed, [1, 1])  # MOVED reads the slot map again
        self.assertEqual(c._redirect(exceptions.AskError("3300 127.0.0.1:7002")), ("ASK", ("127.0.0.1", 7002)))
        self.assertEqual(c._redirect(exceptions.TryAgainError("Multiple keys request")), ("TRYAGAIN", None))
        self.assertIsNone(c._redirect(exceptions.ResponseError("ERR tensor key is empty")))
        self.assertEqual(refreshed, [1, 1])


class ReconnectTest(unittest.TestCase):
    def test_a_new_connection_is_attested_before_it_carries_a_command(self):
        """redis-py opens a new connection by itself after a drop: the
        client attests it again before anything goes on it, AUTH included
        (tools review: after the server was replaced, an upload went to the
        new one unchecked)."""
        srv = Server(password="hunter2-pw").start()
        port = srv.port
        c = enclaveai.Client("127.0.0.1", port, attest=DEV, password="hunter2-pw")
        self.addCleanup(c.close)
        c.upload_model(LINEAR, key="lin", progress=False)
        srv.stop()
        _, got = recording_listener(self, port)
        for _ in range(2):  # the first call finds the old connection gone
            with self.assertRaises((redis.ConnectionError, redis.ResponseError, enclaveai.AttestationError)):
                c.upload_model(LINEAR, key="secret", progress=False)
        sent = b"".join(got)
        self.assertIn(b"AI.ATTEST", sent)
        self.assertNotIn(b"AI.MODELSTORE", sent)
        self.assertNotIn(b"secret", sent)
        self.assertNotIn(b"hunter2-pw", sent)


class ClientTest(unittest.TestCase):
    PROTOCOL = 2

    @classmethod
    def setUpClass(cls):
        cls.srv, cls.tls_port = start_with_tls()

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()

    def client(self, **kw):
        kw.setdefault("attest", DEV)
        kw.setdefault("protocol", self.PROTOCOL)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", enclaveai.SimulatedAttestationWarning)
            c = enclaveai.Client("127.0.0.1", self.srv.port, **kw)
        self.addCleanup(c.close)
        return c

    # -- attestation -------------------------------------------------------

    def test_simulated_evidence_refused_by_default_before_anything_is_sent(self):
        before = self.srv.client().dbsize()
        with self.assertRaises(enclaveai.AttestationError) as cm:
            enclaveai.Client("127.0.0.1", self.srv.port, protocol=self.PROTOCOL)
        self.assertIn("SIMULATED", str(cm.exception))
        self.assertIn("allow_simulated=True", str(cm.exception))
        self.assertEqual(self.srv.client().dbsize(), before)

    def test_simulated_evidence_accepted_when_allowed_loudly(self):
        with self.assertWarns(enclaveai.SimulatedAttestationWarning):
            c = enclaveai.Client("127.0.0.1", self.srv.port, attest=DEV, protocol=self.PROTOCOL)
        self.addCleanup(c.close)
        self.assertEqual(c.attestation.kind, "simulated")

    def test_tls_binds_the_evidence_to_this_connections_key(self):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", enclaveai.SimulatedAttestationWarning)
            c = enclaveai.Client("127.0.0.1", self.tls_port, tls=True, attest=DEV, protocol=self.PROTOCOL)
        self.addCleanup(c.close)
        self.assertEqual(c.attestation.kind, "simulated")
        mid, _ = c.upload_model(LINEAR, key="tls_lin", progress=False)
        self.assertEqual(c.run_model(mid, [[1, 2, 3, 4]]).as_flat(), [7.0, 9.0, 11.0])

    def test_evidence_for_another_nonce_or_key_is_refused(self):
        nonce, key = os.urandom(32), b"key"
        report = bytearray(eattest.SIM_SIZE)
        report[:16] = eattest.SIM_MARKER
        report[16:48] = eattest.report_data(nonce, key)
        report[148] = 1
        ev = eattest.MAGIC + bytes([1, 2]) + len(report).to_bytes(4, "big") + bytes(report)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", enclaveai.SimulatedAttestationWarning)
            self.assertEqual(eattest.verify(ev, nonce, key, DEV).kind, "simulated")
        for bad_nonce, bad_key, bad_ev, text in (
                (os.urandom(32), key, ev, "does not match"),
                (nonce, b"other", ev, "does not match"),
                (nonce, key, ev[:-1], "malformed"),
                (nonce, key, b"EAIEVID\x00\x02" + ev[9:], "version")):
            with self.assertRaises(enclaveai.AttestationError) as cm:
                eattest.verify(bad_ev, bad_nonce, bad_key, DEV)
            self.assertIn(text, str(cm.exception))
        with self.assertRaises(enclaveai.AttestationError) as cm:
            eattest.verify(ev, nonce, key, enclaveai.Policy())
        self.assertIn("SIMULATED", str(cm.exception))

    def test_speaks_the_protocol_asked(self):
        c = self.client()
        hello = c.redis.execute_command("HELLO")
        self.assertEqual(isinstance(hello, dict), self.PROTOCOL == 3, hello)
        fields = hello if isinstance(hello, dict) else dict(zip(hello[0::2], hello[1::2]))
        self.assertEqual(fields[b"proto"], self.PROTOCOL)

    # -- models ------------------------------------------------------------

    def test_upload_from_path_gets_a_uuid_and_the_files_sha256(self):
        c = self.client()
        mid, sha = c.upload_model(LINEAR, progress=False)
        with open(LINEAR, "rb") as f:
            self.assertEqual(sha, hashlib.sha256(f.read()).hexdigest())
        self.assertEqual(len(mid), 36, mid)
        info = c.model_info(mid)
        self.assertEqual(info["sha256"], sha)
        self.assertEqual(info["inputs"][0]["name"], "x")
        self.assertIn({"key": mid, "tag": ""}, c.list_models())
        c.delete_model(mid)
        self.assertNotIn(mid, [m["key"] for m in c.list_models()])

    def test_upload_bytes_in_small_chunks_with_key_and_name(self):
        c = self.client()
        with open(LINEAR, "rb") as f:
            data = f.read()
        mid, sha = c.upload_model(data, key="lin", name="linear v1", chunk_size=100, progress=False)
        self.assertEqual(mid, "lin")
        info = c.model_info("lin")
        self.assertEqual((info["tag"], info["size"], info["sha256"]), ("linear v1", len(data), sha))

    def test_run_with_numpy_torch_lists_and_by_sha256(self):
        import torch
        c = self.client()
        mid, sha = c.upload_model(LINEAR, key="run_lin", progress=False)
        want = np.array([[7, 9, 11], [8.8, 11.2, 13.6]], dtype=np.float32)
        x = np.array([[1, 2, 3, 4], [2, 3, 4, 5]], dtype=np.float32)
        # A list of one array is the one input of a one-input model (tools
        # review: it was read as a 3-D array).
        for inp in (x, torch.from_numpy(x), x.tolist(), {"x": x}, [x], (torch.from_numpy(x),)):
            out = c.run_model(mid, inp)
            np.testing.assert_allclose(out.as_numpy(), want, rtol=1e-5)
            np.testing.assert_allclose(out["y"].as_torch().numpy(), want, rtol=1e-5)
            self.assertEqual(out[0].shape, [2, 3])
        self.assertEqual(c.run_model(sha, [[1, 2, 3, 4]]).as_flat(), [7.0, 9.0, 11.0])
        self.assertEqual(self.srv.client().keys("in*"), [], "a run leaves nothing in the keyspace")
        with self.assertRaises(Exception):
            c.run_model("no-such-model", x)
        # An input the model refuses raises the server's error (it was a
        # KeyError of the reply's parsing: README check): ONNX Runtime's
        # text, or the pure-Go engine's (make test-nocgo).
        with self.assertRaisesRegex(redis.ResponseError, "invalid dimensions for input|invalid shape"):
            c.run_model(mid, [[1.0, 2.0]])

    def test_run_with_strings(self):
        """STRING inputs from lists, str, bytes and object arrays, and
        STRING outputs as bytes (the client could not send them)."""
        if server_binary().endswith("-nocgo"):
            self.skipTest("the pure-Go engine runs no STRING model (test_goengine)")
        c = self.client()
        mid, _ = c.upload_model(os.path.join(MODELS, "string_identity.onnx"), key="run_str", progress=False)
        words = ["a", "h\u00e9llo", "", "z" * 300]
        want = [w.encode() for w in words]
        for inp in (words, np.array(words), np.array(want), np.array(want, dtype=object), [b"a", "h\u00e9llo", b"", "z" * 300]):
            with self.subTest(inp=type(inp).__name__):
                out = c.run_model(mid, inp)
                self.assertEqual(out[0].dtype, "STRING")
                self.assertEqual(out.as_flat(), want)
                self.assertEqual(out.as_numpy().shape, (4,))
        with self.assertRaisesRegex(ValueError, "0 byte"):
            c.run_model(mid, ["a\0b"])
        with self.assertRaises(TypeError):
            c.run_model(mid, ["a"]).as_torch()

    def test_upload_streams_from_the_file_with_bounded_memory(self):
        import huge_model
        with tempfile.NamedTemporaryFile(suffix=".onnx") as f:
            m = huge_model.build(300_000_000)
            f.write(m.data)
            f.flush()
            size = len(m.data)
            m.data.close()
            del m
            c = self.client()
            me = os.getpid()
            base = proc_status(me, "VmRSS")
            reset_peak(me)
            mid, sha = c.upload_model(f.name, key="big", progress=True)
            grew = proc_status(me, "VmHWM") - base
            self.assertEqual(c.model_info("big")["size"], size)
            self.assertLess(grew, 64 * MiB, "the client grew %d MiB uploading %d MiB" % (grew // MiB, size // MiB))
            c.delete_model("big")


class ClientResp3Test(ClientTest):
    """The whole API again over RESP3 (HELLO 3): maps, verbatim strings and
    the rest, through enclaveai.resp3 on Debian's redis-py 4.3.4."""
    PROTOCOL = 3

    @unittest.skip("the same streaming as over RESP2: no reply is read before the last byte is sent")
    def test_upload_streams_from_the_file_with_bounded_memory(self):
        pass


class InstallTest(unittest.TestCase):

    def test_pip_installs_the_package_into_a_venv_offline(self):
        with tempfile.TemporaryDirectory() as d:
            venv = os.path.join(d, "venv")
            subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", venv], check=True)
            p = subprocess.run([os.path.join(venv, "bin", "pip"), "install", "--no-build-isolation", "--no-index",
                                os.path.join(REPO, "clients", "python")], capture_output=True, text=True,
                               cwd=d, timeout=300)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            p = subprocess.run([os.path.join(venv, "bin", "python"), "-c",
                                "import enclaveai, sys; print(enclaveai.__version__, enclaveai.__file__)"],
                               capture_output=True, text=True, cwd=d)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn(venv, p.stdout)


if __name__ == "__main__":
    unittest.main()
