"""JWT minting for the tests, written on `hmac` and python3-cryptography (no JWT library), so
that tests can also build tokens a JWT library refuses to make: alg=none, HS256 keyed with
an RSA public key, broken signatures."""

import base64
import hashlib
import hmac
import json
import os
import time

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def encode(header, claims, signer):
    """signer(signing_input bytes) -> signature bytes."""
    h = b64url(json.dumps(header, separators=(",", ":")).encode())
    c = b64url(json.dumps(claims, separators=(",", ":")).encode())
    si = ("%s.%s" % (h, c)).encode()
    return "%s.%s.%s" % (h, c, b64url(signer(si)))


class Keys:
    """An HS256 secret, an RSA-2048 and a P-256 key pair, written as files under `d`:
    jwt.secret, rsa.pub.pem, ec.pub.pem (the names of the contract's example) and the RSA
    private key rsa.pem (for `gantry gateway token`)."""

    def __init__(self, d):
        self.dir = d
        # Printable, as secrets usually are: the gateway strips a trailing CR/LF from the
        # file (`echo secret > file`), so raw random bytes ending in one flaked 1 run in 128.
        self.secret = os.urandom(32).hex().encode()
        self.rsa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.ec = ec.generate_private_key(ec.SECP256R1())
        self.secret_file = os.path.join(d, "jwt.secret")
        self.rsa_pub_file = os.path.join(d, "rsa.pub.pem")
        self.ec_pub_file = os.path.join(d, "ec.pub.pem")
        with open(self.secret_file, "wb") as f:
            f.write(self.secret)
        self.rsa_pub_pem = self.rsa.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        with open(self.rsa_pub_file, "wb") as f:
            f.write(self.rsa_pub_pem)
        self.rsa_priv_file = os.path.join(d, "rsa.pem")
        with open(self.rsa_priv_file, "wb") as f:
            f.write(self.rsa.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
        with open(self.ec_pub_file, "wb") as f:
            f.write(self.ec.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))

    def config(self, issuer, audience):
        return {"issuer": issuer, "audience": [audience], "role_claim": "role", "leeway": "30s",
                "keys": [{"alg": "HS256", "kid": "k1", "secret_file": self.secret_file},
                         {"alg": "RS256", "kid": "k2", "public_key_file": self.rsa_pub_file},
                         {"alg": "ES256", "kid": "k3", "public_key_file": self.ec_pub_file}]}

    def hs256(self, claims, kid="k1", secret=None):
        key = self.secret if secret is None else secret
        return encode({"alg": "HS256", "typ": "JWT", "kid": kid}, claims,
                      lambda si: hmac.new(key, si, hashlib.sha256).digest())

    def rs256(self, claims, kid="k2"):
        return encode({"alg": "RS256", "typ": "JWT", "kid": kid}, claims,
                      lambda si: self.rsa.sign(si, padding.PKCS1v15(), hashes.SHA256()))

    def es256(self, claims, kid="k3"):
        def sign(si):
            r, s = decode_dss_signature(self.ec.sign(si, ec.ECDSA(hashes.SHA256())))
            return r.to_bytes(32, "big") + s.to_bytes(32, "big")
        return encode({"alg": "ES256", "typ": "JWT", "kid": kid}, claims, sign)


def alg_none(claims, kid="k1"):
    return encode({"alg": "none", "typ": "JWT", "kid": kid}, claims, lambda si: b"")


def claims(issuer, audience, role="user", sub="alice", **over):
    now = int(time.time())
    c = {"iss": issuer, "aud": audience, "sub": sub, "role": role, "iat": now, "nbf": now - 5,
         "exp": now + 600}
    c.update(over)
    return c


def flip_signature(token):
    h, c, s = token.split(".")
    raw = bytearray(base64.urlsafe_b64decode(s + "=" * (-len(s) % 4)))
    raw[len(raw) // 2] ^= 0x01
    return "%s.%s.%s" % (h, c, b64url(bytes(raw)))


def embedded_jwk_token(claims_, kid):
    """RS256 signed with a fresh attacker key whose public part rides in the `jwk` header
    (and a `jku` URL): a verifier must use only its configured keys."""
    attacker = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pub = attacker.public_key().public_numbers()

    def b64int(n):
        return b64url(n.to_bytes((n.bit_length() + 7) // 8, "big"))
    header = {"alg": "RS256", "typ": "JWT", "kid": kid, "jku": "http://127.0.0.1:1/jwks.json",
              "jwk": {"kty": "RSA", "kid": kid, "n": b64int(pub.n), "e": b64int(pub.e)}}
    return encode(header, claims_,
                  lambda si: attacker.sign(si, padding.PKCS1v15(), hashes.SHA256()))
