"""TLS termination on the listener (`tls: {cert, key}` in gateway.yaml): a self-signed
certificate made here, OpenAI streaming and keep-alive over TLS, plain HTTP refused."""

import datetime
import ipaddress
import json
import os
import socket
import ssl

import fixtures as fx
from gwtest import CHAT, base_config


def self_signed(d):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = os.path.join(d, "server.pem"), os.path.join(d, "server.key")
    with open(cert_path, "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(key_path, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    return cert_path, key_path


def test_tls_termination(fresh_gateways, model):
    g = fresh_gateways
    cert, key_file = self_signed(g.tmp)
    state = os.path.join(g.tmp, "tls.db")
    key = fx.create_key(state, "u", "user")["key"]
    cfg = base_config(g.tmp, model.url, state=state, tls={"cert": cert, "key": key_file})
    gw = g.start(cfg, "gw-tls")
    port = gw.port
    ctx = ssl.create_default_context(cafile=cert)
    body = json.dumps(dict(CHAT, stream=True)).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            for _ in range(2):  # keep-alive over TLS
                s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: "
                          b"Bearer %s\r\nContent-Length: %d\r\n\r\n%s" % (key.encode(), len(body),
                                                                         body))
                c = fx.RawConn.__new__(fx.RawConn)
                c.sock, c.buf = s, b""
                r = c.read_response()
                assert r.status == 200, r
                assert fx.sse_events(r.body)[-1] == "[DONE]"
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:  # plain HTTP on TLS
        raw.sendall(b"GET /v2/health/ready HTTP/1.1\r\nHost: gw\r\n\r\n")
        raw.settimeout(5)
        try:
            data = raw.recv(100)
        except (ConnectionResetError, socket.timeout):
            data = b""
        assert not data.startswith(b"HTTP/1.1 200"), "plain HTTP served on the TLS listener"


