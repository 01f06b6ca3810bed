"""A fake dispatcher for the tests of the client's transport: a loopback
HTTP/1.1 server on a thread that answers each request as a test script
says (or closes, or stalls), to play a broken or hostile server."""

import json
import socket
import struct
import threading
from typing import Callable, List, Optional, Tuple

# answer(conn_no, req_no, head, body) -> bytes to send, None to close the
# connection without answering, STALL to answer nothing until stopped, or
# (bytes, STALL) to send the bytes and then nothing.
STALL = b"stall"
Answer = Callable[[int, int, bytes, bytes], Optional[bytes]]


def http_answer(body: bytes, status: str = "200 OK", ctype: str = "application/json", extra: bytes = b"") -> bytes:
    return (b"HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n%s\r\n"
            % (status.encode(), ctype.encode(), len(body), extra)) + body


def json_answer(msg) -> bytes:
    return http_answer(json.dumps(msg).encode())


def stream_answer(*frames: Tuple[int, bytes]) -> bytes:
    """A Connect stream answer (close-delimited) of (flags, payload) frames."""
    body = b"".join(struct.pack(">BI", f, len(p)) + p for f, p in frames)
    return b"HTTP/1.1 200 OK\r\nContent-Type: application/connect+json\r\nConnection: close\r\n\r\n" + body


class FakeServer:
    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.requests: List[Tuple[bytes, bytes]] = []  # (head, body) of each request read whole
        self.conns: List[socket.socket] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.ls = socket.socket()
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(64)
        self.url = "http://127.0.0.1:%d" % self.ls.getsockname()[1]
        self.threads = [threading.Thread(target=self._serve, daemon=True)]
        self.threads[0].start()

    def _serve(self) -> None:
        n = 0
        while True:
            try:
                c, _ = self.ls.accept()
            except OSError:
                return
            with self.lock:
                self.conns.append(c)
            t = threading.Thread(target=self._handle, args=(c, n), daemon=True)
            n += 1
            self.threads.append(t)
            t.start()

    def _handle(self, c: socket.socket, conn_no: int) -> None:
        f = c.makefile("rb")
        try:
            for req_no in range(1000):
                head = b""
                while True:
                    line = f.readline(65537)
                    if not line:
                        return
                    if line in (b"\r\n", b"\n"):
                        break
                    head += line
                n = 0
                for h in head.split(b"\r\n"):
                    if h.lower().startswith(b"content-length:"):
                        n = int(h.split(b":")[1])
                body = f.read(n)
                with self.lock:
                    self.requests.append((head, body))
                out = self.answer(conn_no, req_no, head, body)
                if out is None:
                    return
                if isinstance(out, tuple):  # (bytes, STALL): send, then answer nothing more
                    c.sendall(out[0])
                    out = STALL
                if out is STALL:
                    self.stop.wait()
                    return
                c.sendall(out)
        except OSError:
            pass
        finally:
            f.close()
            self.drop(c)

    def drop(self, c: socket.socket) -> None:
        try:
            c.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        c.close()

    def close_all(self) -> None:
        """Close every connection accepted so far (a dispatcher restart)."""
        with self.lock:
            conns = list(self.conns)
        for c in conns:
            self.drop(c)

    def heads(self, method: str) -> List[bytes]:
        with self.lock:
            return [h for h, _ in self.requests if (b"/" + method.encode() + b" ") in h.split(b"\r\n")[0]]

    def close(self) -> None:
        self.stop.set()
        try:
            self.ls.shutdown(socket.SHUT_RDWR)  # wakes the accept
        except OSError:
            pass
        self.ls.close()
        self.close_all()
        for t in self.threads:
            t.join(10)
