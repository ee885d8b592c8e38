#!/usr/bin/env python3
"""Writes Protocols/vectors/grpc/*.vector (format: grpc-bridge-frame.md section 6)."""
import os, struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "vectors", "grpc")

def header(kind, version=1, reserved=0):
    return bytes([version, kind]) + struct.pack("<H", reserved)

def body(kind, msgid, reply, timeout, comps, reserved1=0, reserved2=0, count=None, lengths=None):
    n = len(comps) if count is None else count
    ls = [len(c) for c in comps] if lengths is None else lengths
    out = header(kind) + struct.pack("<IIIQHH", msgid, reply, reserved1, timeout, n, reserved2)
    out += b"".join(struct.pack("<I", l) for l in ls)
    return out + b"".join(comps)

def comp_hex(c):
    return c.hex().upper() if c else "-"

def write(name, comment, frame, expect):
    with open(os.path.join(OUT, name + ".vector"), "w") as f:
        f.write(f"# {comment}\n# {len(frame)} bytes\n")
        f.write("frame: " + " ".join(f"{b:02X}" for b in frame) + "\n")
        f.write(f"expect: {expect}\n")

os.makedirs(OUT, exist_ok=True)
for old in os.listdir(OUT):
    os.remove(os.path.join(OUT, old))

write("ok-open", "OPEN for the name svc.echo", header(1) + b"svc.echo", "open svc.echo")
write("ok-open-100", "OPEN with a name of 100 bytes, the longest", header(1) + b"a" * 100, "open " + "a" * 100)
write("ok-accept", "ACCEPT", header(2), "accept")
write("ok-message-empty", "MESSAGE msgid 7, no reply port, no timeout, no components",
      body(3, 7, 0, 0, []), "message 7 0 0")
comps = [b"hello", b"", b"\x00\xff"]
write("ok-message-components", "MESSAGE with three components, one empty, reply id 5, timeout 1.5 s",
      body(3, 0xDEADBEEF, 5, 1_500_000_000, comps), "message 3735928559 5 1500000000 " + " ".join(map(comp_hex, comps)))
write("ok-reply", "REPLY msgid 8 to reply id 5 with one component", body(4, 8, 5, 0, [b"ok"]), "reply 8 5 6F6B")
write("ok-message-64", "MESSAGE with 64 one-byte components, the most",
      body(3, 1, 0, 0, [bytes([i]) for i in range(64)]), "message 1 0 0 " + " ".join(f"{i:02X}" for i in range(64)))

write("err-truncated-header", "three bytes: shorter than the header", header(1)[:3], "error truncated")
write("err-version-2", "version 2", header(2, version=2), "error unsupportedVersion")
write("err-reserved-header", "header reserved bytes not zero", header(2, reserved=1), "error reservedNotZero")
write("err-kind-5", "kind 5", header(5), "error unknownKind")
write("err-open-empty", "OPEN without a name", header(1), "error invalidName")
write("err-open-slash", "OPEN with a '/' in the name", header(1) + b"a/b", "error invalidName")
write("err-open-101", "OPEN with a name of 101 bytes", header(1) + b"a" * 101, "error invalidName")
write("err-accept-trailing", "ACCEPT followed by a byte", header(2) + b"\x00", "error trailingBytes")
write("err-message-short", "MESSAGE cut inside its fixed fields", body(3, 1, 0, 0, [])[:27], "error truncated")
write("err-message-reserved", "MESSAGE with the reserved field at 12 set", body(3, 1, 0, 0, [], reserved1=1), "error reservedNotZero")
write("err-message-reserved-26", "MESSAGE with the reserved field at 26 set", body(3, 1, 0, 0, [], reserved2=1), "error reservedNotZero")
write("err-message-65", "MESSAGE claiming 65 components", body(3, 1, 0, 0, [], count=65, lengths=[]), "error tooManyComponents")
write("err-reply-id-0", "REPLY with reply id 0", body(4, 1, 0, 0, []), "error missingReplyID")
write("err-reply-timeout", "REPLY with a timeout", body(4, 1, 3, 5, []), "error timeoutOnReply")
write("err-table-truncated", "MESSAGE claiming 2 components with one length", body(3, 1, 0, 0, [], count=2, lengths=[0]), "error truncated")
write("err-length-long", "a length past the end of the frame", body(3, 1, 0, 0, [b"ab"], lengths=[3]), "error lengthMismatch")
write("err-length-short", "lengths that leave bytes over", body(3, 1, 0, 0, [b"abc"], lengths=[2]), "error lengthMismatch")
