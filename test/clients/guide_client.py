#!/usr/bin/env python3
"""guide_client.py: a device client written from the service's public guide (DESIGN §1.1, §1.2, §1.7), in
Python's standard library only, so botlink's reference service is checked by code that shares nothing with it.

    python3 guide_client.py http://127.0.0.1:PORT [AK SK BOT_ID]

Signs getToken (V2, HMAC-MD5), opens the WebSocket with Bearer, sends the voice config, then drives one
free-mode audio turn (a tone as speech, then silence, paced in real time in 100 ms frames) and one TEXT
turn. Prints one JSON line saying what it saw; exits 1 with the reason on stderr when the service strays.
"""
import base64, hashlib, hmac, json, math, os, queue, socket, struct, sys, threading, time, urllib.parse, urllib.request, uuid

RATE = 16000
FRAME_MS = 100  # the guide: at most 300 ms of PCM a frame
TIMEOUT_S = 30
ROUND_KINDS = ("ASR", "CALL_AGENT_START_EVENT", "AGENT", "TTS", "TTS_COMPLETE", "COMPLETE")


def fail(msg):
    print(f"guide_client: {msg}", file=sys.stderr)
    sys.exit(1)


def get_token(base, ak, sk, bot_id):
    """§1.1/§1.2: sign the four lower-cased, sorted name=value pairs with HMAC-MD5, lower-case hex."""
    params = {"accessKeyId": ak, "accessNonce": uuid.uuid4().hex, "accessTimestamp": str(int(time.time() * 1000)), "accessVersion": "V2"}
    message = "&".join(f"{k.lower()}={v}" for k, v in sorted(params.items(), key=lambda kv: kv[0].lower()))
    params["accessSign"] = hmac.new(sk.encode(), message.encode(), hashlib.md5).hexdigest()
    params["botId"] = bot_id
    req = urllib.request.Request(base + "/auth/getToken", json.dumps(params).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=TIMEOUT_S) as res:
        body = json.loads(res.read())
    if body.get("code") != 0:  # failures are HTTP 200 with a nonzero code
        fail(f"getToken answered {body}")
    return body["accessToken"]


class WebSocket:
    """The few parts of RFC 6455 a client needs: handshake, masked frames out, whole frames in, ping, close."""

    def __init__(self, host, port, path, token):
        self.sock = socket.create_connection((host, port), timeout=TIMEOUT_S)
        self.lock = threading.Lock()
        self.frames = queue.Queue()
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                           f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer {token}\r\n\r\n").encode())
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            chunk = self.sock.recv(4096)
            if not chunk:
                fail("the service closed during the handshake")
            self.buf += chunk
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        if head.split(b" ")[1] != b"101":
            fail(f"handshake refused: {head.splitlines()[0].decode()} {self.buf.decode(errors='replace')}")
        accept = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest())
        if accept not in head:
            fail("the handshake's Sec-WebSocket-Accept is wrong")
        threading.Thread(target=self._reader, daemon=True).start()

    def _read(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def _reader(self):
        try:
            while True:
                b0, b1 = self._read(2)
                n = b1 & 0x7F
                n = struct.unpack("!H", self._read(2))[0] if n == 126 else struct.unpack("!Q", self._read(8))[0] if n == 127 else n
                opcode, data = b0 & 0x0F, self._read(n)
                if opcode == 9:
                    self.send(10, data)
                elif opcode == 8:
                    self.frames.put(("close", data))
                    return
                elif opcode in (1, 2):
                    self.frames.put(("text" if opcode == 1 else "binary", data))
        except (EOFError, OSError):
            self.frames.put(("close", b""))

    def send(self, opcode, payload):
        mask, n = os.urandom(4), len(payload)
        size = bytes([0x80 | n]) if n < 126 else struct.pack("!BH", 0xFE, n) if n < 65536 else struct.pack("!BQ", 0xFF, n)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        with self.lock:
            self.sock.sendall(bytes([0x80 | opcode]) + size + mask + masked)

    def send_json(self, frame):
        self.send(1, json.dumps(frame).encode())

    def next_json(self):
        """The next JSON frame; a refusal {code: 400, msg} or a close ends the run."""
        while True:
            kind, data = self.frames.get(timeout=TIMEOUT_S)
            if kind == "close":
                fail(f"the service closed the socket ({struct.unpack('!H', data[:2])[0] if data else 1005})")
            if kind == "text":
                frame = json.loads(data)
                if frame.get("code") != 200:
                    fail(f"the service refused a frame: {frame}")
                return frame


def kind_of(frame):
    content = frame.get("content") or {}
    return content.get("eventType") if frame["contentType"] == "EVENT" else frame["contentType"]


def read_round(ws):
    """Frames until COMPLETE: the round is named by CALL_AGENT_START_EVENT's roundId; ASR comes before it."""
    order, asr, round_id, reply, finish_reason, tts_ms, tts_bytes = [], None, None, "", "", 0, 0
    while True:
        frame = ws.next_json()
        kind, content = kind_of(frame), frame.get("content") or {}
        if kind == "ASR" and content.get("textType") == "IS_FINAL":
            asr = content["text"]
        elif kind == "CALL_AGENT_START_EVENT":
            round_id = content["roundId"]
        elif content.get("roundId") != round_id or round_id is None:
            continue  # not this round's (the greeting's roundId is "")
        elif kind == "AGENT":
            reply += content["content"]
            finish_reason = content["finishReason"]
        elif kind == "TTS":
            tts_ms += content["audioDuration"]
            tts_bytes += len(base64.b64decode(content["audioBase64"]))
        if kind in ROUND_KINDS and (not order or order[-1] != kind):
            order.append(kind)
        if kind == "COMPLETE":
            return {"asr": asr, "roundId": round_id, "reply": reply, "finishReason": finish_reason, "order": order, "ttsMs": tts_ms, "ttsBytes": tts_bytes}


def tone(ms, hz=440, amplitude=8000):
    n = RATE * ms // 1000
    return b"".join(struct.pack("<h", int(amplitude * math.sin(2 * math.pi * hz * i / RATE))) for i in range(n))


def main():
    base = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8080"
    ak, sk, bot_id = (sys.argv[2:5] + ["AK", "SK", "bot-1"][len(sys.argv[2:5]):])
    token = get_token(base, ak, sk, bot_id)
    url = urllib.parse.urlparse(base)
    request_id = str(uuid.uuid4())
    query = urllib.parse.urlencode({"botId": bot_id, "sessionId": str(uuid.uuid4()), "requestId": request_id})
    ws = WebSocket(url.hostname, url.port, f"/soulmate/voiceChat/v1?{query}", token)

    greeting = ws.next_json()
    if kind_of(greeting) != "CFG_BOT_EVENT" or greeting["content"]["roundId"] != "" or greeting["mid"] is not None:
        fail(f"expected the greeting CFG_BOT_EVENT (roundId \"\", mid null), got {greeting}")
    ws.send_json({"mid": str(uuid.uuid4()), "contentType": "EVENT", "content": {"eventType": "CLIENT_VOICE_CHAT_UPDATE", "eventData": {
        "audio": {"binary": False, "input": {"codec": "pcm", "sampleRate": str(RATE)}, "output": {"codec": "pcm", "sampleRate": str(RATE)}}}}})
    while kind_of(ws.next_json()) != "SERVER_VOICE_CHAT_UPDATED":
        pass

    ws.send_json({"mid": "ping-1", "contentType": "PING"})
    pong = ws.next_json()
    if pong["contentType"] != "PONG" or "content" in pong or pong["mid"] == "ping-1":
        fail(f"expected a PONG without content and with the service's own mid, got {pong}")

    # Free mode: a 1 s tone as speech, then 1.2 s of silence, paced in real time, 100 ms a frame.
    audio = tone(1000) + bytes(RATE * 2 * 1200 // 1000)
    step = RATE * 2 * FRAME_MS // 1000
    start = time.monotonic()
    for index, at in enumerate(range(0, len(audio), step)):
        time.sleep(max(0.0, start + index * FRAME_MS / 1000 - time.monotonic()))
        ws.send_json({"mid": str(uuid.uuid4()), "contentType": "AUDIO", "content": {"audioBase64": base64.b64encode(audio[at:at + step]).decode(), "index": index}})
    audio_turn = read_round(ws)

    ws.send_json({"mid": str(uuid.uuid4()), "contentType": "TEXT", "content": {"input": "hello from python"}})
    text_turn = read_round(ws)
    ws.send(8, struct.pack("!H", 1000))
    print(json.dumps({"requestId": request_id, "pong": pong["mid"], "audio": audio_turn, "text": text_turn}))


if __name__ == "__main__":
    main()
