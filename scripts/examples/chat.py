#!/usr/bin/env python3
"""chat.py: python3 chat.py /run/botlink/botlink.sock "hello" -- one text round through botlink's relay."""
import base64, hashlib, json, os, socket, struct, sys, uuid

path = sys.argv[1] if len(sys.argv) > 1 else "/run/botlink/botlink.sock"
text = sys.argv[2] if len(sys.argv) > 2 else "hello"
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock.connect(path)  # FileNotFoundError / ConnectionRefusedError: no daemon; PermissionError: not in group botlink
key = base64.b64encode(os.urandom(16)).decode()
sock.sendall(("GET /soulmate/voiceChat/v1 HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n"
              f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
buf = b""
while b"\r\n\r\n" not in buf:
    chunk = sock.recv(4096)
    if not chunk:
        sys.exit("botlink closed the socket during the handshake")
    buf += chunk
head, buf = buf.split(b"\r\n\r\n", 1)
if head.split(b" ")[1] != b"101":  # 409: another app is attached ({"code":409,"msg":...} follows)
    sys.exit(f"botlink refused the relay: {head.splitlines()[0].decode()} {buf.decode(errors='replace')}")
headers = {k.lower(): v for k, v in (line.split(b": ", 1) for line in head.split(b"\r\n")[1:])}
accept = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest())
if headers.get(b"sec-websocket-accept") != accept:
    sys.exit("not a WebSocket answer: is this botlink's socket?")

def read(n):
    global buf
    while len(buf) < n:
        chunk = sock.recv(65536)
        if not chunk:
            sys.exit("botlink closed the socket")
        buf += chunk
    out, buf = buf[:n], buf[n:]
    return out

def send(opcode, payload):  # a client masks every frame it sends
    mask, n = os.urandom(4), len(payload)
    size = bytes([0x80 | n]) if n < 126 else struct.pack("!BH", 0xFE, n) if n < 65536 else struct.pack("!BQ", 0xFF, n)
    sock.sendall(bytes([0x80 | opcode]) + size + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

def receive():  # botlink's frames are unmasked and whole (FIN set)
    b0, b1 = read(2)
    n = b1 & 0x7F
    n = struct.unpack("!H", read(2))[0] if n == 126 else struct.unpack("!Q", read(8))[0] if n == 127 else n
    return b0 & 0x0F, read(n)

reply, round_id, done = "", None, False  # round_id: our round's, once the cloud names it
while not done:
    opcode, data = receive()
    if opcode == 8:  # close: 1001 when the daemon stops, 1008 / 1009 past the limits
        sys.exit(f"botlink closed the relay ({struct.unpack('!H', data[:2])[0] if data else 1005})")
    if opcode == 9:
        send(10, data)  # pong
    if opcode != 1:
        continue  # binary: audio
    frame = json.loads(data)
    kind, content = frame.get("contentType"), frame.get("content") or {}  # a PONG has no content
    event, rid = content.get("eventType"), content.get("roundId")
    if kind == "BOTLINK":  # the first frame, then one per change of the cloud link's state
        state = content["eventData"]["state"]
        print("link", state, file=sys.stderr)
        if state == "connected":  # asked again after a drop: a round in flight is lost with the socket
            reply, round_id = "", None
            send(1, json.dumps({"mid": str(uuid.uuid4()), "contentType": "TEXT", "content": {"input": text}}).encode())
    elif kind == "ASR":  # voice turns: what the cloud recognised
        print("heard:", content.get("text"), file=sys.stderr)
    elif event in ("EMPTY_CONTENT", "USER_AUDIT_FAIL") and round_id in (None, rid):
        sys.exit(f"no reply ({event})")  # nothing to answer, or moderation: no round follows
    elif rid and kind != "ACTIVITY":
        round_id = round_id or rid  # CALL_AGENT_START_EVENT comes first; the greeting's roundId "" never counts
        if rid != round_id:
            continue  # another round's frame
        if kind == "AGENT":
            reply += content.get("content") or ""  # the reply streams in pieces
        elif event == "COMPLETE":
            done = True
        elif event in ("CALL_AGENT_INTERRUPTED", "INTERRUPT"):
            sys.exit(f"the reply was cut: {reply}")
print(reply)
send(8, struct.pack("!H", 1000))
