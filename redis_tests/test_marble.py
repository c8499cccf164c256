"""Black-box tests of marble mode (issue 14): the server run as a MarbleRun
marble takes its TLS certificate and its seal key from the environment the
Coordinator sets, so clients verify it through the Coordinator's root CA and
every replica reads the others' snapshots. The Coordinator is played here
by a test CA (root, intermediate, a leaf per marble) and a shared secret.

    make build
    cd redis_tests && /usr/bin/python3 -m unittest test_marble -v
"""

import contextlib
import datetime
import ipaddress
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import unittest

import redis
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import REPO, Server, free_port, server_binary  # noqa: E402

SECRET = "7f" * 32


def pem(cert):
    return cert.public_bytes(serialization.Encoding.PEM)


def make_cert(name, key, issuer_cert, issuer_key, ca, sans=()):
    now = datetime.datetime.now(datetime.timezone.utc)
    b = (x509.CertificateBuilder()
         .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
         .issuer_name(issuer_cert.subject if issuer_cert is not None else
                      x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
         .public_key(key.public_key())
         .serial_number(x509.random_serial_number())
         .not_valid_before(now - datetime.timedelta(hours=1))
         .not_valid_after(now + datetime.timedelta(days=1))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if sans:
        b = b.add_extension(x509.SubjectAlternativeName(list(sans)), critical=False)
    return b.sign(issuer_key or key, hashes.SHA256())


class Coordinator:
    """A stand-in for MarbleRun's Coordinator: a root CA, the Coordinator's
    intermediate, and a leaf certificate per marble, as the
    MARBLE_PREDEFINED_* variables carry them."""

    def __init__(self):
        self.root_key = ec.generate_private_key(ec.SECP256R1())
        self.root = make_cert("MarbleRun Coordinator root", self.root_key, None, None, True)
        self.int_key = ec.generate_private_key(ec.SECP256R1())
        self.intermediate = make_cert("MarbleRun Coordinator", self.int_key, self.root, self.root_key, True)
        self.dir = tempfile.mkdtemp(prefix="enclaveai-marble-")
        self.root_file = os.path.join(self.dir, "root.pem")
        with open(self.root_file, "wb") as f:
            f.write(pem(self.root))

    def env(self, name, secret=SECRET):
        key = ec.generate_private_key(ec.SECP256R1())
        leaf = make_cert(name, key, self.intermediate, self.int_key, False,
                         [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
        self.last_leaf = leaf
        return {
            "MARBLE_PREDEFINED_MARBLE_CERTIFICATE_CHAIN": (pem(leaf) + pem(self.intermediate)).decode(),
            "MARBLE_PREDEFINED_PRIVATE_KEY": key.private_bytes(serialization.Encoding.PEM,
                                                               serialization.PrivateFormat.PKCS8,
                                                               serialization.NoEncryption()).decode(),
            "MARBLE_PREDEFINED_ROOT_CA": pem(self.root).decode(),
            "ENCLAVEAI_MARBLE_SEAL_KEY": secret,
        }


@contextlib.contextmanager
def environ(env):
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class MarbleTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.coord = Coordinator()

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.coord.dir, ignore_errors=True)

    def start(self, name, *args, secret=SECRET):
        port = free_port()
        with environ(self.coord.env(name, secret)):
            srv = Server("--marble", "yes", "--tls-port", port, *args).start()
        self.addCleanup(srv.stop)
        srv.tls_port = port
        return srv

    def tls_client(self, srv):
        return redis.Redis(host="127.0.0.1", port=srv.tls_port, ssl=True, ssl_cert_reqs="required",
                           ssl_ca_certs=self.coord.root_file, ssl_check_hostname=True, socket_timeout=10)

    def test_clients_verify_the_marble_through_the_coordinators_root(self):
        srv = self.start("marble-0")
        r = self.tls_client(srv)
        self.assertTrue(r.ping())
        # The certificate is the one the Coordinator issued, and AI.ATTEST
        # binds the evidence to its key.
        attest = r.execute_command("AI.ATTEST", b"n" * 32)
        fields = dict(zip(attest[0::2], attest[1::2]))
        want = self.coord.last_leaf.public_key().public_bytes(serialization.Encoding.DER,
                                                             serialization.PublicFormat.SubjectPublicKeyInfo)
        self.assertEqual(fields[b"tls_public_key"], want)
        info = r.info("enclave")
        self.assertEqual(info["seal_policy"], "marble")
        self.assertIn("MarbleRun secret", info["seal_key_source"])
        # A client that trusts another root refuses the server.
        other = ssl.create_default_context(cafile=ssl.get_default_verify_paths().cafile) \
            if ssl.get_default_verify_paths().cafile else None
        if other is not None:
            with self.assertRaises(redis.ConnectionError):
                redis.Redis(host="127.0.0.1", port=srv.tls_port, ssl=True, ssl_cert_reqs="required",
                            ssl_ca_certs=ssl.get_default_verify_paths().cafile).ping()

    def test_replicas_read_each_others_snapshots_and_a_stranger_cannot(self):
        data = tempfile.mkdtemp(prefix="enclaveai-marble-data-")
        self.addCleanup(shutil.rmtree, data, True)
        first = self.start("marble-0", "--dir", data)
        r = first.client()
        r.execute_command("AI.TENSORSET", "t", "FLOAT", 2, "VALUES", 1, 2)
        r.execute_command("SAVE")
        r.execute_command("AI.TENSORSET", "logged", "FLOAT", 1, "VALUES", 3)  # in the log only
        first.stop()
        # Another replica, with its own certificate and the shared secret,
        # reads the snapshot and the log.
        second = self.start("marble-1", "--dir", data)
        r = second.client()
        self.assertEqual(r.execute_command("AI.TENSORGET", "t", "VALUES"), [b"1", b"2"])
        self.assertEqual(r.execute_command("AI.TENSORGET", "logged", "VALUES"), [b"3"])
        second.stop()
        # Another secret cannot read them.
        port = free_port()
        with environ(self.coord.env("stranger", "01" * 32)):
            stranger = Server("--marble", "yes", "--tls-port", port, "--dir", data)
            with self.assertRaises(RuntimeError) as cm:
                stranger.start()
        self.assertIn("fails its MAC (another seal key, or tampering)", str(cm.exception))

    def test_the_deploy_manifest_configures_a_serving_marble(self):
        """deploy/marblerun-manifest.json: its config file (the secrets'
        templates filled as the Coordinator fills them) starts a marble
        that serves TLS and asks for the password it names."""
        import json
        import re
        with open(os.path.join(REPO, "deploy", "marblerun-manifest.json")) as f:
            manifest = json.load(f)
        params = manifest["Marbles"]["enclaveai-node"]["Parameters"]
        secrets = manifest["Secrets"]
        self.assertTrue(secrets["enclaveai_seal_key"]["Shared"], "every replica needs the same seal key")
        self.assertEqual(secrets["enclaveai_seal_key"]["Size"], 256)
        filled = {n: os.urandom(s["Size"] // 8).hex() for n, s in secrets.items()}
        fill = lambda t: re.sub(r"\{\{ hex \.Secrets\.(\w+) \}\}", lambda m: filled[m.group(1)], t)
        conf_path, conf = next(iter(params["Files"].items()))
        self.assertEqual(params["Argv"], ["enclaveai-server", conf_path])
        env = {k: fill(v) for k, v in params["Env"].items()}
        self.assertEqual(set(env), {"ENCLAVEAI_MARBLE_SEAL_KEY"})
        # The pod's addresses and directories, made local.
        port, tls_port, data = free_port(), free_port(), tempfile.mkdtemp(prefix="enclaveai-marble-data-")
        self.addCleanup(shutil.rmtree, data, True)
        conf = fill(conf).replace("bind 0.0.0.0", "bind 127.0.0.1").replace("port 6379", "port %d" % port) \
            .replace("tls-port 6380", "tls-port %d" % tls_port).replace("dir /data", "dir " + data)
        path = os.path.join(data, "enclaveai.conf")
        with open(path, "w") as f:
            f.write(conf)
        menv = dict(self.coord.env("enclaveai-0"))
        menv.update(env)
        with environ(menv):
            p = subprocess.Popen([server_binary(), path], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.addCleanup(p.wait)
        self.addCleanup(p.kill)
        r = redis.Redis(host="127.0.0.1", port=tls_port, ssl=True, ssl_cert_reqs="required",
                        ssl_ca_certs=self.coord.root_file, ssl_check_hostname=True, socket_timeout=10,
                        password=filled["enclaveai_password"])
        for _ in range(300):
            try:
                self.assertTrue(r.ping())
                break
            except redis.ConnectionError:
                import time
                time.sleep(0.02)
        else:
            self.fail("the manifest's marble did not serve")
        with self.assertRaises(redis.ResponseError) as cm:
            redis.Redis(host="127.0.0.1", port=port, password="wrong").ping()
        self.assertIn("WRONGPASS", str(cm.exception))
        self.assertEqual(r.info("cluster")["cluster_enabled"], 1)
        self.assertEqual(r.info("enclave")["seal_policy"], "marble")

    def test_marble_mode_needs_its_environment_and_tls(self):
        for args, env, text in (
            (["--marble", "yes"], {}, "marble yes needs tls-port"),
            (["--marble", "yes", "--tls-port", str(free_port())], {"ENCLAVEAI_MARBLE_SEAL_KEY": ""},
             "ENCLAVEAI_MARBLE_SEAL_KEY is not set"),
        ):
            d = tempfile.mkdtemp(prefix="enclaveai-test-")
            self.addCleanup(shutil.rmtree, d, True)
            e = {k: v for k, v in os.environ.items() if not k.startswith("MARBLE_") and k != "ENCLAVEAI_MARBLE_SEAL_KEY"}
            e.update(env)
            p = subprocess.run([server_binary(), "--port", str(free_port()), "--dir", d] + args, env=e,
                               capture_output=True, text=True, timeout=30)
            self.assertNotEqual(p.returncode, 0)
            self.assertIn(text, p.stderr)


if __name__ == "__main__":
    unittest.main()
