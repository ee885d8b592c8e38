#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpus from the protocol test vectors.

    Fuzz/make-corpus.py OUT

OUT/frame/     every frame vector of Protocols/vectors/ as a FrameInput (FuzzFrameDecoder and
               FuzzFrameReceive): its descriptor count, options 00 (genuine send rights), the
               frame bytes; and once more with options 01 (descriptors of every other kind);
               each valid one also sent three times on one connection, and to a port that
               refuses port components.
OUT/handshake/ every handshake vector of Protocols/vectors/named/ as a FuzzHandshake input:
               owner-side records with options 00 (and a HELLO once more with 08: a frame
               after WELCOME), client-side records with options 10.

The vector format is port-message-frame.md section 9 and named-ports.md section 8.
"""
import os, sys

PLACEHOLDER = b"fuzz.handshake.XXXXXXXX"
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Protocols", "vectors")

def parse(path):
    data, fields = bytearray(), {}
    for line in open(path):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, _, value = line.partition(":")
        value = value.strip()
        if key in ("frame", "record"):
            data += bytes.fromhex(value.replace(" ", ""))
        elif key == "repeat":
            byte, count = value.split()
            data += bytes([int(byte, 16)]) * int(count)
        else:
            fields.setdefault(key, value)
    return bytes(data), fields

def write(directory, name, content):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, name), "wb") as f:
        f.write(content)

def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    frames = handshakes = 0
    for file in sorted(os.listdir(ROOT)):
        if not file.endswith(".vector"):
            continue
        data, fields = parse(os.path.join(ROOT, file))
        descriptors = int(fields.get("descriptors", "0"))
        name = file[:-len(".vector")]
        write(os.path.join(out, "frame"), name, bytes([descriptors, 0x00]) + data)
        write(os.path.join(out, "frame"), name + "-other-kinds", bytes([descriptors, 0x01]) + data)
        frames += 2
        if fields.get("expect") == "ok":
            # Sent three times on one connection (its later frames pinned through the first),
            # and to a port that refuses port components.
            write(os.path.join(out, "frame"), name + "-repeated", bytes([descriptors + 72, 0x00]) + data)
            write(os.path.join(out, "frame"), name + "-refusing", bytes([descriptors + 144, 0x00]) + data)
            frames += 2
    named = os.path.join(ROOT, "named")
    for file in sorted(os.listdir(named)):
        data, fields = parse(os.path.join(named, file))
        if "side" not in fields:
            continue
        name = file[:-len(".vector")]
        if fields["side"] == "owner":
            write(os.path.join(out, "handshake"), name, bytes([0x00]) + data)
            if fields["expect"].startswith("hello"):
                write(os.path.join(out, "handshake"), name + "-then-frame", bytes([0x08]) + data)
                handshakes += 1
        else:
            write(os.path.join(out, "handshake"), name, bytes([0x10]) + data)
        handshakes += 1
    # HELLOs naming the owner (FuzzHandshake puts its own name in place of the placeholder):
    # WELCOME, WELCOME then a frame, and explicit credentials claiming uid 0 and uid 1.
    hello = b"RLKN\x01\x01" + bytes([len(PLACEHOLDER), 0]) + PLACEHOLDER
    for options, name in [(0x00, "own-hello"), (0x08, "own-hello-then-frame"), (0x04, "own-hello-claim-uid-0"),
                          (0x24, "own-hello-claim-uid-1")]:
        write(os.path.join(out, "handshake"), name, bytes([options]) + hello)
        handshakes += 1
    print(f"wrote {frames} frame and {handshakes} handshake seeds to {os.path.normpath(out)}")

main()
