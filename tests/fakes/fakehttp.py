"""What the fake servers of tests/fakes/ share."""


def request_body(handler):
    """The body of the request handler is reading (Content-Length, or
    chunked transfer encoding), as bytes."""
    if handler.headers.get("Transfer-Encoding", "").lower() == "chunked":
        out = bytearray()
        while True:
            size = int(handler.rfile.readline().split(b";")[0].strip(), 16)
            if size == 0:
                while handler.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return bytes(out)
            out += handler.rfile.read(size)
            handler.rfile.readline()
    n = int(handler.headers.get("Content-Length") or 0)
    return handler.rfile.read(n) if n > 0 else b""


def tls_server_context(cert, key):
    """A TLS server context with the test's certificate."""
    import ssl
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    return ctx


def tls_accept(ctx, request, timeout):
    """The server side of one accepted connection's handshake: the TLS
    socket, or None when the handshake failed or timed out."""
    import ssl
    try:
        request.settimeout(timeout)
        return ctx.wrap_socket(request, server_side=True)
    except (ssl.SSLError, OSError):
        return None


def announce_and_wait(ports_path, text):
    """Write text to ports_path whole (a rename), then serve until killed."""
    import os
    import threading
    tmp = ports_path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.rename(tmp, ports_path)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
