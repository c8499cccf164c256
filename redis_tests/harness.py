"""Black-box test harness: starts the real enclaveai-server on a free port.

Used by every Python test in this directory (Debian's /usr/bin/python3 with
python3-redis and python3-numpy). A test gets a running server with

    srv = Server("--maxclients", "3")    # extra redis-server style flags
    srv.start()
    r = srv.client()                     # redis.Redis, RESP2
    c = srv.raw()                        # raw socket: send bytes, read replies
    ...
    srv.stop()                           # SHUTDOWN; fails if the server crashed

or subclasses ServerTestCase, which shares one server per test class.

The binary is $ENCLAVEAI_SERVER, else <repo>/bin/enclaveai-server (`make build`).
Readiness is polled (PING, then DBSIZE until it is no longer -LOADING, on a
fresh connection), never slept for.
"""

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import unittest

import redis

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
START_TIMEOUT = 10.0
STOP_TIMEOUT = 10.0

# Text that only a crashing Go process writes on stderr.
CRASH_PATTERNS = re.compile(
    r"^(panic: |fatal error: |SIGSEGV|unexpected fault address|WARNING: DATA RACE)",
    re.MULTILINE)


def server_binary():
    """Path of the server binary under test; fails clearly when missing."""
    path = os.environ.get("ENCLAVEAI_SERVER") or os.path.join(REPO, "bin", "enclaveai-server")
    if not os.access(path, os.X_OK):
        raise RuntimeError("server binary %s not found: run `make build` or set ENCLAVEAI_SERVER" % path)
    return path


# The test models (make models: redis_tests/models/*.py write them).
MODELS = os.path.join(REPO, "redis_tests", "models")


def model_bytes(name):
    """The bytes of the test model file name (in MODELS)."""
    with open(os.path.join(MODELS, name), "rb") as f:
        return f.read()


def free_port():
    """A TCP port that was free a moment ago (the server binds it next)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def poll(predicate, timeout=5.0, interval=0.01, what="condition"):
    """Calls predicate until it returns a true value, which is returned.
    Raises AssertionError after timeout seconds."""
    deadline = time.monotonic() + timeout
    while True:
        v = predicate()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %.1fs waiting for %s" % (timeout, what))
        time.sleep(interval)


def proc_status(pid, field):
    """A /proc/<pid>/status field in bytes (VmRSS, VmHWM)."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no %s for pid %d" % (field, pid))


def rss_of(pid):
    """Resident set size of a process in bytes."""
    return proc_status(pid, "VmRSS")


def reset_peak(pid):
    """Starts a new VmHWM (peak RSS) measurement."""
    with open("/proc/%d/clear_refs" % pid, "w") as f:
        f.write("5")


class ServerError(Exception):
    """An error reply (`-...`) read by RawConn.read_reply."""

    def __init__(self, text):
        super().__init__(text)
        self.text = text


class Verbatim(str):
    """A RESP3 verbatim string (`=`): the text, with its format in .fmt."""
    fmt = "txt"


class Double(float):
    """A RESP3 double (`,`)."""


class Push(list):
    """A RESP3 push message (`>`)."""


class RawConn:
    """A plain socket speaking RESP by hand, for protocol-level tests.

    send() writes bytes as given; read_raw() returns the exact bytes of one
    reply; read_reply() decodes one reply (RESP2 or RESP3) into Python values:
    simple strings as str, bulk strings as bytes, errors as ServerError
    instances (returned, not raised), maps as dict, sets as set, doubles as
    Double, nulls as None."""

    def __init__(self, port, timeout=5.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.timeout = timeout

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send(self, data):
        self.sock.sendall(data)

    @staticmethod
    def encode(*args):
        """A command as a RESP multibulk."""
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            if isinstance(a, str):
                a = a.encode()
            elif isinstance(a, (int, float)):
                a = str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        return b"".join(out)

    def cmd(self, *args):
        """Sends one command, returns its decoded reply."""
        self.send(self.encode(*args))
        return self.read_reply()

    def cmd_raw(self, *args):
        """Sends one command, returns its reply's exact bytes."""
        self.send(self.encode(*args))
        return self.read_raw()

    def _fill(self):
        chunk = self.sock.recv(1 << 16)
        if not chunk:
            raise ConnectionError("connection closed by server (buffered: %r)" % self.buf[:200])
        self.buf += chunk

    def _line(self, pos):
        while True:
            i = self.buf.find(b"\r\n", pos)
            if i >= 0:
                return self.buf[pos:i], i + 2
            self._fill()

    def _need(self, end):
        while len(self.buf) < end:
            self._fill()

    def _parse(self, pos):
        line, pos = self._line(pos)
        t, rest = line[:1], line[1:]
        if t == b"+":
            return rest.decode(), pos
        if t == b"-":
            return ServerError(rest.decode()), pos
        if t == b":":
            return int(rest), pos
        if t == b"_":
            return None, pos
        if t == b",":
            return Double(float(rest)), pos
        if t == b"#":
            return rest == b"t", pos
        if t == b"(":
            return int(rest), pos
        if t in (b"$", b"=", b"!"):
            n = int(rest)
            if n < 0:
                return None, pos
            self._need(pos + n + 2)
            data = self.buf[pos:pos + n]
            if self.buf[pos + n:pos + n + 2] != b"\r\n":
                raise AssertionError("bad bulk terminator in %r" % self.buf[:pos + n + 2])
            pos += n + 2
            if t == b"=":
                v = Verbatim(data[4:].decode())
                v.fmt = data[:3].decode()
                return v, pos
            if t == b"!":
                return ServerError(data.decode()), pos
            return data, pos
        if t in (b"*", b"~", b">"):
            n = int(rest)
            if n < 0:
                return None, pos
            items = []
            for _ in range(n):
                v, pos = self._parse(pos)
                items.append(v)
            if t == b"~":
                return set(items), pos
            if t == b">":
                return Push(items), pos
            return items, pos
        if t in (b"%", b"|"):
            n = int(rest)
            d = {}
            for _ in range(n):
                k, pos = self._parse(pos)
                v, pos = self._parse(pos)
                d[k] = v
            return d, pos
        raise AssertionError("unknown RESP type %r in %r" % (t, self.buf[:200]))

    def read_raw(self):
        """The exact bytes of the next reply."""
        _, end = self._parse(0)
        raw, self.buf = self.buf[:end], self.buf[end:]
        return raw

    def read_reply(self):
        """The next reply, decoded."""
        v, end = self._parse(0)
        self.buf = self.buf[end:]
        return v

    def read_until_closed(self, timeout=5.0):
        """Reads until the server closes the connection; returns everything
        read (buffered bytes included). Fails if still open after timeout."""
        self.sock.settimeout(timeout)
        data = self.buf
        self.buf = b""
        try:
            while True:
                chunk = self.sock.recv(1 << 16)
                if not chunk:
                    return data
                data += chunk
        except socket.timeout:
            raise AssertionError("connection still open after %.1fs; read %r" % (timeout, data[:200]))
        except ConnectionResetError:
            return data
        finally:
            self.sock.settimeout(self.timeout)

    def is_open(self, wait=0.2):
        """True when nothing arrives and the connection stays open for `wait` seconds."""
        self.sock.settimeout(wait)
        try:
            chunk = self.sock.recv(1 << 16)
            if chunk:
                self.buf += chunk
                return True
            return False
        except socket.timeout:
            return True
        except ConnectionResetError:
            return False
        finally:
            self.sock.settimeout(self.timeout)


class Server:
    """One enclaveai-server process on a free port with its own temp dir."""

    def __init__(self, *args, password=None, binary=None, start_timeout=START_TIMEOUT):
        self.binary = binary
        self.start_timeout = start_timeout  # a start that loads gigabytes takes longer
        self.args = [str(a) for a in args]
        self.password = password
        if password is not None:
            self.args += ["--requirepass", password]
        self.proc = None
        self.port = None
        self.dir = None
        self.stderr_path = None
        self._clients = []
        self._raws = []

    # -- lifecycle ---------------------------------------------------------

    def start(self):
        binary = self.binary or server_binary()
        self.dir = tempfile.mkdtemp(prefix="enclaveai-test-")
        self.stderr_path = os.path.join(self.dir, "server.stderr")
        for attempt in range(3):
            self.port = free_port()
            with open(self.stderr_path, "wb") as errf:
                self.proc = subprocess.Popen(
                    [binary, "--port", str(self.port), "--dir", self.dir] + self.args,
                    cwd=self.dir, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errf)
            try:
                self._wait_ready()
                return self
            except _PortTaken:
                continue
        raise RuntimeError("could not bind a free port in 3 attempts:\n" + self.stderr())

    def _wait_ready(self):
        deadline = time.monotonic() + self.start_timeout
        while True:
            rc = self.proc.poll()
            if rc is not None:
                err = self.stderr()
                if "address already in use" in err:
                    raise _PortTaken()
                raise RuntimeError("server exited with %s before it was ready; stderr:\n%s" % (rc, err))
            try:
                with RawConn(self.port, timeout=1) as c:
                    # PING answers as soon as the port is open; DBSIZE only
                    # once a snapshot is loaded (before, it is -LOADING).
                    if c.cmd("PING") == "PONG" or self.password is not None:
                        if self.password is not None:
                            c.cmd("AUTH", self.password)
                        if isinstance(c.cmd("DBSIZE"), int):
                            return
            except (OSError, ConnectionError):
                pass
            if time.monotonic() > deadline:
                self.proc.kill()
                self.proc.wait()
                raise RuntimeError("server not ready after %.0fs; stderr:\n%s" % (self.start_timeout, self.stderr()))
            time.sleep(0.01)

    def stderr(self):
        try:
            with open(self.stderr_path, "rb") as f:
                return f.read().decode(errors="replace")
        except (OSError, TypeError):
            return ""

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self):
        """Stops the server (SHUTDOWN NOSAVE, else SIGTERM, else SIGKILL),
        removes its dir, and raises AssertionError if it crashed: a non-zero
        exit status, panic text on stderr, or no way to stop it but SIGKILL.
        A server that already exited with status 0 (a test sent SHUTDOWN)
        is fine."""
        if self.proc is None:
            return
        for c in self._clients:
            try:
                c.close()
            except Exception:
                pass
        for c in self._raws:
            c.close()
        problems = []
        if self.proc.poll() is None:
            try:
                with RawConn(self.port, timeout=2) as c:
                    if self.password is not None:
                        c.cmd("AUTH", self.password)
                    c.send(RawConn.encode("SHUTDOWN", "NOSAVE"))
                    c.read_until_closed(timeout=2)
            except (AssertionError, OSError):
                pass  # e.g. maxclients reached: SIGTERM below
            try:
                self.proc.wait(3)
            except subprocess.TimeoutExpired:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(STOP_TIMEOUT)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
                    problems.append("neither SHUTDOWN nor SIGTERM stopped the server; killed")
        if self.proc.returncode != 0 and not problems:
            problems.append("server exited with status %s" % self.proc.returncode)
        err = self.stderr()
        if CRASH_PATTERNS.search(err):
            problems.append("crash text on stderr")
        self.proc = None
        shutil.rmtree(self.dir, ignore_errors=True)
        if problems:
            raise AssertionError("server on port %s: %s; stderr:\n%s" % (self.port, "; ".join(problems), err[-4000:]))

    # -- clients -----------------------------------------------------------

    def client(self, **kw):
        """A redis-py client (RESP2), authenticated when the server has a password."""
        kw.setdefault("socket_timeout", 10)
        if self.password is not None:
            kw.setdefault("password", self.password)
        c = redis.Redis(host="127.0.0.1", port=self.port, **kw)
        self._clients.append(c)
        return c

    def raw(self, auth=True, timeout=5.0):
        """A raw socket connection; authenticated first when auth and the
        server has a password."""
        c = RawConn(self.port, timeout=timeout)
        self._raws.append(c)
        if auth and self.password is not None:
            reply = c.cmd("AUTH", self.password)
            assert reply == "OK", reply
        return c

    def rss(self):
        """The server process's resident set size in bytes."""
        return rss_of(self.proc.pid)

    def assert_serving(self):
        """Fails unless the server answers PING on a new connection."""
        with RawConn(self.port) as c:
            if self.password is not None:
                c.cmd("AUTH", self.password)
            reply = c.cmd("PING")
            if reply != "PONG":
                raise AssertionError("PING on a new connection got %r" % (reply,))


class _PortTaken(Exception):
    pass


class ServerTestCase(unittest.TestCase):
    """Shares one server per test class. Subclasses may set SERVER_ARGS and
    PASSWORD. Each test starts with an empty keyspace (FLUSHALL) and a
    fresh redis-py client in self.r; self.srv is the Server."""

    SERVER_ARGS = ()
    PASSWORD = None

    @classmethod
    def setUpClass(cls):
        cls.srv = Server(*cls.SERVER_ARGS, password=cls.PASSWORD).start()

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()

    def setUp(self):
        self.assertTrue(self.srv.alive(), "server died in an earlier test:\n" + self.srv.stderr()[-4000:])
        self.r = self.srv.client()
        self.r.flushall()

    def tearDown(self):
        self.r.close()

    def raw(self, **kw):
        c = self.srv.raw(**kw)
        self.addCleanup(c.close)
        return c

    def assertError(self, fn, text, *args):
        """fn(*args) raises a redis ResponseError whose message is exactly text
        (redis-py strips a leading 'ERR ' only)."""
        with self.assertRaises(redis.ResponseError) as cm:
            fn(*args)
        want = text[4:] if text.startswith("ERR ") else text
        self.assertEqual(str(cm.exception), want)


def recording_listener(test, port=None):
    """A server on 127.0.0.1 that knows no command: it answers each one
    "-ERR unknown command" and keeps every byte it was sent. Returns (port,
    the list of what it received)."""
    got = []
    ln = socket.socket()
    ln.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ln.bind(("127.0.0.1", port or 0))
    ln.listen(4)
    test.addCleanup(ln.close)

    def serve():
        while True:
            try:
                conn, _ = ln.accept()
            except OSError:
                return
            with conn:
                while True:
                    try:
                        data = conn.recv(1 << 16)
                    except OSError:
                        break
                    if not data:
                        break
                    got.append(data)
                    conn.sendall(b"-ERR unknown command\r\n" * data.count(b"*"))
    threading.Thread(target=serve, daemon=True).start()
    return ln.getsockname()[1], got
