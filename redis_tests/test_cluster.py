"""Redis Cluster mode through unmodified cluster clients (docs/CLUSTER.md).

Three servers with cluster-enabled yes on loopback; the topology is pushed
the way kvrocks-controller pushes it (PEERS.md): lower-case `clusterx
setnodeid` with 40 alphanumeric characters, `clusterx setnodes` with the
version as a bulk string, single slots without a dash, a trailing newline.
Then redis-py's RedisCluster (Debian's python3-redis 4.3.4), redis-cli -c
and redis-cli --cluster check drive them, and the reply shapes are compared
with a real three-node redis-server 7 cluster started here.

    make build models
    cd redis_tests && /usr/bin/python3 -m unittest test_cluster -v
"""

import hashlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest

import redis
from redis.cluster import ClusterNode, RedisCluster

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import CRASH_PATTERNS, RawConn, ServerError, free_port, poll, server_binary  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "clients", "python"))
import enclaveai  # noqa: E402

REDIS_CLI = shutil.which("redis-cli")
REDIS_SERVER = shutil.which("redis-server")
MODELS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models")

# Node ids as kvrocks-controller makes them: 40 characters of [A-Za-z0-9].
IDS = ["kvrocksControllerNodeA" + "0" * 18, "kvrocksControllerNodeB" + "0" * 18,
       "kvrocksControllerNodeC" + "0" * 18]
# The controller's default split, one range moved to show a single slot
# (no dash) and a node with two ranges.
RANGES = ["0-5460 8943", "5461-8942 8944-10921", "10922-16383"]
# Hash tags landing on node 0, 1, 2 ({b} is slot 3300, {c} 7365, {a} 15495).
TAGS = ["{b}", "{c}", "{a}"]


def linear_model():
    with open(os.path.join(MODELS, "linear.onnx"), "rb") as f:
        return f.read()


class Node:
    """One server process whose port and data dir survive a restart."""

    def __init__(self, *args):
        self.dir = tempfile.mkdtemp(prefix="enclaveai-cluster-")
        self.port = free_port()
        self.proc = None
        self.args = list(args)  # more directives, at every start
        self.password = None  # what the tests' own connections AUTH with, if set

    def argv(self, *args):
        return [server_binary(), "--port", str(self.port), "--dir", self.dir, "--cluster-enabled", "yes",
                "--save", ""] + self.args + list(args)

    def start(self, *args):
        with open(os.path.join(self.dir, "server.stderr"), "ab") as errf:
            self.proc = subprocess.Popen(self.argv(*args), cwd=self.dir, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=errf)

        def ready():
            if self.proc.poll() is not None:
                raise AssertionError("server exited: " + self.stderr())
            try:
                with RawConn(self.port, timeout=1) as c:
                    if self.password is not None:
                        c.cmd("AUTH", self.password)
                    return isinstance(c.cmd("DBSIZE"), int)
            except OSError:
                return False
        poll(ready, timeout=10, what="server on port %d" % self.port)

    def start_fails(self, *args):
        """Starts the server expecting it to stop: its exit status and stderr."""
        p = subprocess.run(self.argv(*args), cwd=self.dir, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, timeout=30)
        return p.returncode, p.stderr.decode(errors="replace")

    def stderr(self):
        with open(os.path.join(self.dir, "server.stderr"), "rb") as f:
            return f.read().decode(errors="replace")

    def cmd(self, *args):
        return _raw(self.port, *args, password=self.password)

    def stop(self):
        """SHUTDOWN (the append-only log keeps the data); fails on a crash."""
        if self.proc is None:
            return
        try:
            with RawConn(self.port, timeout=2) as c:
                if self.password is not None:
                    c.cmd("AUTH", self.password)
                c.send(RawConn.encode("SHUTDOWN"))
                c.read_until_closed(timeout=5)
        except (AssertionError, OSError):
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        rc, self.proc = self.proc.returncode, None
        if rc != 0 or CRASH_PATTERNS.search(self.stderr()):
            raise AssertionError("server on port %d exited %s:\n%s" % (self.port, rc, self.stderr()[-3000:]))

    def remove(self):
        shutil.rmtree(self.dir, ignore_errors=True)


def topology(nodes):
    return "".join("%s 127.0.0.1 %d master - %s\n" % (IDS[i], n.port, RANGES[i]) for i, n in enumerate(nodes))


def push(nodes, version):
    """What kvrocks-controller sends each node, verbatim."""
    text = topology(nodes)
    for i, n in enumerate(nodes):
        assert n.cmd("clusterx", "setnodeid", IDS[i]) == "OK"
        assert n.cmd("clusterx", "setnodes", text, str(version)) == "OK"


class TestCluster(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.nodes = [Node() for _ in range(3)]
        cls.addClassCleanup(cls.cleanup)
        for n in cls.nodes:
            n.start()
        # Before the first push: the error the controller takes as "new node".
        cls.before = cls.nodes[0].cmd("cluster", "info")
        push(cls.nodes, 1)

    @classmethod
    def cleanup(cls):
        errors = []
        for n in cls.nodes:
            try:
                n.stop()
            except AssertionError as e:
                errors.append(str(e))
            n.remove()
        if errors:
            raise AssertionError("\n".join(errors))

    def setUp(self):
        for n in self.nodes:
            n.cmd("FLUSHALL")

    def rc(self):
        rc = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", self.nodes[0].port)], socket_timeout=10)
        self.addCleanup(rc.close)
        return rc

    def test_python_client(self):
        """enclaveai.Client finds cluster mode and sends each key's commands
        to the node serving its slot, each node attested on first use;
        models the server names land in a slot of the node that names them."""
        import numpy as np
        c = enclaveai.Client("127.0.0.1", self.nodes[0].port, attest=enclaveai.Policy(allow_simulated=True))
        self.addCleanup(c.close)
        rc = self.rc()
        model = linear_model()
        named = [c.upload_model(model, progress=False)[0] for _ in range(6)]
        tagged = [c.upload_model(model, key="m" + tag, progress=False)[0] for tag in TAGS]
        for key in named + tagged:
            slot = rc.keyslot(key)
            owner = [n for n in self.nodes if rc.get_node_from_key(key).port == n.port][0]
            self.assertEqual(owner.cmd("EXISTS", key), 1, "model %s (slot %d) is not on its slot's node" % (key, slot))
        self.assertEqual(sorted(m["key"] for m in c.list_models()), sorted(named + tagged))
        x = np.array([[1, 2, 3, 4], [5, 6, 7, 8]], np.float32)
        outs = [c.run_model(k, x).as_numpy() for k in tagged]
        for o in outs:
            np.testing.assert_array_equal(o, outs[0])
        self.assertEqual(outs[0].shape, (2, 3))
        c.delete_model("m{c}")
        self.assertEqual(self.nodes[1].cmd("EXISTS", "m{c}"), 0)
        self.assertEqual(len(c._nodes), 3, "one connection per node, the seed's reused")

    def test_controller_contract(self):
        self.assertIsInstance(self.before, ServerError)
        self.assertEqual(self.before.text, "ERR CLUSTERDOWN The cluster is not initialized")
        for n in self.nodes:
            info = n.cmd("cluster", "info")
            self.assertIn("cluster_current_epoch:1\r\n", info)
            self.assertIn("cluster_my_epoch:1\r\n", info)
            self.assertIn("cluster_state:ok\r\n", info)
            self.assertIn("migrating_slot:", info)
            self.assertIn("migrating_state:", info)
            self.assertEqual(n.cmd("clusterx", "version"), 1)
            self.assertIn("cluster_enabled:1", n.cmd("INFO", "cluster"))
        n = self.nodes[0]
        # The same version again is a no-op, a lower one is refused.
        self.assertEqual(n.cmd("clusterx", "setnodes", topology(self.nodes), "1"), "OK")
        self.assertEqual(n.cmd("clusterx", "setnodes", topology(self.nodes), "0").text, "ERR Invalid cluster version")
        self.assertTrue(n.cmd("clusterx", "setnodeid", "not-an-id").text.startswith("ERR Invalid node id"))

    def test_identical_views(self):
        views = [n.cmd("CLUSTER", "NODES") for n in self.nodes]
        for i, v in enumerate(views):
            lines = v.splitlines()
            self.assertEqual(len(lines), 3)
            mine = [ln for ln in lines if "myself," in ln]
            self.assertEqual(len(mine), 1)
            self.assertTrue(mine[0].startswith(IDS[i] + " 127.0.0.1:%d@" % self.nodes[i].port), mine)
            self.assertEqual(v.replace("myself,", ""), views[0].replace("myself,", ""))
        self.assertIn(" 0-5460 8943\n", views[0])
        slots = [n.cmd("CLUSTER", "SLOTS") for n in self.nodes]
        self.assertEqual(slots[0], slots[1])
        self.assertEqual(slots[0], slots[2])
        self.assertEqual([s[:2] for s in slots[0]], [[0, 5460], [5461, 8942], [8943, 8943], [8944, 10921],
                                                     [10922, 16383]])
        for i, n in enumerate(self.nodes):
            self.assertEqual(n.cmd("CLUSTER", "MYID"), IDS[i].encode())

    def test_redis_py_cluster_models_and_dag(self):
        rc = self.rc()
        model = linear_model()
        for i, tag in enumerate(TAGS):
            self.assertEqual(rc.keyslot(tag + "m"), self.nodes[0].cmd("CLUSTER", "KEYSLOT", tag + "m"))
            self.assertEqual(rc.execute_command("AI.MODELSTORE", tag + "m", "ONNX", "CPU", "BLOB", model), b"OK")
            self.assertEqual(rc.execute_command("AI.TENSORSET", tag + "x", "FLOAT", 1, 4, "VALUES", 1, 2, 3, 4),
                             b"OK")
            self.assertEqual(rc.execute_command("AI.MODELEXECUTE", tag + "m", "INPUTS", 1, tag + "x",
                                                "OUTPUTS", 1, tag + "y"), b"OK")
            # linear.onnx: x = [1,2,3,4] -> [7, 9, 11] (REDISAI.md section 10).
            got = rc.execute_command("AI.TENSORGET", tag + "y", "VALUES")
            self.assertEqual(got, [b"7", b"9", b"11"])
            # A DAG with ROUTING: LOAD, run, PERSIST, all on the tag's node.
            reply = rc.execute_command("AI.DAGEXECUTE", "ROUTING", tag, "LOAD", 1, tag + "x", "PERSIST", 1,
                                       tag + "z", "|>", "AI.MODELEXECUTE", tag + "m", "INPUTS", 1, tag + "x",
                                       "OUTPUTS", 1, tag + "z", "|>", "AI.TENSORGET", tag + "z", "VALUES")
            self.assertEqual(reply, [b"OK", got])
            self.assertEqual(rc.execute_command("AI.TENSORGET", tag + "z", "VALUES"), got)
        # Each tag's keys live on its own node only.
        for i, n in enumerate(self.nodes):
            keys = sorted(k.decode() for k in n.cmd("KEYS", "*"))
            self.assertEqual(keys, sorted(TAGS[i] + s for s in "mxyz"), i)
            self.assertEqual(n.cmd("CLUSTER", "COUNTKEYSINSLOT", n.cmd("CLUSTER", "KEYSLOT", TAGS[i])), 4)
        # redis-py finds the keys with COMMAND GETKEYS and refuses before
        # sending (the server's own CROSSSLOT: test_redirects).
        with self.assertRaisesRegex(redis.exceptions.RedisClusterException, "same key slot"):
            rc.execute_command("AI.MODELEXECUTE", "{b}m", "INPUTS", 1, "{b}x", "OUTPUTS", 1, "{a}y")

    def test_redirects(self):
        n0 = self.nodes[0]
        slot = n0.cmd("CLUSTER", "KEYSLOT", "{a}t")
        self.assertEqual(slot, 15495)
        r = n0.cmd("AI.TENSORSET", "{a}t", "FLOAT", 1, "VALUES", 1)
        self.assertEqual(r.text, "MOVED 15495 127.0.0.1:%d" % self.nodes[2].port)
        r = n0.cmd("AI.TENSORGET", "foo{}", "VALUES")  # empty tag: the whole key
        self.assertTrue(r.text.startswith("MOVED %d " % n0.cmd("CLUSTER", "KEYSLOT", "foo{}")), r.text)
        r = n0.cmd("AI.MODELEXECUTE", "{b}m", "INPUTS", 1, "{b}x", "OUTPUTS", 1, "{c}y")
        self.assertEqual(r.text, "CROSSSLOT Keys in request don't hash to the same slot")
        # The DAG's inner model key counts; DAG-local tensor names do not.
        r = n0.cmd("AI.DAGEXECUTE", "ROUTING", "{b}", "|>", "AI.MODELEXECUTE", "{c}m", "INPUTS", 1, "t",
                   "OUTPUTS", 1, "u")
        self.assertEqual(r.text, "CROSSSLOT Keys in request don't hash to the same slot")
        r = n0.cmd("AI.DAGEXECUTE", "ROUTING", "{b}", "|>", "AI.TENSORSET", "local", "FLOAT", 1, "VALUES", 1,
                   "|>", "AI.TENSORGET", "local", "VALUES")
        self.assertEqual(r, ["OK", [b"1"]])
        self.assertEqual(n0.cmd("ASKING"), "OK")
        self.assertEqual(n0.cmd("READONLY"), "OK")

    @unittest.skipUnless(REDIS_CLI, "redis-cli not installed")
    def test_redis_cli(self):
        def cli(*args):
            p = subprocess.run([REDIS_CLI] + [str(a) for a in args], capture_output=True, timeout=20,
                               stdin=subprocess.DEVNULL)
            return p.returncode, p.stdout.decode()
        p0, p2 = self.nodes[0].port, self.nodes[2].port
        self.assertEqual(cli("-c", "-p", p0, "AI.TENSORSET", "{a}t", "FLOAT", 2, "VALUES", 4, 5), (0, "OK\n"))
        self.assertEqual(self.nodes[2].cmd("AI.TENSORGET", "{a}t", "VALUES"), [b"4", b"5"])
        self.assertEqual(cli("-c", "-p", p2, "AI.TENSORGET", "{a}t", "VALUES"), (0, "4\n5\n"))
        rc, out = cli("--cluster", "check", "127.0.0.1:%d" % p0)
        self.assertEqual(rc, 0, out)
        self.assertIn("[OK] All nodes agree about slots configuration.", out)
        self.assertIn("[OK] All 16384 slots covered.", out)

    def test_command_table(self):
        r = redis.Redis(port=self.nodes[1].port)
        self.addCleanup(r.close)
        raw = _raw(self.nodes[1].port, "COMMAND")
        self.assertEqual(_raw(self.nodes[1].port, "COMMAND", "COUNT"), len(raw))
        # redis-py's own parse of the whole reply (RedisCluster's table).
        self.assertIn("ai.dagexecute", r.command())
        for entry in raw:
            self.assertEqual(len(entry), 10, entry[0])
        names = {e[0] for e in raw}
        for name in [b"ai.modelexecute", b"ai.dagexecute", b"cluster", b"clusterx", b"asking", b"readonly"]:
            self.assertIn(name, names)
        info = _raw(self.nodes[1].port, "COMMAND", "INFO", "ai.modelexecute")[0]
        self.assertIn("movablekeys", info[2])
        self.assertEqual(r.execute_command("COMMAND GETKEYS", "AI.DAGEXECUTE", "LOAD", 1, "a", "ROUTING", "r",
                                           "|>", "AI.MODELEXECUTE", "m", "INPUTS", 1, "a", "OUTPUTS", 1, "b"),
                         ["a", "r", "m"])  # redis-py decodes GETKEYS' reply
        with RawConn(self.nodes[1].port) as c:
            hello = c.cmd("HELLO", "3")
            self.assertEqual(hello[b"mode"], b"cluster")
            self.assertEqual(c.cmd("CLUSTER", "MYID"), IDS[1].encode())

    def test_zz_restart_keeps_id_topology_and_data(self):
        rc = self.rc()
        self.assertEqual(rc.execute_command("AI.TENSORSET", "{c}keep", "FLOAT", 1, "VALUES", 42), b"OK")
        n = self.nodes[1]
        nodes_before = n.cmd("CLUSTER", "NODES")
        n.stop()
        self.assertTrue(os.path.exists(os.path.join(n.dir, "nodes.aiconf")))
        n.start()
        self.assertEqual(n.cmd("CLUSTER", "MYID"), IDS[1].encode())
        self.assertEqual(n.cmd("clusterx", "version"), 1)
        self.assertEqual(n.cmd("CLUSTER", "NODES"), nodes_before)
        self.assertEqual(n.cmd("AI.TENSORGET", "{c}keep", "VALUES"), [b"42"])


class TestStateFileSealed(unittest.TestCase):
    """nodes.aiconf is authenticated with a key derived from the seal key:
    the host, which can write the data dir, cannot change the topology a
    node believes. A node whose file was edited refuses to start, as it
    does with a tampered snapshot."""

    def setUp(self):
        self.n = Node()
        self.addCleanup(self.n.remove)
        self.addCleanup(self.n.stop)
        self.n.start()
        # Half the slots here, half on a node 1 that need not run.
        self.text = ("%s 127.0.0.1 %d master - 0-8191\n" % (IDS[0], self.n.port) +
                     "%s 127.0.0.1 %d master - 8192-16383\n" % (IDS[1], self.n.port + 1))
        self.assertEqual(self.n.cmd("clusterx", "setnodeid", IDS[0]), "OK")
        self.assertEqual(self.n.cmd("clusterx", "setnodes", self.text, "1"), "OK")
        self.nodes = self.n.cmd("CLUSTER", "NODES")
        self.n.stop()
        self.path = os.path.join(self.n.dir, "nodes.aiconf")
        with open(self.path, "rb") as f:
            self.good = f.read()

    def write(self, data):
        with open(self.path, "wb") as f:
            f.write(data)

    def grab_all_slots(self, magic, trailer):
        """The host's edit: every slot to this node, the file's checksum
        recomputed (SHA-256, which anyone can) on its trailer line, under
        magic."""
        body = self.good[:self.good.rindex(b"hmac ")].replace(b"enclaveai-cluster-state 3\n", magic)
        body = body.replace(b"master - 0-8191", b"master - 0-16383").replace(b" master - 8192-16383", b" master -")
        return body + trailer + hashlib.sha256(body).hexdigest().encode() + b"\n"

    def test_an_edited_state_file_stops_the_start(self):
        self.assertTrue(self.good.startswith(b"enclaveai-cluster-state 3\n"), self.good[:40])
        for name, bad, reason in [
                ("edited, sealed layout", self.grab_all_slots(b"enclaveai-cluster-state 3\n", b"hmac "),
                 "fails its MAC"),
                ("edited, one byte", self.good.replace(b"0-8191", b"0-8192"), "fails its MAC"),
                ("rewritten as the unsealed layout 1", self.grab_all_slots(b"enclaveai-cluster-state 1\n", b"sha256 "),
                 "--cluster-config-upgrade yes")]:
            with self.subTest(name):
                self.write(bad)
                rc, err = self.n.start_fails()
                self.assertNotEqual(rc, 0)
                self.assertIn(self.path, err)
                self.assertIn(reason, err)
                with open(self.path, "rb") as f:
                    self.assertEqual(f.read(), bad, "the file is left as it was")
        # The node's own file still starts it, with its topology.
        self.write(self.good)
        self.n.start()
        self.assertEqual(self.n.cmd("CLUSTER", "NODES"), self.nodes)

    def test_an_earlier_builds_file_is_sealed_when_told(self):
        """A file of layout 1 (an earlier build's) is read with
        --cluster-config-upgrade yes, and written again sealed; a start with
        it left on is told to unset it (review)."""
        body = b"enclaveai-cluster-state 1\nid %s\nversion 1\n%s" % (IDS[0].encode(), self.text.encode())
        self.write(body + b"sha256 " + hashlib.sha256(body).hexdigest().encode() + b"\n")
        self.n.start("--cluster-config-upgrade", "yes")
        self.assertEqual(self.n.cmd("CLUSTER", "NODES"), self.nodes)
        self.assertIn("unsealed file of an earlier build was read and sealed", self.n.stderr())
        with open(self.path, "rb") as f:
            self.assertEqual(f.read(), self.good)
        self.assertNotIn("cluster-config-upgrade is set", self.n.stderr())
        self.n.stop()
        self.n.start("--cluster-config-upgrade", "yes")  # left on: told to unset it
        self.assertIn("cluster-config-upgrade is set: the next start would believe", self.n.stderr())
        self.n.stop()
        self.n.start()  # sealed now: no upgrade needed
        self.assertEqual(self.n.cmd("clusterx", "version"), 1)


def shape(v):
    """A reply with its values blanked, for comparing shapes."""
    if isinstance(v, list):
        out = [shape(x) for x in v]
        # A run of scalars (slot numbers) counts as one: node 0 has two
        # ranges here, one in the reference cluster.
        if out and all(isinstance(x, str) and x == out[0] for x in out):
            return [out[0], "..."]
        return out
    if isinstance(v, dict):
        return {k if isinstance(k, str) else bytes(k): shape(x) for k, x in v.items()}
    if isinstance(v, ServerError):
        return "error:" + v.text.split()[0]
    return type(v).__name__


@unittest.skipUnless(REDIS_SERVER and REDIS_CLI, "redis-server / redis-cli not installed")
class TestShapesAgainstRedis(unittest.TestCase):
    """CLUSTER replies and redirects have the shapes of a real redis-server 7
    cluster's, in RESP2 and RESP3."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="enclaveai-rediscluster-")
        cls.redis = []
        cls.nodes = []
        cls.addClassCleanup(cls.cleanup)
        cls.rports = [bus_port_pair() for _ in range(3)]
        for p in cls.rports:
            cls.redis.append(subprocess.Popen(
                [REDIS_SERVER, "--port", str(p), "--cluster-enabled", "yes", "--cluster-config-file",
                 "nodes-%d.conf" % p, "--save", "", "--appendonly", "no", "--dir", cls.tmp,
                 "--bind", "127.0.0.1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        for p in cls.rports:
            poll(lambda: _pings(p), timeout=10, what="redis-server %d" % p)
        subprocess.run([REDIS_CLI, "--cluster", "create"] + ["127.0.0.1:%d" % p for p in cls.rports] +
                       ["--cluster-yes"], check=True, capture_output=True, timeout=30)
        poll(lambda: all("cluster_state:ok" in _raw(p, "CLUSTER", "INFO") for p in cls.rports), timeout=15,
             what="redis cluster ok")
        cls.nodes = [Node() for _ in range(3)]
        for n in cls.nodes:
            n.start()
        push(cls.nodes, 1)

    @classmethod
    def cleanup(cls):
        for p in cls.redis:
            p.terminate()
            p.wait(10)
        shutil.rmtree(cls.tmp, ignore_errors=True)
        for n in cls.nodes:
            try:
                n.stop()
            finally:
                n.remove()

    def test_shapes(self):
        ours, theirs = self.nodes[0].port, self.rports[0]
        for proto in ("2", "3"):
            for cmd in (["CLUSTER", "SLOTS"], ["CLUSTER", "SHARDS"], ["CLUSTER", "MYID"], ["CLUSTER", "NODES"],
                        ["CLUSTER", "INFO"], ["CLUSTER", "KEYSLOT", "x"], ["CLUSTER", "COUNTKEYSINSLOT", "1"],
                        ["CLUSTER", "GETKEYSINSLOT", "1", "5"], ["CLUSTER", "COUNTKEYSINSLOT", "16384"],
                        ["COMMAND", "GETKEYS", "DEL", "a", "b"],
                        ["READONLY"], ["READWRITE"], ["ASKING"]):
                a, b = _reply(ours, proto, cmd), _reply(theirs, proto, cmd)
                if cmd[1:2] == ["SHARDS"]:
                    a, b = a[0], b[0]  # the first shard's shape
                elif cmd[1:2] == ["SLOTS"]:
                    a, b = a[0], b[0]
                self.assertEqual(shape(a), shape(b), (proto, cmd))
        # COMMAND entries: ten fields (tips and key specs are empty here).
        self.assertEqual(len(_raw(ours, "COMMAND", "INFO", "del")[0]), len(_raw(theirs, "COMMAND", "INFO", "del")[0]))
        # Node lines: the same eight fields before the slots.
        mine = [ln for ln in _raw(ours, "CLUSTER", "NODES").splitlines() if "myself" in ln][0].split()
        real = [ln for ln in _raw(theirs, "CLUSTER", "NODES").splitlines() if "myself" in ln][0].split()
        self.assertEqual(mine[2], real[2])  # myself,master
        self.assertEqual(mine[7], real[7])  # connected
        self.assertRegex(mine[1], r"^127\.0\.0\.1:\d+@\d+$")
        self.assertRegex(real[1], r"^127\.0\.0\.1:\d+@\d+$")
        # Every CLUSTER INFO field redis-server has in common use is there.
        fields = {ln.split(":")[0] for ln in _raw(ours, "CLUSTER", "INFO").splitlines() if ln}
        for f in ("cluster_state", "cluster_slots_assigned", "cluster_slots_ok", "cluster_known_nodes",
                  "cluster_size", "cluster_current_epoch", "cluster_my_epoch"):
            self.assertIn(f, fields)
        # Redirect and cross-slot texts: the same words, our addresses.
        for port, others in ((ours, [n.port for n in self.nodes]), (theirs, self.rports)):
            slot = _raw(port, "CLUSTER", "KEYSLOT", "{a}k")
            moved = _raw(port, "GET" if port == theirs else "AI.TENSORGET", "{a}k")
            self.assertRegex(moved.text, r"^MOVED %d 127\.0\.0\.1:(%s)$" % (slot, "|".join(map(str, others))))
        self.assertEqual(_raw(ours, "DEL", "{b}a", "{c}a").text, _raw(theirs, "DEL", "{b}a", "{c}a").text)


def bus_port_pair():
    """A free port P below 55536 whose cluster bus port P+10000 is free too
    (redis-server listens on both)."""
    for _ in range(100):
        p = free_port()
        if p + 10000 > 65535:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", p + 10000))
                return p
            except OSError:
                continue
    raise RuntimeError("no free port pair")


def _pings(port):
    try:
        return _raw(port, "PING") == "PONG"
    except OSError:
        return False


def _raw(port, *args, password=None):
    """One command on a fresh connection (after AUTH password, if given);
    bulk text replies decoded."""
    with RawConn(port) as c:
        if password is not None:
            c.cmd("AUTH", password)
        r = c.cmd(*args)
    if isinstance(r, bytes) and (args[0].upper() == "INFO" or
                                 args[0].upper() == "CLUSTER" and args[1].upper() in ("INFO", "NODES")):
        return r.decode()
    return r


def _reply(port, proto, args):
    with RawConn(port) as c:
        c.cmd("HELLO", proto)
        return c.cmd(*args)


CLI = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bin", "enclaveai-cli")


@unittest.skipUnless(os.access(CLI, os.X_OK), "bin/enclaveai-cli not built (make build)")
class TestCliCluster(unittest.TestCase):
    """enclaveai-cli cluster create|show pushes a topology through CLUSTERX
    SETNODES, for deployments without a controller."""

    def test_create_and_show(self):
        nodes = [Node() for _ in range(3)]

        def cleanup():
            for n in nodes:
                try:
                    n.stop()
                finally:
                    n.remove()
        self.addCleanup(cleanup)
        for n in nodes:
            n.start()
        addrs = ["127.0.0.1:%d" % n.port for n in nodes]

        def cli(*args):
            p = subprocess.run([CLI, "cluster"] + list(args), capture_output=True, timeout=20,
                               stdin=subprocess.DEVNULL)
            return p.returncode, p.stdout.decode()
        rc, out = cli("create", *addrs)
        self.assertEqual(rc, 0, out)
        self.assertIn("pushed version 0 to 3 nodes", out)
        self.assertIn("master - 0-5460\n", out)
        self.assertIn("master - 10922-16383\n", out)
        rc, out = cli("show", *addrs)
        self.assertEqual(rc, 0, out)
        self.assertTrue(out.endswith("all nodes agree\n"), out)
        # Again: the version moves up, as a controller's would.
        rc, out = cli("create", *addrs)
        self.assertIn("pushed version 1 to 3 nodes", out)
        self.assertEqual(nodes[2].cmd("clusterx", "version"), 1)
        rc, out = cli("create", "-version", "1", *addrs)
        self.assertEqual(rc, 1)
        self.assertIn("not above", out)
        if REDIS_CLI:
            p = subprocess.run([REDIS_CLI, "--cluster", "check", addrs[1]], capture_output=True, timeout=20)
            self.assertEqual(p.returncode, 0, p.stdout)
            self.assertIn(b"All 16384 slots covered", p.stdout)
        # The nodes now route: a key of node 2's slots gets MOVED on node 0.
        self.assertEqual(nodes[0].cmd("AI.TENSORGET", "{a}k").text, "MOVED 15495 %s" % addrs[2])


if __name__ == "__main__":
    unittest.main()
