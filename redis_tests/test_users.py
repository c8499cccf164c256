"""Users and ownership (commands/owner.go, config/users.go), through
redis-py against the real server started with `user` directives: a model
or tensor belongs to the user who stored it, and no other user, the default
one included, may read, run, replace, rename, expire or delete it."""

import os
import sys
import threading
import time
import unittest

import numpy as np
import redis

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Server, ServerTestCase, poll, proc_status, reset_peak  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
# The error line is "NOPERM this user has ..."; redis-py raises
# NoPermissionError with the text after the prefix.
NOPERM = "this user has no permissions to access one of the keys used as arguments"


def linear_onnx():
    with open(os.path.join(HERE, "models", "linear.onnx"), "rb") as f:
        return f.read()


class UsersTest(ServerTestCase):
    SERVER_ARGS = ("--user", "alice", "on", ">pa", "--user", "bob", "on", ">pb", "--user", "carol", ">pc")

    def user(self, name, password):
        c = self.srv.client(username=name, password=password)
        self.addCleanup(c.close)
        return c

    def setUp(self):
        # Each user deletes their own keys first: the default user's
        # FLUSHALL in ServerTestCase.setUp is refused while others' exist.
        for name, pw in (("alice", "pa"), ("bob", "pb")):
            c = self.srv.client(username=name, password=pw)
            for key in c.scan_iter():
                try:
                    c.delete(key)
                except redis.exceptions.NoPermissionError:
                    pass
            c.close()
        super().setUp()
        self.alice, self.bob = self.user("alice", "pa"), self.user("bob", "pb")
        self.assertEqual(self.alice.execute_command("AI.MODELSTORE", "m", "ONNX", "CPU", "TAG", "a",
                                                    "BLOB", linear_onnx()), b"OK")
        self.alice.execute_command("AI.TENSORSET", "x", "FLOAT", 1, 4, "VALUES", 1, 2, 3, 4)

    def run_model(self, r, out="y"):
        self.assertEqual(r.execute_command("AI.MODELEXECUTE", "m", "INPUTS", 1, "x", "OUTPUTS", 1, out), b"OK")
        return [float(v) for v in r.execute_command("AI.TENSORGET", out, "VALUES")]

    def test_authentication(self):
        self.assertEqual(self.alice.execute_command("CLIENT", "INFO").split(b" user=")[1].split()[0], b"alice")
        self.assertEqual(self.alice.acl_whoami(), "alice")
        self.assertEqual(self.bob.acl_whoami(), "bob")
        self.assertEqual(self.r.acl_whoami(), "default")
        for name, pw in (("alice", "pb"), ("carol", "pc"), ("nobody", "x")):
            with self.assertRaises((redis.AuthenticationError, redis.ResponseError)) as cm:
                self.user(name, pw).ping()
            self.assertIn("invalid username-password pair", str(cm.exception))
        r = self.raw()
        self.assertIsInstance(r.cmd("HELLO", 3, "AUTH", "bob", "pb"), dict)

    def test_owner_runs_and_reads(self):
        self.assertEqual(self.run_model(self.alice)[:3], [7.0, 9.0, 11.0])
        self.assertEqual(self.alice.execute_command("AI.MODELGET", "m", "BLOB"), linear_onnx())
        self.assertEqual(self.alice.execute_command("AI._MODELSCAN"), [[b"m", b"a"]])
        info = self.alice.execute_command("AI.MODELINFO", "m")
        self.assertEqual(dict(zip(info[::2], info[1::2]))[b"owner"], b"alice")

    def test_others_are_refused(self):
        bob = self.bob
        default = self.srv.client()  # unauthenticated: the default user
        self.addCleanup(default.close)
        for r in (bob, default):
            for cmd in (
                ("AI.TENSORGET", "x", "VALUES"),
                ("AI.TENSORSET", "x", "FLOAT", 1, "VALUES", 0),
                ("AI.MODELGET", "m", "META"),
                ("AI.MODELEXECUTE", "m", "INPUTS", 1, "x", "OUTPUTS", 1, "y"),
                ("AI.MODELRUN", "m", "INPUTS", "x", "OUTPUTS", "y"),
                ("AI.MODELDEL", "m"),
                ("AI.INFO", "m"),
                ("AI.INFO", "m", "RESETSTAT"),
                ("AI.MODELINFO", "m"),
                ("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", linear_onnx()),
                ("DEL", "x", "m"),
                ("UNLINK", "m"),
                ("RENAME", "m", "m2"),
                ("RENAME", "x", "m"),
                ("EXPIRE", "m", 100),
                ("PEXPIREAT", "m", 1),
                # Whatever the condition would answer (security review: 0).
                ("EXPIRE", "m", 100, "NX"),
                ("EXPIRE", "m", 100, "GT"),
                ("PEXPIRE", "m", 100, "LT"),
                # Neither has a TTL: 0 told it (red-team review), where
                # one with a TTL got NOPERM.
                ("PERSIST", "m"),
                ("PERSIST", "x"),
                ("FLUSHALL",),
                ("FLUSHDB",),
            ):
                with self.subTest(cmd=cmd[0], user=r is bob and "bob" or "default"):
                    with self.assertRaises(redis.exceptions.NoPermissionError) as cm:
                        r.execute_command(*cmd)
                    self.assertEqual(str(cm.exception), NOPERM)
            # With a TTL, the same answer.
            self.assertEqual(self.alice.expire("x", 1000), True)
            with self.assertRaises(redis.exceptions.NoPermissionError):
                r.persist("x")
            self.assertEqual(self.alice.persist("x"), True)
            # A DAG resolves its models before it runs (as RedisAI does for
            # a missing one): the whole command is refused.
            with self.assertRaises(redis.exceptions.NoPermissionError):
                r.execute_command("AI.DAGEXECUTE", "LOAD", 1, "x", "|>",
                                  "AI.MODELEXECUTE", "m", "INPUTS", 1, "x", "OUTPUTS", 1, "y")
            self.assertEqual(r.execute_command("AI._MODELSCAN"), [])
            # Names stay visible, as in Redis.
            self.assertEqual(r.exists("m", "x"), 2)
            self.assertEqual(r.type("m"), b"AI__MODEL")
        # Nothing changed: the tensor beside the model in DEL x m and the
        # model itself are there, and alice's statistics count only her runs.
        self.assertEqual(self.alice.exists("x", "m"), 2)
        self.assertEqual(self.alice.ttl("m"), -1)
        self.assertEqual(self.run_model(self.alice)[:3], [7.0, 9.0, 11.0])
        info = self.alice.execute_command("AI.INFO", "m")
        self.assertEqual(dict(zip(info[::2], info[1::2]))[b"calls"], 1)

    def test_upload_onto_another_users_model_is_refused_before_its_bytes(self):
        # The first chunk's length header is enough: its 200 MB are skipped,
        # never buffered (the server's peak RSS does not grow by them).
        pid = self.srv.proc.pid
        reset_peak(pid)
        before = proc_status(pid, "VmHWM")
        chunk = bytes(200 << 20)
        with self.assertRaises(redis.exceptions.NoPermissionError) as cm:
            self.bob.execute_command("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", chunk, chunk)
        self.assertEqual(str(cm.exception), NOPERM)
        self.assertLess(proc_status(pid, "VmHWM") - before, 100 << 20)
        self.assertEqual(self.bob.ping(), True)
        self.assertEqual(self.run_model(self.alice)[:3], [7.0, 9.0, 11.0])

    def test_admin_payload_is_refused_before_its_bytes(self):
        # CLUSTERX RESTORE, an admin command, carries a payload of up to
        # max-model-size: a user without +@admin is refused on its length
        # header, not once all of it has been held in memory.
        pid = self.srv.proc.pid
        reset_peak(pid)
        before = proc_status(pid, "VmHWM")
        with self.assertRaises(redis.exceptions.NoPermissionError) as cm:
            self.bob.execute_command("CLUSTERX", "RESTORE", 0, bytes(300 << 20))
        self.assertEqual(str(cm.exception), "User bob has no permissions to run the 'clusterx' command")
        self.assertLess(proc_status(pid, "VmHWM") - before, 100 << 20)
        self.assertEqual(self.bob.ping(), True)

    def test_tensors_are_kept_apart(self):
        # Bob cannot feed alice's tensor to his own model, nor write his
        # model's output onto it, nor load it in a DAG; his own work is fine.
        bob = self.bob
        self.assertEqual(bob.execute_command("AI.MODELSTORE", "bm", "ONNX", "CPU", "BLOB", linear_onnx()), b"OK")
        self.assertEqual(bob.execute_command("AI.TENSORSET", "bx", "FLOAT", 1, 4, "VALUES", 1, 1, 1, 1), b"OK")
        for cmd in (
            ("AI.MODELEXECUTE", "bm", "INPUTS", 1, "x", "OUTPUTS", 1, "by"),
            ("AI.MODELEXECUTE", "bm", "INPUTS", 1, "bx", "OUTPUTS", 1, "x"),
            ("AI.DAGEXECUTE", "LOAD", 1, "x", "|>", "AI.TENSORGET", "x", "VALUES"),
            ("AI.DAGEXECUTE", "LOAD", 1, "bx", "PERSIST", 1, "x", "|>",
             "AI.MODELEXECUTE", "bm", "INPUTS", 1, "bx", "OUTPUTS", 1, "x"),
        ):
            with self.subTest(cmd=cmd):
                with self.assertRaises(redis.exceptions.NoPermissionError):
                    r = bob.execute_command(*cmd)
                    # A DAG reports a failed PERSIST as its last element.
                    if isinstance(r, list) and isinstance(r[-1], redis.ResponseError):
                        raise redis.exceptions.NoPermissionError(str(r[-1]))
        self.assertEqual(bob.execute_command("AI.MODELEXECUTE", "bm", "INPUTS", 1, "bx", "OUTPUTS", 1, "by"), b"OK")
        np.testing.assert_allclose([float(v) for v in bob.execute_command("AI.TENSORGET", "by", "VALUES")],
                                   [2.8, 4.2, 5.6], rtol=1e-6)
        # Alice's tensor is as she wrote it.
        self.assertEqual([float(v) for v in self.alice.execute_command("AI.TENSORGET", "x", "VALUES")], [1, 2, 3, 4])

    def test_each_user_keeps_own_models(self):
        # Bob stores his own model under another key and runs it; alice
        # cannot touch his; each one's _MODELSCAN lists only their own.
        bob = self.bob
        self.assertEqual(bob.execute_command("AI.MODELSTORE", "bm", "ONNX", "CPU", "TAG", "b",
                                             "BLOB", linear_onnx()), b"OK")
        bob.execute_command("AI.TENSORSET", "bx", "FLOAT", 1, 4, "VALUES", 1, 2, 3, 4)
        self.assertEqual(bob.execute_command("AI.MODELEXECUTE", "bm", "INPUTS", 1, "bx", "OUTPUTS", 1, "by"), b"OK")
        with self.assertRaises(redis.exceptions.NoPermissionError):
            self.alice.execute_command("AI.MODELDEL", "bm")
        self.assertEqual(bob.execute_command("AI._MODELSCAN"), [[b"bm", b"b"]])
        self.assertEqual(self.alice.execute_command("AI._MODELSCAN"), [[b"m", b"a"]])
        # The owner may rename, expire and delete.
        self.assertTrue(bob.rename("bm", "bm2"))
        self.assertTrue(bob.expire("bm2", 100))
        self.assertEqual(bob.delete("bm2"), 1)
        # FLUSHALL by a user who owns every value there is.
        self.assertEqual(self.alice.execute_command("AI.MODELDEL", "m"), b"OK")
        self.assertEqual(self.alice.delete("x"), 1)
        self.assertTrue(bob.flushall())
        self.assertEqual(bob.dbsize(), 0)


class UsersMaxModelsTest(unittest.TestCase):
    """max-models counts each user's models apart: one user's stores never
    evict another's."""

    def test_eviction_is_per_user(self):
        srv = Server("--max-models", "1", "--user", "alice", "on", ">pa", "--user", "bob", "on", ">pb").start()
        self.addCleanup(srv.stop)
        alice = srv.client(username="alice", password="pa")
        bob = srv.client(username="bob", password="pb")
        store = lambda r, key: r.execute_command("AI.MODELSTORE", key, "ONNX", "CPU", "BLOB", linear_onnx())  # noqa: E731
        self.assertEqual(store(alice, "a1"), b"OK")
        self.assertEqual(store(bob, "b1"), b"OK")
        self.assertEqual(alice.exists("a1", "b1"), 2)
        self.assertEqual(store(alice, "a2"), b"OK")
        self.assertEqual((alice.exists("a1"), alice.exists("a2"), bob.exists("b1")), (0, 1, 1))


class UsersShareNothingTest(unittest.TestCase):
    """Two users who store the same bytes get a copy each, with every
    engine: where one copy served both (the pure-Go engine, shared engine
    workers, ONNX Runtime in process), AI.MODELINFO's shared_with told bob
    how many copies alice held, and moved while she ran hers."""

    def test_same_bytes_two_users(self):
        for args in (("--inference-engine", "go"), ("--engine-isolation", "shared"), ("--engine-isolation", "off")):
            with self.subTest(args=args):
                srv = Server(*args, "--user", "alice", "on", ">pa", "--user", "bob", "on", ">pb").start()
                self.addCleanup(srv.stop)
                alice = srv.client(username="alice", password="pa")
                bob = srv.client(username="bob", password="pb")
                for r, key in ((bob, "b"), (alice, "a1"), (alice, "a2")):
                    self.assertEqual(r.execute_command("AI.MODELSTORE", key, "ONNX", "CPU", "BLOB", linear_onnx()), b"OK")
                alice.execute_command("AI.TENSORSET", "x", "FLOAT", 1, 4, "VALUES", 1, 2, 3, 4)

                def shared(r, key):
                    info = r.execute_command("AI.MODELINFO", key)
                    return dict(zip(info[::2], info[1::2]))[b"shared_with"]

                self.assertEqual((shared(alice, "a1"), shared(bob, "b")), (1, 0))
                # While alice runs hers, bob's count stays (it counted runs).
                stop, runs = threading.Event(), []

                def run():
                    c = srv.client(username="alice", password="pa")
                    while not stop.is_set():
                        runs.append(c.execute_command("AI.MODELEXECUTE", "a1", "INPUTS", 1, "x", "OUTPUTS", 1, "y"))
                    c.close()

                threads = [threading.Thread(target=run) for _ in range(3)]
                for t in threads:
                    t.start()
                try:
                    seen = {shared(bob, "b") for _ in range(200)} | {shared(alice, "a2") for _ in range(200)}
                finally:
                    stop.set()
                    for t in threads:
                        t.join(30)
                self.assertGreater(len(runs), 0)
                self.assertEqual(set(runs), {b"OK"})
                self.assertEqual(seen, {0, 1})
                self.assertEqual(shared(bob, "b"), 0)
                srv.assert_serving()


class UsersTakeTurnsTest(unittest.TestCase):
    """The run queue takes its users' requests in turn (modelstore/queue.go):
    a user whose clients outnumber THREADS_PER_QUEUE does not keep another
    user's run waiting behind his backlog (red-team review: alice's 4 ms run
    took 25-29 s behind bob's 12 clients of a 3 s model)."""

    BOB_CLIENTS = 4

    def test_a_users_backlog_does_not_hold_anothers_run(self):
        srv = Server("--threads-per-queue", "1", "--user", "alice", "on", ">pa", "--user", "bob", "on", ">pb").start()
        self.addCleanup(srv.stop)
        admin = srv.client()
        if admin.info("server").get("inference_engine") == "go":
            # make test-nocgo runs this file against the cgo-free build.
            self.skipTest("slow.onnx's Loop is not in the pure-Go engine; both builds share the run queue")
        # Each run of bob's slow.onnx (seconds) is ended after 1 s.
        self.assertEqual(admin.execute_command("AI.CONFIG", "MODEL_EXECUTION_TIMEOUT", 1000), b"OK")
        alice = srv.client(username="alice", password="pa")
        bob = srv.client(username="bob", password="pb")
        self.assertEqual(alice.execute_command("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", linear_onnx()), b"OK")
        alice.execute_command("AI.TENSORSET", "x", "FLOAT", 1, 4, "VALUES", 1, 2, 3, 4)
        with open(os.path.join(HERE, "models", "slow.onnx"), "rb") as f:
            self.assertEqual(bob.execute_command("AI.MODELSTORE", "s", "ONNX", "CPU", "BLOB", f.read()), b"OK")
        bob.execute_command("AI.TENSORSET", "bx", "FLOAT", 1, 1, "VALUES", 0.5)

        stop, ended = threading.Event(), []  # when each of bob's runs was answered

        def flood():
            c = srv.client(username="bob", password="pb")
            while not stop.is_set():
                try:
                    c.execute_command("AI.MODELEXECUTE", "s", "INPUTS", 1, "bx", "OUTPUTS", 1, "by")
                except redis.ResponseError:
                    pass  # its deadline ended it
                except redis.ConnectionError:
                    return  # killed at the end
                ended.append(time.monotonic())

        threads = [threading.Thread(target=flood) for _ in range(self.BOB_CLIENTS)]
        for t in threads:
            t.start()
        try:
            poll(lambda: int(admin.info("clients")["blocked_clients"]) == self.BOB_CLIENTS,
                 timeout=10, what="bob's clients' runs: one running, the others queued")
            start = time.monotonic()
            self.assertEqual(alice.execute_command("AI.MODELEXECUTE", "m", "INPUTS", 1, "x", "OUTPUTS", 1, "y"), b"OK")
            took = time.monotonic() - start
        finally:
            stop.set()
            admin.execute_command("CLIENT", "KILL", "USER", "bob")  # their requests queued leave
            for t in threads:
                t.join()
        # Fair: alice's run waits for the run in progress (1 s), rarely
        # for one more (it came just as that one ended). In arrival order it
        # waited for each of bob's requests queued before it: 3 more.
        behind = sum(start < t < start + took for t in ended)
        self.assertLessEqual(behind, 2, "alice's run took %.2f s, behind %d of bob's runs" % (took, behind))
        self.assertEqual([float(v) for v in alice.execute_command("AI.TENSORGET", "y", "VALUES")[:3]], [7.0, 9.0, 11.0])
        srv.assert_serving()


class AdminCommandsTest(unittest.TestCase):
    """With users, administrative commands are for the default user and the
    users given +@admin: one tenant must not stop, reconfigure or watch the
    server of all."""

    def test_admin_commands_need_admin(self):
        srv = Server("--user", "alice", "on", ">pa", "--user", "root", "on", ">pr", "+@admin").start()
        self.addCleanup(srv.stop)
        alice = srv.client(username="alice", password="pa")
        for cmd, name in ((("SHUTDOWN", "NOSAVE"), "shutdown"), (("CONFIG", "SET", "maxmemory", "1"), "config"),
                          (("CONFIG", "GET", "requirepass"), "config"), (("MONITOR",), "monitor"),
                          (("SLOWLOG", "GET"), "slowlog"), (("SAVE",), "save"), (("BGREWRITEAOF",), "bgrewriteaof"),
                          (("CLIENT", "KILL", "USER", "root"), "client|kill"), (("CLIENT", "LIST"), "client|list"),
                          (("AI.CONFIG", "THREADS_PER_QUEUE", 1), "ai.config|threads_per_queue"),
                          (("AI.CONFIG", "SET", "MODEL_CHUNK_SIZE", 10), "ai.config|set"),
                          (("CLUSTER", "RESET"), "cluster|reset"), (("ACL", "USERS"), "acl|users"),
                          # Read as KILL by the parser (strings.ToUpper), not by EqualFold.
                          (("CLIENT", "K\u0131LL", "USER", "root"), "client|kill")):
            with self.assertRaises(redis.exceptions.NoPermissionError, msg=cmd) as cm:
                alice.execute_command(*cmd)
            self.assertEqual(str(cm.exception), "User alice has no permissions to run the '%s' command" % name)
        # INFO ai lists every user's models: for admins only.
        self.assertNotIn("models", alice.info("ai"))
        self.assertIn("models", srv.client().info("ai"))
        # The rest is everyone's.
        self.assertIsInstance(alice.execute_command("CLIENT", "ID"), int)
        self.assertEqual(alice.execute_command("AI.CONFIG", "GET", "MODEL_CHUNK_SIZE"), 511 * 1024 * 1024)
        self.assertTrue(alice.ping())
        # An admin user and the default user may.
        root = srv.client(username="root", password="pr")
        self.assertTrue(root.config_set("maxmemory", "1gb"))
        self.assertEqual(srv.client().config_get("maxmemory"), {"maxmemory": str(1 << 30)})
        self.assertEqual(root.execute_command("CLIENT", "KILL", "USER", "alice"), 1)
        srv.assert_serving()


class UsersSurviveRestartTest(unittest.TestCase):
    """The owner is part of the sealed snapshot: after SAVE and a restart
    the model still belongs to the user who stored it."""

    ARGS = ("--user", "alice", "on", ">pa", "--user", "bob", "on", ">pb")

    def test_owner_after_restart(self):
        first = Server(*self.ARGS).start()
        self.addCleanup(first.stop)
        alice = first.client(username="alice", password="pa")
        self.assertEqual(alice.execute_command("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", linear_onnx()), b"OK")
        alice.execute_command("AI.TENSORSET", "x", "FLOAT", 1, 4, "VALUES", 1, 2, 3, 4)
        admin = first.client()  # the default user: SAVE and SHUTDOWN are administrative
        self.assertTrue(admin.save())
        # SHUTDOWN rather than first.stop(), which would remove the dir.
        try:
            admin.shutdown(nosave=True)
        except redis.ConnectionError:
            pass
        self.assertEqual(first.proc.wait(30), 0)
        second = Server(*self.ARGS, "--dir", first.dir).start()
        self.addCleanup(second.stop)
        alice = second.client(username="alice", password="pa")
        bob = second.client(username="bob", password="pb")
        self.assertEqual(alice.execute_command("AI.MODELEXECUTE", "m", "INPUTS", 1, "x", "OUTPUTS", 1, "y"), b"OK")
        y = np.array([float(v) for v in alice.execute_command("AI.TENSORGET", "y", "VALUES")])
        np.testing.assert_allclose(y[:3], [7, 9, 11])
        for cmd in (("AI.MODELGET", "m", "META"), ("AI.TENSORGET", "x", "VALUES"), ("AI.TENSORGET", "y", "VALUES")):
            with self.assertRaises(redis.exceptions.NoPermissionError) as cm:
                bob.execute_command(*cmd)
            self.assertEqual(str(cm.exception), NOPERM)
        alice.close()
        bob.close()

    def test_restarted_without_users_a_users_values_stay_out_of_reach(self):
        """A server started again on the same data without its user
        directives serves the default user's values, and refuses every
        other's to everyone (security review: the host could restart the
        enclave without them and read every tenant's tensors and models)."""
        first = Server(*self.ARGS).start()
        self.addCleanup(first.stop)
        alice = first.client(username="alice", password="pa")
        alice.execute_command("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", linear_onnx())
        alice.execute_command("AI.TENSORSET", "x", "FLOAT", 1, 4, "VALUES", 1, 2, 3, 4)
        admin = first.client()
        admin.execute_command("AI.TENSORSET", "mine", "FLOAT", 1, "VALUES", 5)
        try:
            admin.shutdown(save=True)
        except redis.ConnectionError:
            pass
        self.assertEqual(first.proc.wait(30), 0)
        second = Server("--dir", first.dir).start()
        self.addCleanup(second.stop)
        anyone = second.client()
        self.assertEqual(anyone.execute_command("AI.TENSORGET", "mine", "VALUES"), [b"5"])
        for cmd in (("AI.MODELGET", "m", "META"), ("AI.MODELGET", "m", "BLOB"), ("AI.MODELINFO", "m"),
                    ("AI.TENSORGET", "x", "VALUES"), ("AI.MODELEXECUTE", "m", "INPUTS", 1, "x", "OUTPUTS", 1, "y"),
                    ("AI.TENSORSET", "x", "FLOAT", 1, "VALUES", 0), ("DEL", "x"), ("AI.MODELDEL", "m")):
            with self.subTest(cmd=cmd[0]):
                with self.assertRaises(redis.exceptions.NoPermissionError) as cm:
                    anyone.execute_command(*cmd)
                self.assertEqual(str(cm.exception), NOPERM)
        self.assertEqual(anyone.execute_command("AI._MODELSCAN"), [])
        self.assertEqual(sorted(anyone.keys()), [b"m", b"mine", b"x"])  # names stay visible, as with users


if __name__ == "__main__":
    unittest.main()
