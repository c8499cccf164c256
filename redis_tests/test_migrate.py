"""Black-box tests of slot migration (issue 14): CLUSTERX MIGRATE as
kvrocks-controller sends it, with redis-py's RedisCluster looping
MODELEXECUTE on the slot meanwhile.

Three nodes on loopback share a seal key (as marble mode gives them one:
a key travels sealed), the topology is pushed as the controller pushes it,
slot 3300 ({b}) moves from node 0 to node 1 under load, the controller's
reads of CLUSTER INFO see `migrating_state:success`, and the topology that
gives the slot to node 1 ends it.

    make build models
    cd redis_tests && /usr/bin/python3 -m unittest test_migrate -v
"""

import logging
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import numpy as np
import redis
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from redis.cluster import ClusterNode, RedisCluster

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import REPO, RawConn, free_port, poll  # noqa: E402
from test_cluster import IDS, MODELS, RANGES, Node  # noqa: E402
from test_jwt import Keys  # noqa: E402
from test_marble import make_cert, pem  # noqa: E402

SEAL_KEY = "5a" * 32

# redis-py logs every redirect it follows (ASK, MOVED) with a traceback.
logging.getLogger("redis.cluster").setLevel(logging.CRITICAL)


def info(node):
    text = node.cmd("cluster", "info")
    return dict(line.split(":", 1) for line in text.split("\r\n") if ":" in line)


def push(nodes, ranges, version):
    text = "".join("%s 127.0.0.1 %d master - %s\n" % (IDS[i], n.port, ranges[i]) for i, n in enumerate(nodes))
    for i, n in enumerate(nodes):
        assert n.cmd("clusterx", "setnodeid", IDS[i]) == "OK"
        assert n.cmd("clusterx", "setnodes", text, str(version)) == "OK"


def start_sharing_key(node):
    """Starts node with the seal key all the cluster's nodes share."""
    saved = os.environ.get("ENCLAVEAI_SEAL_KEY")
    os.environ["ENCLAVEAI_SEAL_KEY"] = SEAL_KEY
    try:
        node.start()
    finally:
        if saved is None:
            os.environ.pop("ENCLAVEAI_SEAL_KEY")
        else:
            os.environ["ENCLAVEAI_SEAL_KEY"] = saved


class TestMigrate(unittest.TestCase):

    def setUp(self):
        self.nodes = [Node() for _ in range(3)]
        for n in self.nodes:
            self.addCleanup(n.remove)
            self.addCleanup(n.stop)
            start_sharing_key(n)
        push(self.nodes, RANGES, 1)

    def rc(self):
        rc = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", self.nodes[0].port)], socket_timeout=10)
        self.addCleanup(rc.close)
        return rc

    def test_slot_moves_under_load_and_nothing_is_lost(self):
        rc = self.rc()
        with open(os.path.join(MODELS, "mlp.onnx"), "rb") as f:
            mlp = f.read()
        with open(os.path.join(MODELS, "linear.onnx"), "rb") as f:
            linear = f.read()
        rc.execute_command("AI.MODELSTORE", "{b}mlp", "ONNX", "CPU", "TAG", "v1", "BLOB", mlp)
        rc.execute_command("AI.MODELSTORE", "{b}lin", "ONNX", "CPU", "NOPERSIST", "BLOB", linear)
        x = np.random.default_rng(1).random((1, 784), np.float32)
        rc.execute_command("AI.TENSORSET", "{b}x", "FLOAT", 1, 784, "BLOB", x.tobytes())
        for i in range(50):
            rc.execute_command("AI.TENSORSET", "{b}t%d" % i, "INT32", 1, "VALUES", i)
        rc.execute_command("PEXPIRE", "{b}t0", 600_000)
        rc.execute_command("AI.TENSORSET", "{c}other", "FLOAT", 1, "VALUES", 7)  # another slot, untouched
        rc.execute_command("AI.MODELEXECUTE", "{b}mlp", "INPUTS", 1, "{b}x", "OUTPUTS", 1, "{b}y")
        want = rc.execute_command("AI.TENSORGET", "{b}y", "BLOB")
        self.assertEqual(len(self.nodes[0].cmd("KEYS", "{b}*")), 54)

        # Clients loop MODELEXECUTE on the slot (each its own output key)
        # and read its tensors meanwhile.
        stop = threading.Event()
        counts, errors = [0] * 4, []

        def loop(k):
            c = self.rc()
            while not stop.is_set():
                try:
                    c.execute_command("AI.MODELEXECUTE", "{b}mlp", "INPUTS", 1, "{b}x", "OUTPUTS", 1, "{b}out%d" % k)
                    if c.execute_command("AI.TENSORGET", "{b}out%d" % k, "BLOB") != want:
                        errors.append("wrong output")
                    counts[k] += 1
                except Exception as e:  # noqa: BLE001 - counted, the test fails on any
                    errors.append(repr(e))
        threads = [threading.Thread(target=loop, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        time.sleep(0.3)
        before = sum(counts)
        self.assertEqual(self.nodes[0].cmd("clusterx", "migrate", "3300", IDS[1]), "OK")
        # kvrocks-controller's first read comes 0.3-1 s later and must see success.
        poll(lambda: info(self.nodes[0])["migrating_state"] == "success", timeout=5, what="migration")
        self.assertEqual(info(self.nodes[0])["destination_node"], IDS[1])
        self.assertEqual(info(self.nodes[1])["import_state"], "success")
        # Until the new topology arrives the source answers MOVED to the
        # target, which serves the slot.
        self.assertEqual(str(self.raw_error(self.nodes[0], "AI.TENSORGET", "{b}x", "META")),
                         "MOVED 3300 127.0.0.1:%d" % self.nodes[1].port)
        ranges = ["0-3299 3301-5460 8943", "3300 5461-8942 8944-10921", "10922-16383"]
        push(self.nodes, ranges, 2)
        time.sleep(0.3)
        stop.set()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        self.assertGreater(sum(counts), before, "the loops went on")

        # Every key is on node 1 and none left on node 0; the bytes, tags,
        # TTL and NOPERSIST came along.
        self.assertEqual(self.nodes[0].cmd("KEYS", "{b}*"), [])
        keys = set(k.decode() if isinstance(k, bytes) else k for k in self.nodes[1].cmd("KEYS", "{b}*"))
        self.assertTrue({"{b}mlp", "{b}lin", "{b}x", "{b}y"} | {"{b}t%d" % i for i in range(50)} <= keys, keys)
        self.assertEqual(rc.execute_command("AI.MODELGET", "{b}mlp", "BLOB"), mlp)
        meta = rc.execute_command("AI.MODELGET", "{b}mlp", "META")
        self.assertEqual(meta[meta.index(b"tag") + 1], b"v1")
        info_lin = rc.execute_command("AI.MODELINFO", "{b}lin")
        self.assertEqual(info_lin[info_lin.index(b"persist") + 1], 0)
        self.assertGreater(rc.execute_command("PTTL", "{b}t0"), 500_000)
        self.assertEqual(rc.execute_command("AI.TENSORGET", "{b}t42", "VALUES"), [42])
        self.assertEqual(rc.execute_command("AI.TENSORGET", "{c}other", "VALUES"), [b"7"])
        self.assertEqual(info(self.nodes[0])["migrating_state"], "none")
        self.assertEqual(info(self.nodes[1])["import_state"], "none")
        # Node 1 restarted keeps them (its log has them).
        self.nodes[1].stop()
        start_sharing_key(self.nodes[1])
        self.assertEqual(rc.execute_command("AI.MODELGET", "{b}mlp", "BLOB"), mlp)

    def test_cli_cluster_move(self):
        """enclaveai-cli cluster move: the controller's steps, by hand."""
        addrs = ["127.0.0.1:%d" % n.port for n in self.nodes]
        rc = self.rc()
        rc.execute_command("AI.TENSORSET", "{b}x", "FLOAT", 2, "VALUES", 1, 2)
        cli = [os.path.join(REPO, "bin", "enclaveai-cli"), "cluster"]
        p = subprocess.run(cli + ["move", "-slot", "3300", "-to", addrs[2]] + addrs, capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertRegex(p.stdout, r"moved slot 3300 from %s to %s in [\d.]+ s; pushed version 2 to 3 nodes\n" % (addrs[0], addrs[2]))
        self.assertEqual(self.nodes[2].cmd("AI.TENSORGET", "{b}x", "VALUES"), [b"1", b"2"])
        self.assertEqual(self.nodes[0].cmd("KEYS", "*"), [])
        p = subprocess.run(cli + ["show"] + addrs, capture_output=True, text=True, timeout=60)
        self.assertTrue(p.stdout.endswith("all nodes agree\n"), p.stdout)
        self.assertIn(" 3300", p.stdout.split("\n")[3])  # node 2's line of node 0's view
        # A slot the named node already has: the owner refuses to migrate to itself.
        p = subprocess.run(cli + ["move", "-slot", "3300", "-to", addrs[2]] + addrs, capture_output=True, text=True, timeout=60)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("Can't migrate slot to myself", p.stdout + p.stderr)

    def test_an_open_slot_shows_in_cluster_nodes_and_cluster_check(self):
        """A slot moved but not yet pushed is open, as Redis shows it: the
        source's CLUSTER NODES myself line ends with [slot->-target], the
        target's with [slot-<-source], and redis-cli --cluster check warns
        of it (review: it said the cluster was fine); the push closes it."""
        src, dst = self.nodes[0], self.nodes[1]
        self.rc().execute_command("AI.TENSORSET", "{b}x", "INT32", 1, "VALUES", 1)  # slot 3300
        self.assertEqual(src.cmd("clusterx", "migrate", "3300", IDS[1]), "OK")
        poll(lambda: info(src)["migrating_state"] == "success", timeout=30, what="the migration")
        mine = lambda n: [line for line in n.cmd("cluster", "nodes").split("\n") if "myself" in line][0]
        self.assertTrue(mine(src).endswith(" 0-5460 8943 [3300->-%s]" % IDS[1]), mine(src))
        self.assertTrue(mine(dst).endswith(" 8944-10921 [3300-<-%s]" % IDS[0]), mine(dst))
        others = [line for line in src.cmd("cluster", "nodes").split("\n") if "myself" not in line]
        self.assertFalse(any("[" in line for line in others), others)
        cli = shutil.which("redis-cli")
        if cli:
            p = subprocess.run([cli, "--cluster", "check", "127.0.0.1:%d" % src.port], capture_output=True, text=True, timeout=20)
            self.assertIn("has slots in migrating state 3300", p.stdout)
            self.assertIn("has slots in importing state 3300", p.stdout)
            self.assertIn("The following slots are open: 3300", p.stdout)
        push(self.nodes, ["0-3299 3301-5460 8943", "3300 5461-8942 8944-10921", "10922-16383"], 2)
        self.assertNotIn("[", src.cmd("cluster", "nodes") + dst.cmd("cluster", "nodes"))
        if cli:
            p = subprocess.run([cli, "--cluster", "check", "127.0.0.1:%d" % src.port], capture_output=True, text=True, timeout=20)
            self.assertEqual(p.returncode, 0, p.stdout)
            self.assertNotIn("WARNING", p.stdout)
            self.assertIn("All 16384 slots covered", p.stdout)

    def test_exec_routes_its_queue_again(self):
        """As Redis Cluster: a transaction queued before its slot moved is
        redirected at EXEC and nothing runs (cluster review: its writes
        landed on the node that had handed the slot over, and the next
        topology push dropped them); on the importing node, ASKING before
        MULTI holds for the whole transaction (go-redis's TxPipelined)."""
        src, dst = self.nodes[0], self.nodes[1]
        c = RawConn(src.port)
        self.addCleanup(c.close)
        self.assertEqual(c.cmd("AI.TENSORSET", "{b}x", "FLOAT", 1, "VALUES", 1), "OK")
        self.assertEqual([c.cmd(*a) for a in (("MULTI",), ("AI.TENSORSET", "{b}new", "FLOAT", 1, "VALUES", 42),
                                              ("AI.TENSORSET", "{b}x", "FLOAT", 1, "VALUES", 2))],
                         ["OK", "QUEUED", "QUEUED"])
        self.assertEqual(src.cmd("clusterx", "migrate", "3300", IDS[1]), "OK")
        poll(lambda: info(src)["migrating_state"] == "success", timeout=30, what="the migration")
        self.assertRegex(str(c.cmd("EXEC")), r"^MOVED 3300 127\.0\.0\.1:%d$" % dst.port)
        self.assertEqual(src.cmd("KEYS", "*"), [])
        self.assertEqual(dst.cmd("AI.TENSORGET", "{b}x", "VALUES"), [b"1"])
        # The slot moving back: on node 0, the importing side now, a
        # transaction after ASKING runs whole.
        push(self.nodes, ["0-3299 3301-5460", "3300 5461-10921", "10922-16383"], 2)
        with open(os.path.join(MODELS, "transformer.onnx"), "rb") as f:
            big = f.read()  # 12.6 MB: the migration takes a while
        for i in range(3):
            self.assertEqual(dst.cmd("AI.MODELSTORE", "{b}big%d" % i, "ONNX", "CPU", "BLOB", big), "OK")
        back = RawConn(src.port)
        self.addCleanup(back.close)
        self.assertEqual(dst.cmd("clusterx", "migrate", "3300", IDS[0]), "OK")
        poll(lambda: info(src)["import_state"] != "none", timeout=10, what="node 0 to import")
        self.assertEqual(info(src)["import_state"], "start")
        got = [back.cmd(*a) for a in (("ASKING",), ("MULTI",), ("AI.TENSORSET", "{b}k", "INT32", 1, "VALUES", 5),
                                      ("AI.TENSORSET", "{b}k2", "INT32", 1, "VALUES", 6), ("EXEC",))]
        self.assertEqual(got, ["OK", "OK", "QUEUED", "QUEUED", ["OK", "OK"]])
        poll(lambda: info(dst)["migrating_state"] in ("success", "fail"), timeout=60, what="the migration back")
        self.assertEqual(info(dst)["migrating_state"], "success")

    def test_successive_migrations_without_a_push_keep_every_key_reachable(self):
        """A migration that succeeded stays in force until a topology push
        gives its slot away, whatever comes between: a second MIGRATE
        replaced it, and a push that did not move the first slot (the
        older kvrocks-controller gives up on a migration not done at its
        first look) left its keys on the target and the source serving the
        slot empty (cluster review)."""
        src, dst = self.nodes[0], self.nodes[1]
        rc = self.rc()
        rc.execute_command("AI.TENSORSET", "{b}x", "INT32", 1, "VALUES", 1)  # slot 3300
        rc.execute_command("AI.TENSORSET", "{f}y", "INT32", 1, "VALUES", 2)  # slot 3168
        for slot in (3300, 3168):
            self.assertEqual(src.cmd("clusterx", "migrate", str(slot), IDS[1]), "OK")
            poll(lambda: info(src)["migrating_state"] == "success", timeout=30, what="slot %d's migration" % slot)
        # Only the second slot's move is pushed, twice: 3300 stays node 0's
        # in the topology.
        push(self.nodes, ["0-3167 3169-5460", "3168 5461-10921", "10922-16383"], 2)
        push(self.nodes, ["0-3167 3169-5460", "3168 5461-10921", "10922-16383"], 3)
        for k, v in (("{b}x", [1]), ("{f}y", [2])):
            self.assertEqual(rc.execute_command("AI.TENSORGET", k, "VALUES"), v, k)
        self.assertEqual(rc.execute_command("AI.TENSORSET", "{b}z", "INT32", 1, "VALUES", 3), b"OK")
        self.assertEqual(src.cmd("KEYS", "*"), [])
        self.assertEqual(sorted(dst.cmd("KEYS", "*")), [b"{b}x", b"{b}z", b"{f}y"])
        # The push that gives 3300 to node 1 ends its handoff.
        push(self.nodes, ["0-3167 3169-3299 3301-5460", "3168 3300 5461-10921", "10922-16383"], 4)
        self.assertEqual(rc.execute_command("AI.TENSORGET", "{b}z", "VALUES"), [3])

    def test_python_client_follows_a_moved_slot(self):
        """enclaveai.Client follows MOVED (reading the slot map again) and
        ASK: after a slot moved, every call of a client made before it
        failed with MOVED (cluster review)."""
        import enclaveai
        c = enclaveai.Client("127.0.0.1", self.nodes[0].port, attest=False)
        self.addCleanup(c.close)
        lin = os.path.join(MODELS, "linear.onnx")
        c.upload_model(lin, key="{b}lin", progress=False)
        x = np.ones((1, 4), np.float32)
        before = c.run_model("{b}lin", x).as_flat()
        self.assertEqual(self.nodes[0].cmd("clusterx", "migrate", "3300", IDS[1]), "OK")
        poll(lambda: info(self.nodes[0])["migrating_state"] == "success", timeout=30, what="the migration")
        push(self.nodes, ["0-3299 3301-5460", "3300 5461-10921", "10922-16383"], 2)
        self.assertEqual(c.run_model("{b}lin", x).as_flat(), before)
        self.assertEqual(c.upload_model(lin, key="{b}lin2", progress=False)[0], "{b}lin2")
        self.assertEqual(self.nodes[1].cmd("EXISTS", "{b}lin", "{b}lin2"), 2)
        c.delete_model("{b}lin2")
        self.assertEqual(self.nodes[1].cmd("EXISTS", "{b}lin2"), 0)

    def test_a_write_to_a_key_on_its_way_waits(self):
        """A write to a key the migration is sending gets TRYAGAIN until
        the key has landed (cluster review: a DEL, PERSIST, PEXPIRE or
        AI.MODELDEL acknowledged on the source meanwhile was undone on the
        target). What the source acknowledges holds on the target."""
        src, dst = self.nodes[0], self.nodes[1]
        with open(os.path.join(MODELS, "transformer.onnx"), "rb") as f:
            big = f.read()  # 12.6 MB: its send takes a while
        self.assertEqual(src.cmd("AI.MODELSTORE", "{b}m", "ONNX", "CPU", "BLOB", big), "OK")
        self.assertEqual(src.cmd("PEXPIRE", "{b}m", 600000), 1)
        c = RawConn(src.port)
        self.addCleanup(c.close)
        self.assertEqual(src.cmd("clusterx", "migrate", "3300", IDS[1]), "OK")
        replies = []
        deadline = time.monotonic() + 30
        while info(src)["migrating_state"] == "start" and time.monotonic() < deadline:
            replies.append(c.cmd("PERSIST", "{b}m"))
            time.sleep(0.005)
        poll(lambda: info(src)["migrating_state"] != "start", timeout=60, what="the migration")
        self.assertEqual(info(src)["migrating_state"], "success")
        texts = [str(r) for r in replies]
        self.assertIn("TRYAGAIN Multiple keys request during rehashing of slot", texts)
        acked = [r for r in replies if r == 1]
        ttl = dst.cmd("PTTL", "{b}m")
        if acked:
            self.assertEqual(ttl, -1, "PERSIST was acknowledged, the key still has a TTL")
        else:
            self.assertGreater(ttl, 0)

    def split_slot(self):
        """Slot 3300's migration from node 0 to node 1 fails part-way (the
        target past its maxmemory): returns the source, the target, a
        cluster client and the slot's 20 keys, some on each node."""
        src, dst = self.nodes[0], self.nodes[1]
        self.assertEqual(dst.cmd("CONFIG", "SET", "maxmemory", "4mb"), "OK")
        rc = self.rc()
        blob = bytes(300 << 10)
        keys = ["{b}k%02d" % i for i in range(20)]
        for k in keys:
            rc.execute_command("AI.TENSORSET", k, "UINT8", len(blob), "BLOB", blob)
        self.assertEqual(src.cmd("clusterx", "migrate", "3300", IDS[1]), "OK")
        poll(lambda: info(src)["migrating_state"] != "start", timeout=30, what="the migration")
        self.assertEqual(info(src)["migrating_state"], "fail")
        moved = dst.cmd("DBSIZE")
        self.assertGreater(moved, 0)
        self.assertLess(moved, len(keys))
        return src, dst, rc, keys

    def test_a_failed_migration_leaves_every_key_reachable(self):
        """A migration that fails part-way (the target past its maxmemory)
        leaves the slot split, as Redis leaves it MIGRATING: the source
        answers ASK for the keys that moved, the target serves them after
        ASKING, and MIGRATE to another node is refused until one to the
        same target moves the rest (cluster review: the moved keys read as
        missing, and a move to another node stranded them)."""
        src, dst, rc, keys = self.split_slot()
        self.assertEqual(sum(rc.execute_command("EXISTS", k) for k in keys), len(keys))
        self.assertIn("is split between this node and", str(src.cmd("clusterx", "migrate", "3300", IDS[2])))
        self.assertEqual(dst.cmd("CONFIG", "SET", "maxmemory", "0"), "OK")
        self.assertEqual(src.cmd("clusterx", "migrate", "3300", IDS[1]), "OK")
        poll(lambda: info(src)["migrating_state"] != "start", timeout=30, what="the second migration")
        self.assertEqual(info(src)["migrating_state"], "success")
        push(self.nodes, ["0-3299 3301-5460", "3300 5461-10921", "10922-16383"], 2)
        self.assertEqual(dst.cmd("DBSIZE"), len(keys))
        self.assertEqual(sum(rc.execute_command("EXISTS", k) for k in keys), len(keys))

    def test_a_split_slot_survives_kill9(self):
        """A migration that failed part-way holds across a kill -9 of both
        nodes: the slot is still split, every key reachable (the source
        ASKs for those that moved, the target serves them after ASKING),
        and MIGRATE to the same target finishes the move (cluster review:
        a restart forgot the split, and the keys that had moved read as
        missing until the slot was migrated again)."""
        src, dst, rc, keys = self.split_slot()
        moved = dst.cmd("DBSIZE")
        for n in (src, dst):
            n.proc.kill()
            n.proc.wait()
            n.proc = None
            start_sharing_key(n)
        self.assertEqual((info(src)["migrating_slot"], info(src)["migrating_state"]), ("3300", "fail"))
        self.assertEqual(dst.cmd("DBSIZE"), moved)
        rc = self.rc()
        self.assertEqual(sum(rc.execute_command("EXISTS", k) for k in keys), len(keys))
        self.assertIn("is split between this node and", str(src.cmd("clusterx", "migrate", "3300", IDS[2])))
        self.assertEqual(src.cmd("clusterx", "migrate", "3300", IDS[1]), "OK")
        poll(lambda: info(src)["migrating_state"] != "start", timeout=30, what="the second migration")
        self.assertEqual(info(src)["migrating_state"], "success")
        push(self.nodes, ["0-3299 3301-5460 8943", "3300 5461-8942 8944-10921", "10922-16383"], 2)
        self.assertEqual(dst.cmd("DBSIZE"), len(keys))
        rc = self.rc()
        self.assertEqual(sum(rc.execute_command("EXISTS", k) for k in keys), len(keys))
        # The push ended it all: nothing on the move is left in either file.
        for n in (src, dst):
            with open(os.path.join(n.dir, "nodes.aiconf")) as f:
                self.assertNotRegex(f.read(), r"\n(handed|taken|migrating|importing) ")

    def test_a_handoff_survives_kill9_before_the_push(self):
        """A migration that succeeded holds across a kill -9 of both nodes
        before the topology push: the source still answers MOVED to the
        target, the target still serves the slot, and a write made between
        the restart and the push is kept (cluster review: both forgot the
        handoff, the source served the slot empty, and the push then
        dropped what was written there)."""
        src, dst = self.nodes[0], self.nodes[1]
        rc = self.rc()
        rc.execute_command("AI.TENSORSET", "{b}x", "INT32", 1, "VALUES", 1)  # slot 3300
        self.assertEqual(src.cmd("clusterx", "migrate", "3300", IDS[1]), "OK")
        poll(lambda: info(src)["migrating_state"] == "success", timeout=30, what="the migration")
        # Success is reported once the state file holds the handoff: a
        # kill -9 right after it found the slot still saved as migrating,
        # and the source answered ASK (CI).
        with open(os.path.join(src.dir, "nodes.aiconf")) as f:
            self.assertIn("\nhanded 3300 %s\n" % IDS[1], f.read())
        for n in (src, dst):
            n.proc.kill()
            n.proc.wait()
            n.proc = None
            start_sharing_key(n)
        self.assertEqual(src.cmd("AI.TENSORGET", "{b}x", "VALUES").text, "MOVED 3300 127.0.0.1:%d" % dst.port)
        self.assertEqual(dst.cmd("AI.TENSORGET", "{b}x", "VALUES"), [1])
        self.assertEqual(dst.cmd("AI.TENSORSET", "{b}y", "INT32", 1, "VALUES", 2), "OK")
        self.assertIn("[3300->-%s]" % IDS[1], src.cmd("cluster", "nodes"))
        push(self.nodes, ["0-3299 3301-5460 8943", "3300 5461-8942 8944-10921", "10922-16383"], 2)
        rc = self.rc()
        self.assertEqual(rc.execute_command("AI.TENSORGET", "{b}x", "VALUES"), [1])
        self.assertEqual(rc.execute_command("AI.TENSORGET", "{b}y", "VALUES"), [2])
        self.assertNotIn("[", src.cmd("cluster", "nodes") + dst.cmd("cluster", "nodes"))
        # The push ended the handoff: a restart now has none to read back.
        src.stop()
        start_sharing_key(src)
        self.assertNotIn("[", src.cmd("cluster", "nodes"))

    def test_kill9_mid_migration_loses_nothing(self):
        """Either node killed -9 while the slot moves: every key is still on
        one of the two, and MIGRATE again finishes the move with every key's
        bytes on the target."""
        version = 1
        moved = ["0-3299 3301-5460 8943", "3300 5461-8942 8944-10921", "10922-16383"]
        for victim in (1, 0):  # the target, then the source
            with self.subTest(killed="target" if victim == 1 else "source"):
                version += 1
                push(self.nodes, RANGES, version)
                for n in self.nodes:
                    n.cmd("FLUSHALL")
                rc = self.rc()
                blob = os.urandom(256 << 10)
                want = {"{b}k%d" % i: blob[i:] + blob[:i] for i in range(120)}
                for k, v in want.items():
                    rc.execute_command("AI.TENSORSET", k, "UINT8", len(v), "BLOB", v)
                self.assertEqual(self.nodes[0].cmd("clusterx", "migrate", "3300", IDS[1]), "OK")
                poll(lambda: self.nodes[1].cmd("DBSIZE") >= 10, timeout=10, what="some keys moved")
                self.nodes[victim].proc.kill()
                self.nodes[victim].proc.wait()
                self.nodes[victim].proc = None
                if victim == 1:
                    poll(lambda: info(self.nodes[0])["migrating_state"] == "fail", timeout=10, what="failure")
                start_sharing_key(self.nodes[victim])
                # Every key on one node or the other (on both if the source
                # died before its delete reached its log).
                keys = set()
                for n in self.nodes[:2]:
                    keys |= {k.decode() for k in n.cmd("KEYS", "{b}*")}
                self.assertEqual(keys, set(want))
                self.assertGreater(len(self.nodes[0].cmd("KEYS", "{b}*")), 0, "killed after the move ended")
                # MIGRATE again moves the rest; the topology that follows
                # gives the target everything, unchanged.
                self.assertEqual(self.nodes[0].cmd("clusterx", "migrate", "3300", IDS[1]), "OK")
                poll(lambda: info(self.nodes[0])["migrating_state"] == "success", timeout=10, what="migration")
                version += 1
                push(self.nodes, moved, version)
                self.assertEqual(self.nodes[0].cmd("KEYS", "{b}*"), [])
                for k, v in want.items():
                    self.assertEqual(self.nodes[1].cmd("AI.TENSORGET", k, "BLOB"), v, k)
                # Back to node 0 for the next round.
                version += 1
                push(self.nodes, RANGES, version)

    def raw_error(self, node, *args):
        r = node.cmd(*args)
        return getattr(r, "text", r)

    def test_a_target_with_another_seal_key_refuses_and_the_source_keeps_the_slot(self):
        # A node with its own seal key in node 2's place: it cannot open
        # what node 0 sends.
        stranger = Node()
        self.addCleanup(stranger.remove)
        self.addCleanup(stranger.stop)
        stranger.start()
        self.nodes[2] = stranger
        push(self.nodes, RANGES, 2)
        rc = self.rc()
        rc.execute_command("AI.TENSORSET", "{b}x", "FLOAT", 1, "VALUES", 1)
        self.assertEqual(self.nodes[0].cmd("clusterx", "migrate", "3300", IDS[2]), "OK")
        poll(lambda: info(self.nodes[0])["migrating_state"] == "fail", timeout=5, what="migration failure")
        self.assertIn("could not be opened", self.nodes[0].stderr())
        self.assertEqual(rc.execute_command("AI.TENSORGET", "{b}x", "VALUES"), [b"1"])
        self.assertEqual(stranger.cmd("DBSIZE"), 0)

    def test_a_target_that_answers_a_lone_minus_fails_the_migration_not_the_source(self):
        # Node 1's address in the topology is whatever listens there: here
        # a plain TCP listener that answers the source's first command with
        # "-\n". The source took that apart as line[1:len(line)-2], a
        # panic in the migration's goroutine that ended the process.
        fake = socket.socket()
        fake.bind(("127.0.0.1", 0))
        fake.listen(1)
        self.addCleanup(fake.close)
        ports = [n.port for n in self.nodes]
        ports[1] = fake.getsockname()[1]
        push_ports(self.nodes, ports, RANGES, 2)
        src = self.nodes[0]
        self.assertEqual(src.cmd("AI.TENSORSET", "{b}x", "FLOAT", 1, "VALUES", 1), "OK")
        self.assertEqual(src.cmd("clusterx", "migrate", "3300", IDS[1]), "OK")
        fake.settimeout(10)
        conn, _ = fake.accept()
        conn.settimeout(10)
        self.assertTrue(conn.recv(65536))
        conn.sendall(b"-\n")
        poll(lambda: info(src)["migrating_state"] == "fail", timeout=10, what="the migration's failure")
        conn.close()
        self.assertEqual(src.cmd("PING"), "PONG")
        self.assertEqual(src.cmd("AI.TENSORGET", "{b}x", "VALUES"), [b"1"])
        self.assertIn("neither +OK nor an error", src.stderr())


class TestMigrateWithUsers(unittest.TestCase):
    """Nodes with users and no requirepass: a migrating source
    authenticates to its target as the admin user masteruser names, with
    masterauth, which nothing shows; a tenant's model keeps its owner on
    the target, where it counts against her max-model-bytes-per-user."""

    PASSWORD = "node-pw-Xy7q"
    LIMIT = 300  # linear.onnx is 219 bytes: one model a user on a node

    def setUp(self):
        self.nodes = [Node("--user", "alice", "on", ">alice-pw", "--user", "bob", "on", ">bob-pw",
                           "--user", "node", "on", ">" + self.PASSWORD, "+@admin",
                           "--masteruser", "node", "--masterauth", self.PASSWORD,
                           "--max-model-bytes-per-user", str(self.LIMIT)) for _ in range(3)]
        for n in self.nodes:
            self.addCleanup(n.remove)
            self.addCleanup(n.stop)
            start_sharing_key(n)
        push(self.nodes, RANGES, 1)
        self.alice = self.rc("alice", "alice-pw")
        with open(os.path.join(MODELS, "linear.onnx"), "rb") as f:
            self.linear = f.read()
        # Alice's model and input in slot 3300 ({b}), on node 0.
        self.alice.execute_command("AI.MODELSTORE", "{b}m", "ONNX", "CPU", "BLOB", self.linear)
        self.alice.execute_command("AI.TENSORSET", "{b}x", "FLOAT", 1, 4, "VALUES", 1, 2, 3, 4)

    def rc(self, user, password):
        rc = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", self.nodes[0].port)], socket_timeout=10,
                          username=user, password=password)
        self.addCleanup(rc.close)
        return rc

    def migrate(self):
        src = self.nodes[0]
        self.assertEqual(src.cmd("clusterx", "migrate", "3300", IDS[1]), "OK")
        poll(lambda: info(src)["migrating_state"] != "start", timeout=30, what="the migration")
        return info(src)["migrating_state"]

    def test_a_tenants_slot_moves_and_stays_hers(self):
        self.assertEqual(self.migrate(), "success")
        push(self.nodes, ["0-3299 3301-5460 8943", "3300 5461-8942 8944-10921", "10922-16383"], 2)
        self.assertEqual(self.nodes[0].cmd("KEYS", "{b}*"), [])
        self.assertEqual(sorted(self.nodes[1].cmd("KEYS", "{b}*")), [b"{b}m", b"{b}x"])
        # Alice runs her model on the target, and it is still hers there.
        alice = self.rc("alice", "alice-pw")
        self.assertEqual(alice.execute_command("AI.MODELEXECUTE", "{b}m", "INPUTS", 1, "{b}x", "OUTPUTS", 1, "{b}y"),
                         b"OK")
        self.assertEqual(alice.execute_command("AI.TENSORGET", "{b}y", "VALUES"), [b"7", b"9", b"11"])
        bob = self.rc("bob", "bob-pw")
        for cmd in (("AI.MODELGET", "{b}m", "META"), ("AI.TENSORGET", "{b}x", "VALUES")):
            with self.assertRaises(redis.exceptions.NoPermissionError):
                bob.execute_command(*cmd)
        # ... and counts against her max-model-bytes-per-user there.
        with self.assertRaisesRegex(redis.ResponseError, "max-model-bytes-per-user"):
            alice.execute_command("AI.MODELSTORE", "{b}m2", "ONNX", "CPU", "BLOB", self.linear)
        # The password shows nowhere: CONFIG GET, INFO, either node's log.
        for n in self.nodes[:2]:
            self.assertEqual(n.cmd("CONFIG", "GET", "masterauth"), [b"masterauth", b"(redacted)"])
            self.assertEqual(n.cmd("CONFIG", "GET", "masteruser"), [b"masteruser", b"node"])
            self.assertNotIn(self.PASSWORD, n.cmd("INFO", "everything"))
            self.assertNotIn(self.PASSWORD, n.stderr())

    def test_a_model_past_its_owners_quota_on_the_target_does_not_move(self):
        """The target charges a model to its owner as her own store would
        be: past her max-model-bytes-per-user there, the migration fails
        and the source keeps the slot."""
        self.alice.execute_command("AI.MODELSTORE", "{c}m", "ONNX", "CPU", "BLOB", self.linear)  # node 1
        self.assertEqual(self.migrate(), "fail")
        self.assertIn("max-model-bytes-per-user", self.nodes[0].stderr())
        self.assertEqual(sorted(self.nodes[0].cmd("KEYS", "{b}*")), [b"{b}m", b"{b}x"])
        self.assertEqual(self.nodes[1].cmd("KEYS", "{b}*"), [])
        self.assertEqual(self.alice.execute_command("AI.MODELEXECUTE", "{b}m", "INPUTS", 1, "{b}x",
                                                    "OUTPUTS", 1, "{b}y"), b"OK")

    def test_a_wrong_masterauth_fails_the_migration_naming_auth_not_the_password(self):
        wrong = "not-the-pw-Qz3"
        self.assertEqual(self.nodes[0].cmd("CONFIG", "SET", "masterauth", wrong), "OK")
        self.assertEqual(self.migrate(), "fail")
        err = self.nodes[0].stderr()
        self.assertIn("AUTH to the target as user node: WRONGPASS", err)
        self.assertNotIn(wrong, err)
        self.assertEqual(self.nodes[1].cmd("KEYS", "*"), [])
        self.assertEqual(self.alice.execute_command("AI.TENSORGET", "{b}x", "VALUES"), [b"1", b"2", b"3", b"4"])




class TestMigrateWithRequirepass(unittest.TestCase):
    """Nodes with requirepass and no users, as most Redis deployments run:
    a migrating source authenticates to its target with masterauth (AUTH
    <password>, the default user), and a wrong one fails the migration
    naming AUTH, never the password, the source keeping the slot."""

    PASSWORD = "node-pw-Rq8v"

    def setUp(self):
        self.nodes = [Node("--requirepass", self.PASSWORD, "--masterauth", self.PASSWORD) for _ in range(3)]
        for n in self.nodes:
            n.password = self.PASSWORD
            self.addCleanup(n.remove)
            self.addCleanup(n.stop)
            start_sharing_key(n)
        push(self.nodes, RANGES, 1)
        src = self.nodes[0]
        with open(os.path.join(MODELS, "linear.onnx"), "rb") as f:
            self.assertEqual(src.cmd("AI.MODELSTORE", "{b}m", "ONNX", "CPU", "BLOB", f.read()), "OK")
        self.assertEqual(src.cmd("AI.TENSORSET", "{b}x", "FLOAT", 1, 4, "VALUES", 1, 2, 3, 4), "OK")

    def migrate(self):
        src = self.nodes[0]
        self.assertEqual(src.cmd("clusterx", "migrate", "3300", IDS[1]), "OK")
        poll(lambda: info(src)["migrating_state"] != "start", timeout=30, what="the migration")
        return info(src)["migrating_state"]

    def test_a_slot_moves_between_nodes_with_requirepass(self):
        self.assertEqual(self.migrate(), "success")
        push(self.nodes, ["0-3299 3301-5460 8943", "3300 5461-8942 8944-10921", "10922-16383"], 2)
        dst = self.nodes[1]
        self.assertEqual(sorted(dst.cmd("KEYS", "{b}*")), [b"{b}m", b"{b}x"])
        self.assertEqual(dst.cmd("AI.MODELEXECUTE", "{b}m", "INPUTS", 1, "{b}x", "OUTPUTS", 1, "{b}y"), "OK")
        self.assertEqual(dst.cmd("AI.TENSORGET", "{b}y", "VALUES"), [b"7", b"9", b"11"])
        self.assertEqual(self.nodes[0].cmd("KEYS", "{b}*"), [])
        for n in self.nodes[:2]:
            self.assertNotIn(self.PASSWORD, n.stderr())
        # Without the password the target refuses a client, as before.
        with RawConn(dst.port) as c:
            self.assertIn("NOAUTH", str(c.cmd("KEYS", "*")))

    def test_a_wrong_masterauth_fails_the_migration(self):
        wrong = "not-the-pw-Vb2c"
        self.assertEqual(self.nodes[0].cmd("CONFIG", "SET", "masterauth", wrong), "OK")
        self.assertEqual(self.migrate(), "fail")
        err = self.nodes[0].stderr()
        self.assertIn("AUTH to the target", err)
        self.assertIn("WRONGPASS", err)
        self.assertNotIn(wrong, err)
        self.assertEqual(self.nodes[1].cmd("KEYS", "*"), [])
        self.assertEqual(sorted(self.nodes[0].cmd("KEYS", "{b}*")), [b"{b}m", b"{b}x"])


class TestMigrateWithTokens(unittest.TestCase):
    """Tenants who sign in with tokens (JWT, docs/GUIDE.md) and no user
    list of their own: a tenant's model migrates with its owner, whom the
    target knows only by her token's subject, and stays hers there."""

    PASSWORD = "node-pw-Jt5w"
    LIMIT = 300  # linear.onnx is 219 bytes: one model a tenant on a node

    def setUp(self):
        self.keys = Keys()
        self.addCleanup(shutil.rmtree, self.keys.dir, True)
        self.nodes = [Node(*self.keys.server_args("--user", "node", "on", ">" + self.PASSWORD, "+@admin",
                                                  "--masteruser", "node", "--masterauth", self.PASSWORD,
                                                  "--max-model-bytes-per-user", str(self.LIMIT)))
                      for _ in range(3)]
        for n in self.nodes:
            self.addCleanup(n.remove)
            self.addCleanup(n.stop)
            start_sharing_key(n)
        push(self.nodes, RANGES, 1)
        with open(os.path.join(MODELS, "linear.onnx"), "rb") as f:
            self.linear = f.read()
        alice = self.tenant("alice")
        alice.execute_command("AI.MODELSTORE", "{b}m", "ONNX", "CPU", "BLOB", self.linear)  # slot 3300, node 0
        alice.execute_command("AI.TENSORSET", "{b}x", "FLOAT", 1, 4, "VALUES", 1, 2, 3, 4)

    def tenant(self, sub):
        rc = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", self.nodes[0].port)], socket_timeout=10,
                          username=sub, password=self.keys.token(sub))
        self.addCleanup(rc.close)
        return rc

    def test_a_token_tenants_slot_moves_and_stays_hers(self):
        src = self.nodes[0]
        self.assertEqual(src.cmd("clusterx", "migrate", "3300", IDS[1]), "OK")
        poll(lambda: info(src)["migrating_state"] != "start", timeout=30, what="the migration")
        self.assertEqual(info(src)["migrating_state"], "success")
        push(self.nodes, ["0-3299 3301-5460 8943", "3300 5461-8942 8944-10921", "10922-16383"], 2)
        self.assertEqual(sorted(self.nodes[1].cmd("KEYS", "{b}*")), [b"{b}m", b"{b}x"])
        # On the target, with a fresh token, she runs her model.
        alice = self.tenant("alice")
        self.assertEqual(alice.execute_command("AI.MODELEXECUTE", "{b}m", "INPUTS", 1, "{b}x", "OUTPUTS", 1, "{b}y"),
                         b"OK")
        self.assertEqual(alice.execute_command("AI.TENSORGET", "{b}y", "VALUES"), [b"7", b"9", b"11"])
        # Another tenant may not read it, nor overwrite it.
        bob = self.tenant("bob")
        for cmd in (("AI.MODELGET", "{b}m", "META"), ("AI.TENSORGET", "{b}x", "VALUES"),
                    ("AI.TENSORSET", "{b}x", "FLOAT", 1, "VALUES", 0)):
            with self.assertRaises(redis.exceptions.NoPermissionError):
                bob.execute_command(*cmd)
        # It counts against her max-model-bytes-per-user on the target.
        with self.assertRaisesRegex(redis.ResponseError, "max-model-bytes-per-user"):
            alice.execute_command("AI.MODELSTORE", "{b}m2", "ONNX", "CPU", "BLOB", self.linear)
        # Bob's own room there is untouched.
        self.assertEqual(bob.execute_command("AI.MODELSTORE", "{b}bm", "ONNX", "CPU", "BLOB", self.linear), b"OK")


class TLSNode(Node):
    """A node with a TLS listener on a port of its own (tls_port), a key
    pair issued by ca, which the topology names by that port."""

    def __init__(self, ca, *args, ca_file=None):
        tls_port = free_port()
        cert, key = ca.issue("node%d" % tls_port)
        super().__init__("--tls-port", str(tls_port), "--tls-cert-file", cert, "--tls-key-file", key,
                         "--tls-ca-cert-file", ca_file or ca.file, *args)
        self.tls_port = tls_port


class CA:
    """A test CA whose certificate and issued key pairs are PEM files."""

    def __init__(self, name):
        self.dir = tempfile.mkdtemp(prefix="enclaveai-tlscluster-")
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.cert = make_cert(name, self.key, None, None, True)
        self.file = self.write("ca.pem", pem(self.cert))

    def write(self, name, data):
        path = os.path.join(self.dir, name)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def issue(self, name):
        """A key pair for name (no address in it: nodes verify the chain,
        not the host name): its cert and key files."""
        key = ec.generate_private_key(ec.SECP256R1())
        cert = make_cert(name, key, self.cert, self.key, False)
        return (self.write(name + ".pem", pem(cert)),
                self.write(name + ".key", key.private_bytes(serialization.Encoding.PEM,
                                                            serialization.PrivateFormat.PKCS8,
                                                            serialization.NoEncryption())))


def push_ports(nodes, ports, ranges, version):
    """push, with the topology naming each node by the port given."""
    text = "".join("%s 127.0.0.1 %d master - %s\n" % (IDS[i], ports[i], ranges[i]) for i in range(len(nodes)))
    for i, n in enumerate(nodes):
        assert n.cmd("clusterx", "setnodeid", IDS[i]) == "OK"
        assert n.cmd("clusterx", "setnodes", text, str(version)) == "OK"


class TestMigrateTLS(unittest.TestCase):
    """tls-cluster yes: the topology names each node by its TLS port (as
    Redis Cluster announces its TLS port under tls-cluster), and a
    migrating source reaches its target only over TLS, verifying the
    target's chain against tls-ca-cert-file and presenting its own
    certificate (the target asks for one: tls-auth-clients yes), before
    AUTH masteruser masterauth and the keys."""

    PASSWORD = "node-pw-Tl5c"
    MOVED = ["0-3299 3301-5460 8943", "3300 5461-8942 8944-10921", "10922-16383"]

    def setUp(self):
        self.ca = CA("cluster CA")
        self.addCleanup(shutil.rmtree, self.ca.dir, True)
        self.nodes = [self.node(self.ca) for _ in range(3)]
        push_ports(self.nodes, [n.tls_port for n in self.nodes], RANGES, 1)
        # A model and a tensor in slot 3300 ({b}), on node 0.
        with open(os.path.join(MODELS, "linear.onnx"), "rb") as f:
            self.linear = f.read()
        src = self.nodes[0]
        self.assertEqual(src.cmd("AI.MODELSTORE", "{b}m", "ONNX", "CPU", "BLOB", self.linear), "OK")
        self.assertEqual(src.cmd("AI.TENSORSET", "{b}x", "FLOAT", 1, 4, "VALUES", 1, 2, 3, 4), "OK")

    def node(self, ca, ca_file=None):
        n = TLSNode(ca, "--tls-cluster", "yes", "--user", "node", "on", ">" + self.PASSWORD, "+@admin",
                    "--masteruser", "node", "--masterauth", self.PASSWORD, ca_file=ca_file)
        self.addCleanup(n.remove)
        self.addCleanup(n.stop)
        start_sharing_key(n)
        return n

    def migrate(self, target_id):
        src = self.nodes[0]
        self.assertEqual(src.cmd("clusterx", "migrate", "3300", target_id), "OK")
        poll(lambda: info(src)["migrating_state"] != "start", timeout=30, what="the migration")
        return info(src)["migrating_state"]

    def assert_source_keeps_the_slot(self):
        src = self.nodes[0]
        self.assertEqual(sorted(src.cmd("KEYS", "{b}*")), [b"{b}m", b"{b}x"])
        self.assertEqual(src.cmd("AI.TENSORGET", "{b}x", "VALUES"), [b"1", b"2", b"3", b"4"])
        self.assertEqual(src.cmd("AI.MODELEXECUTE", "{b}m", "INPUTS", 1, "{b}x", "OUTPUTS", 1, "{b}y"), "OK")
        self.assertNotIn(self.PASSWORD, src.stderr())

    def test_a_slot_moves_between_tls_nodes(self):
        self.assertEqual(self.migrate(IDS[1]), "success")
        src, dst = self.nodes[0], self.nodes[1]
        self.assertEqual(info(dst)["import_state"], "success")
        self.assertEqual(src.cmd("KEYS", "{b}*"), [])
        self.assertEqual(sorted(dst.cmd("KEYS", "{b}*")), [b"{b}m", b"{b}x"])
        # Redirects name the target's TLS port, the one the topology gives.
        self.assertEqual(getattr(src.cmd("AI.TENSORGET", "{b}x", "VALUES"), "text", None),
                         "MOVED 3300 127.0.0.1:%d" % dst.tls_port)
        push_ports(self.nodes, [n.tls_port for n in self.nodes], self.MOVED, 2)
        # A cluster client over TLS, with a certificate of the CA (the
        # nodes require one), follows the slot to the target's TLS port.
        cert, key = self.ca.issue("client")
        rc = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", src.tls_port)], ssl=True,
                          ssl_certfile=cert, ssl_keyfile=key, ssl_ca_certs=self.ca.file,
                          ssl_check_hostname=False, socket_timeout=10)
        self.addCleanup(rc.close)
        self.assertEqual(rc.execute_command("AI.MODELEXECUTE", "{b}m", "INPUTS", 1, "{b}x", "OUTPUTS", 1, "{b}y"),
                         b"OK")
        self.assertEqual(rc.execute_command("AI.TENSORGET", "{b}y", "VALUES"), [b"7", b"9", b"11"])
        for n in (src, dst):
            self.assertNotIn(self.PASSWORD, n.stderr())

    def test_a_target_of_another_ca_is_refused_and_keeps_nothing(self):
        # In node 2's place, a node whose certificate another CA issued
        # (it trusts the cluster's CA for its own clients).
        other = CA("another CA")
        self.addCleanup(shutil.rmtree, other.dir, True)
        stranger = self.node(other, ca_file=self.ca.file)
        self.nodes[2] = stranger
        push_ports(self.nodes, [n.tls_port for n in self.nodes], RANGES, 2)
        self.assertEqual(self.migrate(IDS[2]), "fail")
        err = self.nodes[0].stderr()
        self.assertIn("does not chain to tls-ca-cert-file", err)
        self.assertIn("TLS to 127.0.0.1:%d" % stranger.tls_port, err)
        self.assertEqual(stranger.cmd("DBSIZE"), 0)
        self.assertEqual(info(stranger)["import_state"], "none")
        self.assert_source_keeps_the_slot()

    def test_nothing_in_clear_reaches_the_target(self):
        # Node 1's address in the topology is a plain TCP listener that
        # records what arrives, then hangs up.
        fake = socket.socket()
        fake.bind(("127.0.0.1", 0))
        fake.listen(1)
        self.addCleanup(fake.close)
        push_ports(self.nodes, [self.nodes[0].tls_port, fake.getsockname()[1], self.nodes[2].tls_port], RANGES, 2)
        self.assertEqual(self.nodes[0].cmd("clusterx", "migrate", "3300", IDS[1]), "OK")
        fake.settimeout(10)
        conn, _ = fake.accept()
        got = b""
        conn.settimeout(1)
        try:
            while True:  # until the source waits for a reply
                chunk = conn.recv(65536)
                if not chunk:
                    break
                got += chunk
        except socket.timeout:
            pass
        conn.close()
        self.assertGreater(len(got), 5)
        self.assertEqual(got[0], 0x16, "a TLS handshake record (a ClientHello), not %r" % got[:20])
        self.assertNotIn(b"AUTH", got.upper())
        self.assertNotIn(self.PASSWORD.encode(), got)
        self.assertNotIn(b"CLUSTERX", got.upper())
        poll(lambda: info(self.nodes[0])["migrating_state"] == "fail", timeout=10, what="the migration's failure")
        self.assert_source_keeps_the_slot()

    def test_tls_cluster_needs_a_tls_listener_and_a_ca(self):
        cert, key = self.ca.issue("lone")
        for args, want in [
            (["--tls-cluster", "yes", "--tls-ca-cert-file", self.ca.file, "--tls-cert-file", cert, "--tls-key-file", key],
             "tls-cluster yes needs tls-port"),
            (["--tls-cluster", "yes", "--tls-port", str(free_port()), "--tls-cert-file", cert, "--tls-key-file", key],
             "tls-cluster yes needs tls-ca-cert-file"),
            (["--tls-cluster", "yes", "--tls-port", str(free_port()), "--tls-ca-cert-file", self.ca.file],
             "tls-cluster yes needs tls-cert-file and tls-key-file (or marble yes)"),
        ]:
            n = Node(*args)
            self.addCleanup(n.remove)
            rc, err = n.start_fails()
            self.assertNotEqual(rc, 0)
            self.assertIn(want, err)


class TestCliTLS(unittest.TestCase):
    """enclaveai-cli over TLS, as redis-cli's --tls --cacert --cert --key:
    two nodes with tls-cluster yes and a CA, whose TLS listeners ask every
    client for a certificate of it (tls-auth-clients yes, the default).
    cluster create names the nodes by the TLS ports it dials, cluster move
    has a slot holding a model migrate over TLS, cluster show shows it;
    the other subcommands run with a client certificate and are refused
    without one."""

    PASSWORD = "cli-pw-Tl5c"
    CLI = os.path.join(REPO, "bin", "enclaveai-cli")

    def setUp(self):
        self.ca = CA("cluster CA")
        self.addCleanup(shutil.rmtree, self.ca.dir, True)
        self.nodes = []
        for _ in range(2):
            n = TLSNode(self.ca, "--tls-cluster", "yes", "--user", "node", "on", ">" + self.PASSWORD, "+@all",
                        "--masteruser", "node", "--masterauth", self.PASSWORD)
            self.addCleanup(n.remove)
            self.addCleanup(n.stop)
            start_sharing_key(n)
            self.nodes.append(n)
        self.addrs = ["127.0.0.1:%d" % n.tls_port for n in self.nodes]
        self.cert, self.key = self.ca.issue("admin")
        self.auth = ["-user", "node", "-a", self.PASSWORD]
        self.tls = ["-tls", "-cacert", self.ca.file, "-cert", self.cert, "-key", self.key] + self.auth

    def cli(self, *args):
        p = subprocess.run([self.CLI] + list(args), capture_output=True, text=True, timeout=60,
                           stdin=subprocess.DEVNULL)
        return p.returncode, p.stdout + p.stderr

    def test_cluster_create_move_show_over_tls(self):
        rc, out = self.cli("cluster", "create", *self.tls, *self.addrs)
        self.assertEqual(rc, 0, out)
        # The topology names the TLS ports dialled, as tls-cluster needs.
        for n, slots in zip(self.nodes, ["0-8191", "8192-16383"]):
            self.assertIn(" 127.0.0.1 %d master - %s\n" % (n.tls_port, slots), out)
        src, dst = self.nodes
        with open(os.path.join(MODELS, "linear.onnx"), "rb") as f:
            self.assertEqual(src.cmd("AI.MODELSTORE", "{b}m", "ONNX", "CPU", "BLOB", f.read()), "OK")
        self.assertEqual(src.cmd("AI.TENSORSET", "{b}x", "FLOAT", 1, 4, "VALUES", 1, 2, 3, 4), "OK")

        rc, out = self.cli("cluster", "move", *self.tls, "-slot", "3300", "-to", self.addrs[1], *self.addrs)
        self.assertEqual(rc, 0, out)
        self.assertRegex(out, r"moved slot 3300 from %s to %s in [\d.]+ s; pushed version 1 to 2 nodes\n"
                         % (self.addrs[0], self.addrs[1]))
        self.assertEqual(src.cmd("KEYS", "{b}*"), [])
        self.assertEqual(sorted(dst.cmd("KEYS", "{b}*")), [b"{b}m", b"{b}x"])
        self.assertEqual(dst.cmd("AI.MODELEXECUTE", "{b}m", "INPUTS", 1, "{b}x", "OUTPUTS", 1, "{b}y"), "OK")
        self.assertEqual(dst.cmd("AI.TENSORGET", "{b}y", "VALUES"), [b"7", b"9", b"11"])
        self.assertEqual(getattr(src.cmd("AI.TENSORGET", "{b}x", "VALUES"), "text", None),
                         "MOVED 3300 127.0.0.1:%d" % dst.tls_port)

        rc, out = self.cli("cluster", "show", *self.tls, *self.addrs)
        self.assertEqual(rc, 0, out)
        self.assertTrue(out.endswith("all nodes agree\n"), out)
        self.assertIn("%s: version 1\n" % self.addrs[0], out)
        # Both views give the slot to the target, named by its TLS port.
        self.assertEqual(len(re.findall(r" 127\.0\.0\.1:%d@\d+ (?:myself,)?master - 0 0 1 connected 3300 8192-16383\n"
                                        % dst.tls_port, out)), 2, out)
        for n in self.nodes:
            self.assertNotIn(self.PASSWORD, n.stderr())

    def test_cluster_create_names_the_ports_the_nodes_migrate_to(self):
        """A migrating source dials the address the topology names, over
        TLS under tls-cluster yes, plainly without: create refuses the
        other kind of port."""
        plain = ["127.0.0.1:%d" % n.port for n in self.nodes]
        rc, out = self.cli("cluster", "create", *self.auth, *plain)
        self.assertEqual(rc, 1, out)
        self.assertIn("%s runs tls-cluster yes" % plain[0], out)
        self.assertEqual(self.nodes[0].cmd("clusterx", "version"), -1)
        # A node with a TLS listener and a CA, without tls-cluster.
        n = TLSNode(self.ca, "--user", "node", "on", ">" + self.PASSWORD, "+@all")
        self.addCleanup(n.remove)
        self.addCleanup(n.stop)
        n.start()
        rc, out = self.cli("cluster", "create", *self.tls, "127.0.0.1:%d" % n.tls_port)
        self.assertEqual(rc, 1, out)
        self.assertIn("runs tls-cluster no", out)
        self.assertEqual(n.cmd("clusterx", "version"), -1)

    def test_certificates_that_do_not_verify_are_named(self):
        other = CA("another CA")
        self.addCleanup(shutil.rmtree, other.dir, True)
        ocert, okey = other.issue("stranger")
        for flags, want in [
            # The server's certificate against another CA.
            (["-tls", "-cacert", other.file, "-cert", self.cert, "-key", self.key],
             "does not verify against -cacert %s" % other.file),
            # No client certificate: the node asks for one.
            (["-tls", "-cacert", self.ca.file], "the server wants a client certificate"),
            # One of another CA: the node refuses it.
            (["-tls", "-cacert", self.ca.file, "-cert", ocert, "-key", okey],
             "the server refused this client's certificate"),
        ]:
            for args in (["info", "-port", str(self.nodes[0].tls_port)], ["cluster", "show"]):
                extra = [self.addrs[0]] if args[0] == "cluster" else []
                rc, out = self.cli(*args, *flags, *self.auth, *extra)
                self.assertEqual(rc, 1, (flags, out))
                self.assertIn(want, out, flags)
                self.assertNotIn("redis_version", out)

    def test_the_cli_runs_commands_with_a_client_certificate(self):
        push_ports(self.nodes, [n.tls_port for n in self.nodes], ["0-8191", "8192-16383"], 1)
        port = str(self.nodes[0].tls_port)
        rc, out = self.cli("info", "-port", port, *self.tls)
        self.assertEqual(rc, 0, out)
        self.assertIn("tcp_port: %d" % self.nodes[0].port, out)
        # upload attests the server first: the evidence binds the key of
        # the CA's certificate that this connection verified.
        rc, out = self.cli("upload", "-port", port, "-tls", "-cacert", self.ca.file, "-cert", self.cert,
                           "-cert-key", self.key, *self.auth, "-allow-simulated", "-q", "-key", "{b}up",
                           os.path.join(MODELS, "linear.onnx"))
        self.assertEqual(rc, 0, out)
        self.assertIn("SIMULATED: bound to this nonce and TLS key", out)
        self.assertEqual(self.nodes[0].cmd("EXISTS", "{b}up"), 1)
        rc, out = self.cli("info", "-port", port, *self.tls, "{b}up")
        self.assertEqual(rc, 0, out)
        # Without the certificate the node refuses the connection.
        rc, out = self.cli("info", "-port", port, "-tls", "-cacert", self.ca.file, *self.auth)
        self.assertEqual(rc, 1, out)
        self.assertIn("certificate required", out)
        # The flags need -tls.
        rc, out = self.cli("info", "-port", str(self.nodes[0].port), "-cert", self.cert, *self.auth)
        self.assertEqual(rc, 1, out)
        self.assertIn("need -tls", out)


if __name__ == "__main__":
    unittest.main()
