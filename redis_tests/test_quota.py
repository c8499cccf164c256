"""max-model-bytes-per-user under concurrency (commands/policy.go): a
user's uploads side by side, on many connections, never take it past the
limit, so that with maxmemory one tenant cannot fill the room the others
need. Each chunk is claimed on its length header, a resumable upload its
announced size at AI.UPLOAD BEGIN, and a store checks again as the model
enters the keyspace; a refused, cut-off or stored upload gives its claim
back."""

import os
import socket
import sys
import threading
import unittest

import onnx
import redis

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Server, model_bytes, poll  # noqa: E402

REFUSED = "model upload refused: the user's models would pass max-model-bytes-per-user"
LIMIT = 3000000


def mlp_variants(n):
    """n copies of mlp.onnx (2,679,188 bytes) that differ only in their
    doc_string, so that none deduplicates another."""
    base = onnx.load_from_string(model_bytes("mlp.onnx"))
    out = []
    for i in range(n):
        base.doc_string = "variant %02d" % i
        out.append(base.SerializeToString())
    return out


class QuotaTest(unittest.TestCase):
    """Users alice and bob, a 3 MB max-model-bytes-per-user (one mlp.onnx
    fits, two do not) and a 30 MB maxmemory (eleven of bob's models filled
    it, and alice got -OOM for everything)."""

    @classmethod
    def setUpClass(cls):
        cls.models = mlp_variants(17)
        cls.size = len(cls.models[0])
        assert cls.size <= LIMIT < 2 * cls.size, cls.size

    def setUp(self):
        self.srv = Server("--user", "alice", "on", ">pa", "--user", "bob", "on", ">pb",
                          "--user", "root", "on", ">pr", "+@admin",
                          "--max-model-bytes-per-user", LIMIT, "--maxmemory", "30mb",
                          "--log-progress-bytes", "1mb", password="adminpw").start()
        self.addCleanup(self.srv.stop)

    def user(self, name, password):
        c = self.srv.client(username=name, password=password)
        self.addCleanup(c.close)
        return c

    def store(self, r, key, i):
        return r.execute_command("AI.MODELSTORE", key, "ONNX", "CPU", "BLOB", self.models[i])

    def assertRefused(self, fn, *args):
        with self.assertRaises(redis.ResponseError) as cm:
            fn(*args)
        self.assertEqual(str(cm.exception), REFUSED)

    def assertOthersServed(self):
        """alice still stores a model and a 4 MB tensor."""
        alice = self.user("alice", "pa")
        self.assertEqual(self.store(alice, "a", 16), b"OK")
        self.assertEqual(alice.execute_command("AI.TENSORSET", "at", "FLOAT", 1000, 1000), b"OK")

    def test_parallel_stores_stay_within_the_limit(self):
        n = 16
        clients = [self.user("bob", "pb") for _ in range(n)]
        for c in clients:
            c.ping()  # connected and authenticated before the barrier
        barrier = threading.Barrier(n)
        replies = [None] * n

        def run(i):
            barrier.wait()
            try:
                replies[i] = self.store(clients[i], "q%d" % i, i)
            except redis.ResponseError as e:
                replies[i] = e

        threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        stored = [i for i in range(n) if replies[i] == b"OK"]
        # The limit's worth, no more (one model), and no less: the first
        # claim made is stored.
        self.assertEqual(len(stored), LIMIT // self.size, replies)
        for i in range(n):
            if i not in stored:
                self.assertEqual(str(replies[i]), REFUSED)
        bob = self.user("bob", "pb")
        self.assertEqual(bob.exists(*["q%d" % i for i in range(n)]), len(stored))
        self.assertLessEqual(len(stored) * self.size, LIMIT)
        self.assertOthersServed()

    def test_a_held_upload_counts_against_a_blob_store(self):
        bob = self.user("bob", "pb")
        uid = bob.execute_command("AI.UPLOAD", "BEGIN", self.size - 11)
        self.assertRefused(self.store, bob, "e3", 0)
        # Aborted, the upload gives its claim back.
        self.assertEqual(bob.execute_command("AI.UPLOAD", "ABORT", uid), b"OK")
        self.assertEqual(self.store(bob, "e3", 0), b"OK")
        # And a stored model counts against an upload's BEGIN.
        self.assertRefused(bob.execute_command, "AI.UPLOAD", "BEGIN", self.size)
        self.assertOthersServed()

    def test_a_cut_off_upload_gives_its_claim_back(self):
        bob = self.user("bob", "pb")
        data = self.models[0]
        sock = socket.create_connection(("127.0.0.1", self.srv.port))
        self.addCleanup(sock.close)
        sock.sendall(b"*3\r\n$4\r\nAUTH\r\n$3\r\nbob\r\n$2\r\npb\r\n")
        words = [b"AI.MODELSTORE", b"cut", b"ONNX", b"CPU", b"BLOB"]
        sock.sendall(b"*6\r\n" + b"".join(b"$%d\r\n%s\r\n" % (len(w), w) for w in words))
        sock.sendall(b"$%d\r\n" % len(data) + data[:2 << 20])
        # The server logs its progress once a megabyte has arrived: the
        # chunk was claimed on its length header before.
        poll(lambda: "upload progress" in self.srv.stderr(), timeout=30, what="the upload to arrive")
        # While it arrives, it counts: bob cannot begin another model.
        self.assertRefused(bob.execute_command, "AI.UPLOAD", "BEGIN", self.size)
        self.assertRefused(self.store, bob, "other", 1)
        sock.close()

        def begun():
            try:
                uid = bob.execute_command("AI.UPLOAD", "BEGIN", self.size)
            except redis.ResponseError as e:
                self.assertEqual(str(e), REFUSED)
                return False
            return bob.execute_command("AI.UPLOAD", "ABORT", uid) == b"OK"

        poll(begun, timeout=10, what="the cut-off upload's claim given back")
        self.assertEqual(self.store(bob, "other", 1), b"OK")
        self.assertEqual(bob.exists("cut"), 0)

    def test_an_expired_model_stops_counting_at_once(self):
        """A model whose TTL has passed is gone for every command, so it
        counts against its owner's limit no longer, whether or not active
        expiry has removed it yet: it counted until then, and the owner's
        next model was refused though the old one could not be read."""
        bob = self.user("bob", "pb")
        # Keys with a TTL for active expiry to sample, so that it is
        # unlikely to find the model between its expiry and the store
        # below (each sweep samples 20 keys with a TTL).
        p = bob.pipeline(transaction=False)
        for i in range(20000):
            p.execute_command("AI.TENSORSET", "t%d" % i, "INT8", 1, "VALUES", 1)
            p.pexpire("t%d" % i, 3600_000)
        p.execute()
        admin = self.srv.client()
        base = admin.info("memory")["used_memory"]
        self.assertEqual(self.store(bob, "old", 0), b"OK")
        self.assertRefused(self.store, bob, "new", 1)  # the limit holds one model
        self.assertEqual(bob.pexpire("old", 300), True)
        poll(lambda: bob.exists("old") == 0, timeout=5, interval=0.005, what="the model to expire")
        self.assertEqual(admin.info("stats")["expired_keys"], 0,
                         "active expiry removed the model first: the store below proves nothing")
        self.assertEqual(self.store(bob, "new", 1), b"OK")
        with self.assertRaises(redis.ResponseError):
            bob.execute_command("AI.MODELGET", "old", "BLOB")
        # The expired model was removed and its bytes given back: one
        # model's blob is held, not two.
        poll(lambda: admin.info("stats")["expired_keys"] == 1, timeout=5, what="the expired model counted as expired")
        poll(lambda: admin.info("memory")["used_memory"] < base + 1.5 * self.size, timeout=5,
             what="the expired model's blob released")
        # And a resumable upload's BEGIN is measured the same way.
        self.assertEqual(bob.pexpire("new", 300), True)
        poll(lambda: bob.exists("new") == 0, timeout=5, interval=0.005, what="the model to expire")
        uid = bob.execute_command("AI.UPLOAD", "BEGIN", self.size)
        self.assertEqual(bob.execute_command("AI.UPLOAD", "ABORT", uid), b"OK")


if __name__ == "__main__":
    unittest.main()
