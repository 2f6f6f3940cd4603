#!/usr/bin/env python3
"""broker_client.py: a device of the broker (DESIGN §3.7) written from the design alone, in Python with
the cryptography package's Ed25519, so the broker is checked by code that shares nothing with it.

    python3 broker_client.py BROKER_URL CODE DEVICE_ID

Makes a key, enrolls it with the code, asks for a token twice, and prints one JSON line:
{"keyId", "botId", "enroll": <answer>, "token": <answer>, "again": <answer>}. Exits 1 with the reason
on stderr when the broker answers anything but what §3.7 promises.
"""
import base64, hashlib, json, os, sys, time, urllib.error, urllib.request
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat


def fail(msg):
    print(f"broker_client: {msg}", file=sys.stderr)
    sys.exit(1)


def b64url(raw):
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


class Device:
    def __init__(self, base):
        self.base = base.rstrip("/")
        self.key = Ed25519PrivateKey.generate()
        raw = self.key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        self.public_key = b64url(raw)
        # keyId: lower-case hex of the first 16 bytes of SHA-256 over the 32 raw bytes.
        self.key_id = hashlib.sha256(raw).digest()[:16].hex()

    def post(self, path, body):
        data = json.dumps(body, separators=(",", ":")).encode()
        ts = str(int(time.time() * 1000))
        nonce = b64url(os.urandom(18))
        # Seven lines joined by \n, no trailing newline: scheme, method, path, keyId, ts, nonce, sha256(body).
        message = "\n".join(["BOTLINK-ED25519", "POST", path, self.key_id, ts, nonce, hashlib.sha256(data).hexdigest()])
        sig = b64url(self.key.sign(message.encode()))
        headers = {
            "Content-Type": "application/json",
            "Authorization": f"BOTLINK-ED25519 keyId={self.key_id},ts={ts},nonce={nonce},sig={sig}",
        }
        req = urllib.request.Request(self.base + path, data, headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=30) as res:
                status, text, date = res.status, res.read().decode(), res.headers.get("Date")
        except urllib.error.HTTPError as err:
            status, text, date = err.code, err.read().decode(), err.headers.get("Date")
        if not date:
            fail(f"{path}: the answer carries no Date")
        return status, json.loads(text)


def main():
    if len(sys.argv) != 4:
        fail("usage: broker_client.py BROKER_URL CODE DEVICE_ID")
    base, code, device_id = sys.argv[1:]
    device = Device(base)
    status, enrolled = device.post("/v1/enroll", {"code": code, "deviceId": device_id, "publicKey": device.public_key})
    if status != 200 or set(enrolled) != {"botId", "vendorId", "keyId"} or enrolled["keyId"] != device.key_id:
        fail(f"enroll answered {status} {enrolled}")
    status, token = device.post("/v1/token", {})
    if status != 200 or set(token) != {"botId", "accessToken", "expireIn", "expiresAt"} or token["botId"] != enrolled["botId"]:
        fail(f"token answered {status} {token}")
    status, again = device.post("/v1/token", {"minValidityS": 60})
    if status != 200 or again["accessToken"] != token["accessToken"]:
        fail(f"a second token within its validity answered {status} {again}")
    print(json.dumps({"keyId": device.key_id, "botId": enrolled["botId"], "enroll": enrolled, "token": token, "again": again}))


if __name__ == "__main__":
    main()
