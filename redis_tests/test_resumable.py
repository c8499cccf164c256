"""Black-box tests of resumable uploads (issue 12): AI.UPLOAD holds a
model's bytes between commands and across connections, so that an upload
cut off at 90% goes on from there; enclaveai-cli upload -resume uses it.

    make build models
    cd redis_tests && /usr/bin/python3 -m unittest test_resumable -v
"""

import hashlib
import os
import socket
import subprocess
import sys
import threading
import time
import unittest

import numpy as np
import redis

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import REPO, Server, poll  # noqa: E402

MODELS = os.path.join(REPO, "redis_tests", "models")
CLI = os.path.join(REPO, "bin", "enclaveai-cli")
NO_UPLOAD = "no such upload (finished, aborted, expired, or the server restarted)"
OOM = "OOM command not allowed when used memory > 'maxmemory'."


def mlp():
    with open(os.path.join(MODELS, "mlp.onnx"), "rb") as f:
        return f.read()


def append_cmd(uid, offset, chunk):
    """The bytes of AI.UPLOAD APPEND uid offset BLOB chunk."""
    args = [b"AI.UPLOAD", b"APPEND", uid.encode(), str(offset).encode(), b"BLOB", chunk]
    out = b"*%d\r\n" % len(args)
    for a in args:
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


class ResumableTest(unittest.TestCase):
    SERVER_ARGS = ()

    def setUp(self):
        self.srv = Server(*self.SERVER_ARGS).start()
        self.addCleanup(self.srv.stop)
        self.r = self.srv.client(single_connection_client=True)

    def up(self, *args, r=None):
        return (r or self.r).execute_command("AI.UPLOAD", *args)

    def assertRefused(self, text, *args, r=None):
        with self.assertRaises(redis.ResponseError) as cm:
            (r or self.r).execute_command(*args)
        self.assertEqual(str(cm.exception), text.removeprefix("ERR "))

    def test_parts_over_two_connections_store_the_exact_bytes(self):
        data = mlp()
        uid = self.up("BEGIN", len(data)).decode()
        self.assertRegex(uid, r"^[0-9a-f-]{36}$")
        self.assertEqual(self.up("STATUS", uid)[:2], [len(data), 0])
        self.assertEqual(self.up("APPEND", uid, 0, "BLOB", data[:1_000_000]), 1_000_000)
        other = self.srv.client(single_connection_client=True)
        # Two chunks in one APPEND, on another connection.
        self.assertEqual(self.up("APPEND", uid, 1_000_000, "BLOB", data[1_000_000:2_000_000], data[2_000_000:], r=other),
                         len(data))
        self.assertEqual(self.up("STATUS", uid)[:2], [len(data), len(data)])
        self.assertEqual(self.r.execute_command("AI.MODELSTORE", "m", "ONNX", "CPU", "TAG", "v2", "UPLOAD", uid), b"OK")
        self.assertEqual(self.r.execute_command("AI.MODELGET", "m", "BLOB"), data)
        info = self.r.execute_command("AI.MODELINFO", "m")
        self.assertEqual(info[info.index(b"sha256") + 1].decode(), hashlib.sha256(data).hexdigest())
        # It runs, and the upload is gone once stored.
        x = np.ones((1, 784), np.float32)
        self.r.execute_command("AI.TENSORSET", "x", "FLOAT", 1, 784, "BLOB", x.tobytes())
        self.r.execute_command("AI.MODELEXECUTE", "m", "INPUTS", 1, "x", "OUTPUTS", 1, "y")
        self.assertEqual(self.r.execute_command("AI.TENSORGET", "y", "META")[3], [1, 10])
        self.assertRefused(NO_UPLOAD, "AI.UPLOAD", "STATUS", uid)
        # A server-named model from an upload.
        uid = self.up("BEGIN", len(data)).decode()
        self.up("APPEND", uid, 0, "BLOB", data)
        key = self.r.execute_command("AI.MODELSTORE", "*", "ONNX", "CPU", "UPLOAD", uid).decode()
        self.assertEqual(self.r.execute_command("AI.MODELGET", key, "BLOB"), data)

    def test_a_cut_off_append_leaves_the_bytes_before_it(self):
        data = mlp()
        uid = self.up("BEGIN", len(data)).decode()
        self.up("APPEND", uid, 0, "BLOB", data[:1_000_000])
        cmd = append_cmd(uid, 1_000_000, data[1_000_000:])
        s = socket.create_connection(("127.0.0.1", self.srv.port))
        s.sendall(cmd[:len(cmd) - 600_000])  # cut in the middle of the chunk
        # While its bytes arrive the upload is receiving: a second writer is refused.
        poll(lambda: self.up("STATUS", uid)[3] == 1)
        self.assertRefused("ERR the upload is receiving on another connection",
                           "AI.UPLOAD", "APPEND", uid, 1_000_000, "BLOB", b"x")
        s.close()
        # The cut-off command never counted: the upload still holds 1,000,000.
        poll(lambda: self.up("STATUS", uid)[3] == 0)
        self.assertEqual(self.up("STATUS", uid)[:2], [len(data), 1_000_000])
        self.up("APPEND", uid, 1_000_000, "BLOB", data[1_000_000:])
        self.assertEqual(self.up("STATUS", uid)[:2], [len(data), len(data)])
        self.r.execute_command("AI.MODELSTORE", "m", "ONNX", "CPU", "UPLOAD", uid)
        self.assertEqual(self.r.execute_command("AI.MODELGET", "m", "BLOB"), data)

    def test_refusals_reach_the_client_and_the_connection_goes_on(self):
        uid = self.up("BEGIN", 10).decode()
        self.up("APPEND", uid, 0, "BLOB", b"abcd")
        # A retried chunk (the offset it was sent at) is refused, not stored twice.
        self.assertRefused("ERR the upload holds 4 bytes: append at offset 4", "AI.UPLOAD", "APPEND", uid, 0, "BLOB", b"abcd")
        self.assertRefused("ERR the chunks pass the upload's announced size",
                           "AI.UPLOAD", "APPEND", uid, 4, "BLOB", b"x" * 7)
        self.assertRefused("ERR the upload holds 4 of its 10 bytes", "AI.MODELSTORE", "m", "ONNX", "CPU", "UPLOAD", uid)
        self.assertRefused(NO_UPLOAD, "AI.UPLOAD", "APPEND", "nosuch", 0, "BLOB", b"x")
        self.assertRefused(NO_UPLOAD, "AI.MODELSTORE", "m", "ONNX", "CPU", "UPLOAD", "nosuch")
        # An empty id is no upload's (it was read as no UPLOAD at all: "No graph").
        self.assertRefused(NO_UPLOAD, "AI.MODELSTORE", "m", "ONNX", "CPU", "UPLOAD", "")
        self.assertRefused("ERR upload size must be a positive integer", "AI.UPLOAD", "BEGIN", 0)
        self.assertRefused("ERR syntax error", "AI.UPLOAD", "STATUS", uid, "x")
        self.assertRefused("ERR wrong number of arguments for 'ai.upload' command", "AI.UPLOAD", "STATUS")
        self.assertRefused("ERR model exceeds max-model-size", "AI.UPLOAD", "BEGIN", 5 << 30)
        self.assertEqual(self.up("STATUS", uid)[:2], [10, 4])
        self.assertEqual(self.up("ABORT", uid), b"OK")
        self.assertRefused(NO_UPLOAD, "AI.UPLOAD", "STATUS", uid)
        self.assertTrue(self.r.ping())
        # Not inside MULTI, as RedisAI's other blocking commands.
        p = self.r.pipeline(transaction=True)
        p.execute_command("AI.UPLOAD", "BEGIN", 10)
        with self.assertRaises(redis.ResponseError):
            p.execute()

    def test_memory_count_and_idle_time_are_bounded(self):
        self.r.config_set("maxmemory", "10mb")
        # A size maxmemory cannot hold is refused before a byte is sent.
        self.assertRefused(OOM, "AI.UPLOAD", "BEGIN", 20_000_000)
        self.up("BEGIN", 6_000_000)
        self.r.config_set("maxmemory", "0")
        self.r.config_set("max-upload-sessions", "2")
        b = self.up("BEGIN", 100).decode()
        self.assertRefused("ERR too many uploads in progress (max-upload-sessions)", "AI.UPLOAD", "BEGIN", 100)
        self.up("APPEND", b, 0, "BLOB", b"x" * 50)
        self.r.config_set("upload-session-timeout", "1")
        # An APPEND of nothing does not keep the upload (and what it
        # reserves) alive: it held 190 MB of a 200 MB maxmemory forever.
        deadline = time.monotonic() + 10
        while not self.gone(b) and time.monotonic() < deadline:
            try:
                self.up("APPEND", b, 50, "BLOB", b"")
            except redis.ResponseError:
                pass
            time.sleep(0.2)
        self.assertTrue(self.gone(b), "kept alive by empty APPENDs")
        self.assertIn("resumable upload expired", self.srv.stderr())
        self.assertRegex(self.up("BEGIN", 100).decode(), r"^[0-9a-f-]{36}$")

    def test_an_upload_holds_only_the_bytes_it_received(self):
        """An upload that announces a size and sends nothing holds no room
        under maxmemory: one client's max-upload-sessions such uploads
        reserved all of it, and every other client's model uploads got -OOM
        (for good: it could begin them again as they expired). What an
        upload received counts until it is stored, aborted or expires."""
        data = mlp()  # 2.7 MB, stored in 1,000,000-byte chunks as redis-py users do
        chunks = [data[i:i + 1_000_000] for i in range(0, len(data), 1_000_000)]
        store = lambda key: self.r.execute_command("AI.MODELSTORE", key, "ONNX", "CPU", "BLOB", *chunks)
        idle = self.srv.client(single_connection_client=True)
        self.r.config_set("maxmemory", "10mb")
        uids = [self.up("BEGIN", 9_000_000, r=idle).decode()]
        self.assertEqual(store("m1"), b"OK")
        uids += [self.up("BEGIN", 7_000_000, r=idle).decode() for _ in range(15)]
        # The uploader's chunks are what take room: one that does not fit
        # next to the model is refused, the upload keeps what it held.
        self.assertRefused(OOM, "AI.UPLOAD", "APPEND", uids[0], 0, "BLOB", b"x" * 9_000_000, r=idle)
        self.assertEqual(self.up("STATUS", uids[0], r=idle)[:2], [9_000_000, 0])
        self.assertEqual(self.up("APPEND", uids[0], 0, "BLOB", b"x" * 6_000_000, r=idle), 6_000_000)
        self.assertRefused(OOM, "AI.MODELSTORE", "m2", "ONNX", "CPU", "BLOB", *chunks)
        # Left idle, the upload expires and its bytes are given back.
        self.r.config_set("upload-session-timeout", "1")
        poll(lambda: self.gone(uids[0]), timeout=10, what="the idle upload to expire")
        # The sweep takes an upload out of STATUS, then gives its bytes
        # back: the store may find them held for that moment.
        poll(lambda: self.stored_unless_oom(store, "m2"), timeout=2, what="the expired upload's bytes to be given back")
        self.assertRefused(NO_UPLOAD, "AI.UPLOAD", "APPEND", uids[0], 6_000_000, "BLOB", b"x", r=idle)

    def test_uploads_count_in_used_memory(self):
        """What uploads in progress hold is in INFO's used_memory, and
        maxmemory counts it for every write, not only for other uploads:
        a tensor that fits only without an upload's room is refused while
        the upload holds it. It is given back when the upload ends:
        aborted, or its connection closed mid-upload."""
        used = lambda: self.r.info("memory")["used_memory"]
        base = used()
        # A resumable upload holds what it received.
        uid = self.up("BEGIN", 3_000_000).decode()
        self.up("APPEND", uid, 0, "BLOB", b"x" * 2_000_000)
        self.assertGreaterEqual(used(), base + 2_000_000)
        self.assertEqual(self.up("ABORT", uid), b"OK")
        self.assertLess(used(), base + 100_000)
        # An AI.MODELSTORE whose chunk arrives holds the chunk's length.
        data = mlp()
        self.r.config_set("maxmemory", base + 4_000_000)
        s = socket.create_connection(("127.0.0.1", self.srv.port))
        self.addCleanup(s.close)
        words = [b"AI.MODELSTORE", b"m", b"ONNX", b"CPU", b"BLOB"]
        s.sendall(b"*6\r\n" + b"".join(b"$%d\r\n%s\r\n" % (len(w), w) for w in words))
        s.sendall(b"$%d\r\n" % len(data) + data[:1_000_000])
        poll(lambda: used() >= base + len(data), timeout=10, what="the upload's room in used_memory")
        # 2 MB fit in maxmemory, not next to the upload's 2.7 MB.
        self.assertRefused(OOM, "AI.TENSORSET", "t", "FLOAT", 500_000, "BLOB", b"\0" * 2_000_000)
        s.close()
        poll(lambda: used() < base + 100_000, timeout=10, what="the cut-off upload's room given back")
        self.assertEqual(self.r.execute_command("AI.TENSORSET", "t", "FLOAT", 500_000, "BLOB", b"\0" * 2_000_000), b"OK")
        # A stored model counts once, its blob, not its upload too: it
        # needs no room for itself twice (maxmemory holds 1.5 of it).
        self.r.delete("t")
        self.r.config_set("maxmemory", base + len(data) * 3 // 2)
        uid = self.up("BEGIN", len(data)).decode()
        self.up("APPEND", uid, 0, "BLOB", data)
        self.assertEqual(self.r.execute_command("AI.MODELSTORE", "m", "ONNX", "CPU", "UPLOAD", uid), b"OK")
        self.assertLess(used(), base + len(data) + 100_000)
        self.r.delete("m")
        poll(lambda: used() < base + 100_000, timeout=10, what="the deleted model's blob released")
        chunks = [data[i:i + 1_000_000] for i in range(0, len(data), 1_000_000)]
        self.assertEqual(self.r.execute_command("AI.MODELSTORE", "m", "ONNX", "CPU", "BLOB", *chunks), b"OK")
        self.assertLess(used(), base + len(data) + 100_000)

    @staticmethod
    def stored_unless_oom(store, key):
        try:
            return store(key) == b"OK"
        except redis.ResponseError as e:
            if str(e).startswith("OOM"):
                return False
            raise

    def gone(self, uid):
        try:
            self.up("STATUS", uid)
            return False
        except redis.ResponseError as e:
            return str(e) == NO_UPLOAD


class ResumableUsersTest(unittest.TestCase):
    SERVER_ARGS = ("--user", "alice", "on", ">pa", "--user", "bob", "on", ">pb")

    def setUp(self):
        self.srv = Server(*self.SERVER_ARGS).start()
        self.addCleanup(self.srv.stop)

    def test_an_upload_is_its_users_alone(self):
        alice = self.srv.client(username="alice", password="pa")
        bob = self.srv.client(username="bob", password="pb")
        data = mlp()
        uid = alice.execute_command("AI.UPLOAD", "BEGIN", len(data)).decode()
        alice.execute_command("AI.UPLOAD", "APPEND", uid, 0, "BLOB", data[:100])
        for args in (("AI.UPLOAD", "STATUS", uid), ("AI.UPLOAD", "ABORT", uid),
                     ("AI.UPLOAD", "APPEND", uid, 100, "BLOB", data[100:]),
                     ("AI.MODELSTORE", "m", "ONNX", "CPU", "UPLOAD", uid)):
            with self.assertRaises(redis.ResponseError) as cm:
                bob.execute_command(*args)
            self.assertEqual(str(cm.exception), NO_UPLOAD, args)
        alice.execute_command("AI.UPLOAD", "APPEND", uid, 100, "BLOB", data[100:])
        self.assertEqual(alice.execute_command("AI.MODELSTORE", "m", "ONNX", "CPU", "UPLOAD", uid), b"OK")
        self.assertEqual(alice.execute_command("AI.MODELGET", "m", "BLOB"), data)


class ResumableLimitsPerUserTest(unittest.TestCase):
    """With users, max-upload-sessions is per user and a user's uploads
    count against max-model-bytes-per-user: one tenant cannot take them all."""

    def test_one_user_cannot_take_every_upload(self):
        srv = Server("--user", "alice", "on", ">pa", "--user", "bob", "on", ">pb",
                     "--max-upload-sessions", 2, "--max-model-bytes-per-user", 1000).start()
        self.addCleanup(srv.stop)
        alice = srv.client(username="alice", password="pa")
        bob = srv.client(username="bob", password="pb")
        begin = lambda r, n: r.execute_command("AI.UPLOAD", "BEGIN", n)
        begin(alice, 600)
        with self.assertRaises(redis.ResponseError) as cm:
            begin(alice, 600)
        self.assertIn("max-model-bytes-per-user", str(cm.exception))
        begin(alice, 100)
        with self.assertRaises(redis.ResponseError) as cm:
            begin(alice, 100)
        self.assertEqual(str(cm.exception), "too many uploads in progress (max-upload-sessions)")
        begin(bob, 600)
        begin(bob, 100)


class CutProxy:
    """A TCP proxy to port that closes both sides once limit bytes went
    from the client to the server: a connection lost mid-upload."""

    def __init__(self, port, limit):
        self.port, self.limit = port, limit
        self.lsock = socket.socket()
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(1)
        self.addr = self.lsock.getsockname()
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        c, _ = self.lsock.accept()
        s = socket.create_connection(("127.0.0.1", self.port))

        def back():
            try:
                while True:
                    b = s.recv(65536)
                    if not b:
                        break
                    c.sendall(b)
            except OSError:
                pass
        threading.Thread(target=back, daemon=True).start()
        sent = 0
        try:
            while sent < self.limit:
                b = c.recv(min(65536, self.limit - sent))
                if not b:
                    break
                s.sendall(b)
                sent += len(b)
        except OSError:
            pass
        for x in (c, s):
            x.shutdown(socket.SHUT_RDWR)
            x.close()
        self.lsock.close()


class CLIResumeTest(unittest.TestCase):

    def test_upload_resume_goes_on_after_a_cut(self):
        srv = Server().start()
        self.addCleanup(srv.stop)
        data = mlp()
        with open(os.path.join(srv.dir, "mlp.onnx"), "wb") as f:
            f.write(data)
        path = f.name
        # 2.5 chunks of 1,000,000 bytes reach the server, then the connection is cut.
        proxy = CutProxy(srv.port, 2_500_000)
        cmd = [CLI, "upload", "-no-attest", "-q", "-resume", "-chunk", "1000000", "-key", "m"]
        p = subprocess.run(cmd + ["-port", str(proxy.addr[1]), path], capture_output=True, text=True, timeout=60)
        self.assertNotEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertTrue(os.path.exists(path + ".upload"))
        r = srv.client()
        self.assertEqual(r.exists("m"), 0)
        p = subprocess.run(cmd + ["-port", str(srv.port), path], capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertRegex(p.stdout, r"resuming upload [0-9a-f-]{36} at 2\.0 MB of 2\.7 MB\n")
        self.assertIn("stored m: 2.7 MB", p.stdout)
        self.assertIn("sha256 %s" % hashlib.sha256(data).hexdigest(), p.stdout)
        self.assertEqual(r.execute_command("AI.MODELGET", "m", "BLOB"), data)
        self.assertFalse(os.path.exists(path + ".upload"), "the state file goes once the model is stored")
        # A changed file starts over instead of resuming.
        proxy = CutProxy(srv.port, 1_500_000)
        p = subprocess.run(cmd + ["-port", str(proxy.addr[1]), path], capture_output=True, text=True, timeout=60)
        self.assertNotEqual(p.returncode, 0)
        os.utime(path, ns=(1, 1))
        p = subprocess.run(cmd + ["-port", str(srv.port), path], capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertNotIn("resuming", p.stdout)


if __name__ == "__main__":
    unittest.main()
