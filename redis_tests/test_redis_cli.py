"""redis-cli (Debian redis-tools) against the real server.

redis-cli is what people reach for first: one-shot commands in raw and
--no-raw output, RESP3 with -3, and the interactive mode, which asks the
server for COMMAND DOCS at startup to build its help and hints (and asserts
on the reply's shape)."""

import os
import pty
import select
import shutil
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import RawConn, ServerTestCase  # noqa: E402

REDIS_CLI = shutil.which("redis-cli")


@unittest.skipUnless(REDIS_CLI, "redis-cli not installed (make deps installs redis-tools)")
class TestRedisCli(ServerTestCase):

    def cli(self, *args, rc=0):
        p = subprocess.run([REDIS_CLI, "-p", str(self.srv.port)] + [str(a) for a in args],
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=20)
        self.assertEqual(p.returncode, rc, p.stderr)
        return p.stdout.decode()

    def test_ping(self):
        self.assertEqual(self.cli("PING"), "PONG\n")
        self.assertEqual(self.cli("--no-raw", "PING"), "PONG\n")

    def test_tensors(self):
        self.assertEqual(self.cli("AI.TENSORSET", "t", "FLOAT", 2, "VALUES", 1, "2.5"), "OK\n")
        # Not a tty: raw output, one element a line.
        self.assertEqual(self.cli("AI.TENSORGET", "t", "VALUES"), "1\n2.5\n")
        self.assertEqual(self.cli("--no-raw", "AI.TENSORGET", "t", "META", "VALUES"),
                         '1) "dtype"\n2) "FLOAT"\n3) "shape"\n4) 1) (integer) 2\n5) "values"\n'
                         '6) 1) "1"\n   2) "2.5"\n')
        self.assertEqual(self.cli("--no-raw", "AI.TENSORGET", "t", "BLOB"), '"\\x00\\x00\\x80?\\x00\\x00 @"\n')
        self.assertEqual(self.cli("AI.TENSORSET", "i", "INT8", 1, 3, "VALUES", -1, 0, 1), "OK\n")
        self.assertEqual(self.cli("--no-raw", "AI.TENSORGET", "i", "VALUES"),
                         "1) (integer) -1\n2) (integer) 0\n3) (integer) 1\n")
        self.assertEqual(self.cli("--no-raw", "TYPE", "t"), "AI_TENSOR\n")
        self.assertEqual(self.cli("--no-raw", "KEYS", "*").splitlines().__len__(), 2)

    def test_resp3(self):
        self.cli("AI.TENSORSET", "t", "DOUBLE", 2, "VALUES", "0.5", "-3")
        self.assertEqual(self.cli("-3", "--no-raw", "AI.TENSORGET", "t", "VALUES"),
                         "1) (double) 0.5\n2) (double) -3\n")
        out = self.cli("-3", "--no-raw", "HELLO", "3")
        self.assertIn('1# "server" => "redis"', out)
        self.assertIn('3# "proto" => (integer) 3', out)
        self.assertEqual(self.cli("-3", "--no-raw", "CLIENT", "GETNAME"), "(nil)\n")

    def test_errors(self):
        # redis-cli exits 0 after an error reply unless told otherwise; the text is what matters.
        self.assertEqual(self.cli("--no-raw", "AI.TENSORGET", "nokey"),
                         "(error) ERR tensor key is empty or in a different shard\n")
        self.assertEqual(self.cli("--no-raw", "AI.TENSORSET", "k"),
                         "(error) ERR wrong number of arguments for 'ai.tensorset' command\n")
        # Raw mode (not a tty): redis-cli prints the error text and a blank line.
        self.assertEqual(self.cli("AI.TENSORSET", "k", "INT", 1), "ERR invalid data type\n\n")

    def test_stdin_pipe(self):
        p = subprocess.run([REDIS_CLI, "-p", str(self.srv.port)],
                           input=b"AI.TENSORSET s STRING 2 VALUES a b\nAI.TENSORGET s VALUES\nDBSIZE\n",
                           capture_output=True, timeout=20)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.decode(), "OK\na\nb\n1\n")

    def test_command_docs_as_redis_cli_reads_it(self):
        out = self.cli("--no-raw", "COMMAND", "DOCS", "ai.tensorget")
        self.assertTrue(out.startswith('1) "ai.tensorget"\n2) 1) "summary"\n'), out)
        self.assertNotIn("(error)", self.cli("COMMAND", "DOCS"))

    def test_interactive_startup(self):
        """An interactive redis-cli fetches COMMAND DOCS first: it must not
        get an error (nor crash on the reply), then work as usual."""
        ctl = self.raw()
        errors_before = self._errors(ctl)
        pid, fd = pty.fork()
        if pid == 0:  # child: redis-cli on a terminal
            try:
                # A dumb terminal: linenoise reads plain lines instead of
                # querying the cursor position with escape sequences.
                env = dict(os.environ, TERM="dumb")
                env.pop("REDISCLI_HISTFILE", None)
                env["HOME"] = self.srv.dir  # no ~/.rediscli_history written
                os.execve(REDIS_CLI, [REDIS_CLI, "-p", str(self.srv.port)], env)
            finally:
                os._exit(127)
        status = None
        try:
            prompt = ("127.0.0.1:%d> " % self.srv.port).encode()
            out = self._read_until(fd, prompt)
            # Its last command so far is the startup COMMAND DOCS.
            startup = [line for line in ctl.cmd("CLIENT", "LIST").decode().splitlines()
                       if " cmd=command|docs " in line]
            self.assertEqual(len(startup), 1, "redis-cli sent COMMAND (DOCS) at startup")
            os.write(fd, b"AI.TENSORSET t INT8 1 VALUES 7\n")
            out += self._read_until(fd, b"OK")
            os.write(fd, b"AI.TENSORGET t VALUES\n")
            out += self._read_until(fd, b"(integer) 7")
            # Nothing redis-cli sent got an error reply.
            mine = [line for line in ctl.cmd("CLIENT", "LIST").decode().splitlines()
                    if "cmd=ai.tensorget" in line]
            self.assertEqual(len(mine), 1, "the interactive redis-cli is connected")
            self.assertEqual(self._errors(ctl), errors_before, "redis-cli got an error reply:\n" + out.decode(errors="replace"))
            os.write(fd, b"quit\n")
            self._read_until(fd, b"")
            _, status = os.waitpid(pid, 0)
        finally:
            if status is None:  # a failure above: do not leave redis-cli behind
                os.kill(pid, 9)
                os.waitpid(pid, 0)
            os.close(fd)
        self.assertTrue(os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0,
                        "redis-cli did not exit cleanly (status %r):\n%s" % (status, out.decode(errors="replace")))

    def test_interactive_help_shows_the_syntax(self):
        """redis-cli's `help <command>` prints the syntax COMMAND DOCS's
        arguments give it, subcommands' included (client review: it
        printed the name and nothing after it)."""
        pid, fd = pty.fork()
        if pid == 0:
            try:
                env = dict(os.environ, TERM="dumb")
                env.pop("REDISCLI_HISTFILE", None)
                env["HOME"] = self.srv.dir
                os.execve(REDIS_CLI, [REDIS_CLI, "-p", str(self.srv.port)], env)
            finally:
                os._exit(127)
        try:
            self._read_until(fd, ("127.0.0.1:%d> " % self.srv.port).encode())
            for line, want in ((b"help expire\n", b"key seconds [NX|XX|GT|LT]"),
                               (b"help client kill\n", b"ip:port|option value [option value ...]"),
                               (b"help ai.tensorget\n", b"key [META] [BLOB|VALUES]")):
                os.write(fd, line)
                self._read_until(fd, want)
            os.write(fd, b"quit\n")
            self._read_until(fd, b"")
        finally:
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
            os.waitpid(pid, 0)
            os.close(fd)

    @staticmethod
    def _errors(c):
        for line in c.cmd("INFO", "stats").decode().splitlines():
            if line.startswith("total_error_replies:"):
                return int(line.split(":")[1])
        raise AssertionError("no total_error_replies in INFO stats")

    @staticmethod
    def _read_until(fd, token, timeout=10):
        """Reads the pty until token appears (b"" = until EOF)."""
        data = b""
        deadline = time.monotonic() + timeout
        while token == b"" or token not in data:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError("redis-cli: %r not seen; output:\n%s" % (token, data.decode(errors="replace")))
            r, _, _ = select.select([fd], [], [], left)
            if not r:
                continue
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # EIO: the child closed the terminal
                chunk = b""
            if not chunk:
                if token == b"":
                    return data
                raise AssertionError("redis-cli exited before %r; output:\n%s" % (token, data.decode(errors="replace")))
            data += chunk
        return data


if __name__ == "__main__":
    unittest.main()
