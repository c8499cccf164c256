"""RESP3 for redis-py releases that predate it.

redis-py speaks RESP3 from 5.0 on (protocol=3). Debian's python3-redis is
4.3.4, whose parser stops at the first RESP3 type byte. For those releases
this module gives redis-py a parser that reads every RESP3 type and a
connection that says HELLO 3 once it is connected (after AUTH), so that
Client(protocol=3) works on either. Replies come back as redis-py 5 gives
them: maps as dicts, sets and pushes as lists, doubles as floats, booleans
as bools, nulls as None, verbatim strings without their format prefix.
"""

import redis
from redis.connection import PythonParser, SERVER_CLOSED_CONNECTION_ERROR
from redis.exceptions import ConnectionError, InvalidResponse, ResponseError

NATIVE = int(redis.__version__.split(".")[0]) >= 5


class Resp3Parser(PythonParser):
    """PythonParser that also reads RESP3's types."""

    def read_response(self, disable_decoding=False):
        raw = self._buffer.readline()
        if not raw:
            raise ConnectionError(SERVER_CLOSED_CONNECTION_ERROR)
        byte, rest = raw[:1], raw[1:]
        if byte in (b"-", b"!"):
            if byte == b"!":
                rest = self._buffer.read(int(rest))
            error = self.parse_error(rest.decode("utf-8", errors="replace"))
            if isinstance(error, ConnectionError):
                raise error
            return error
        if byte == b"+":
            value = rest
        elif byte == b":" or byte == b"(":
            return int(rest)
        elif byte == b",":
            return float(rest)
        elif byte == b"#":
            return rest == b"t"
        elif byte == b"_":
            return None
        elif byte in (b"$", b"="):
            n = int(rest)
            if n == -1:
                return None
            value = self._buffer.read(n)
            if byte == b"=":
                value = value[4:]  # "txt:" or "mkd:"
        elif byte in (b"*", b"~", b">"):
            n = int(rest)
            if n == -1:
                return None
            return [self.read_response(disable_decoding) for _ in range(n)]
        elif byte == b"%":
            out = {}
            for _ in range(int(rest)):
                k = self.read_response(disable_decoding)
                out[k] = self.read_response(disable_decoding)
            return out
        elif byte == b"|":  # attributes: read and dropped, the reply follows
            for _ in range(2 * int(rest)):
                self.read_response(disable_decoding)
            return self.read_response(disable_decoding)
        else:
            raise InvalidResponse("Protocol Error: %r" % raw)
        if disable_decoding is False:
            value = self.encoder.decode(value)
        return value


class _Resp3:
    """Mixed into a redis-py Connection class: the RESP3 parser, and HELLO 3
    once connected and authenticated."""

    def __init__(self, *args, **kw):
        kw["parser_class"] = Resp3Parser
        super().__init__(*args, **kw)

    def on_connect(self):
        super().on_connect()
        self.send_command("HELLO", "3")
        reply = self.read_response()
        if isinstance(reply, ResponseError):
            raise reply
        if not isinstance(reply, dict) or reply.get(b"proto", reply.get("proto")) != 3:
            raise ConnectionError("the server did not switch to RESP3: %r" % (reply,))


def client(protocol: int, **kw) -> redis.Redis:
    """A single-connection redis.Redis speaking RESP protocol (2 or 3)."""
    if protocol == 2:
        return redis.Redis(single_connection_client=True, **kw)
    if protocol != 3:
        raise ValueError("protocol is 2 or 3")
    if NATIVE:
        return redis.Redis(single_connection_client=True, protocol=3, **kw)
    r = redis.Redis(single_connection_client=False, **kw)
    pool = r.connection_pool
    base = pool.connection_class
    pool.connection_class = type("Resp3" + base.__name__, (_Resp3, base), {})
    # As single_connection_client=True does, with the RESP3 class.
    r.single_connection_client = True
    r.connection = pool.get_connection("_")
    return r
