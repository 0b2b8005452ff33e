"""`--scheduler` at something that is not a Dask scheduler (issue 34, fuzz round 3 N9): a peer
that answers any bytes with an HTTP 400 (what an HTTP proxy does) made Dask read "HTTP/1.1" as a
frame length and the command said "out of memory reading the input". It now says what is there,
as a usage error (exit 2, like every other unusable --scheduler)."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest

from overlap.cli.main import main as cli_main

CAPTURE = (Path(__file__).resolve().parents[2] / "sample_traces" / "cpu-scan" / "offload_x")


def _http_400_server() -> tuple[socket.socket, int]:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)

    def serve() -> None:
        while True:
            try:
                c, _ = s.accept()
            except OSError:
                return
            with c:
                try:
                    c.recv(65536)
                    c.sendall(b"HTTP/1.1 400 Bad Request\r\nconnection: close\r\n"
                              b"content-length: 0\r\n\r\n")
                except OSError:
                    pass

    threading.Thread(target=serve, daemon=True).start()
    return s, s.getsockname()[1]


def test_an_http_peer_is_named_as_not_a_dask_scheduler(capsys):
    pytest.importorskip("dask.distributed")
    srv, port = _http_400_server()
    try:
        rc = cli_main(["report", str(CAPTURE), "--scheduler", f"tcp://127.0.0.1:{port}"])
    finally:
        srv.close()
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1, err
    assert "is not a Dask scheduler: an HTTP server answered there" in err[0]
    assert "out of memory" not in err[0]
