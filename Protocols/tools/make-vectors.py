#!/usr/bin/env python3
"""Writes Protocols/vectors/*.vector (format: port-message-frame.md section 9).

Each vector is written field by field, one `frame:` line per header field / table entry,
so that a reader can check it by eye against section 3. Re-run after editing; the files are
the normative artefact, this script only saves typing.
"""
import os, struct, sys

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "vectors")

def hx(b):
    return " ".join(f"{x:02X}" for x in b)

class V:
    def __init__(self, name, comment):
        self.name, self.comment, self.lines, self.size = name, comment, [], 0
    def raw(self, b, note=None):
        self.lines.append((f"# {note}\n" if note else "") + f"frame: {hx(b)}")
        self.size += len(b); return self
    def rep(self, byte, count, note=None):
        self.lines.append((f"# {note}\n" if note else "") + f"repeat: {byte:02X} {count}")
        self.size += count; return self
    def header(self, magic=b"RLKM", version=1, flags=0, count=0, msgid=0, body=0):
        self.raw(magic, "magic")
        self.raw(bytes([version]), "version")
        self.raw(bytes([flags]), "flags")
        self.raw(struct.pack("<H", count), f"component count {count}")
        self.raw(struct.pack("<I", msgid), f"msgid {msgid}")
        self.raw(struct.pack("<I", body), f"body length {body}")
        return self
    def entry(self, kind, length, reserved=b"\0\0\0"):
        name = {1: "DATA", 2: "PORT", 3: "MEMORY"}.get(kind, f"kind {kind}")
        return self.raw(bytes([kind]) + reserved + struct.pack("<I", length), f"entry: {name}, length {length}")
    def memory(self, length):
        """A MEMORY entry: bits 32-55 of the length in the three bytes after the kind."""
        return self.raw(bytes([3]) + struct.pack("<Q", length)[4:7] + struct.pack("<I", length & 0xFFFFFFFF),
                        f"entry: MEMORY, length {length}")
    def metadata(self, fields, count=None):
        """The METADATA section (section 3.6): fields of (key bytes, value bytes)."""
        n = len(fields) if count is None else count
        self.raw(struct.pack("<H", n), f"metadata: {n} fields")
        for key, value in fields:
            self.raw(struct.pack("<H", len(key)) + key, f"key, {len(key)} bytes")
            self.raw(struct.pack("<H", len(value)) + value, f"value, {len(value)} bytes")
        return self
    def write(self, descriptors, expect, msgid=None, reply=None, components=(), metadata=()):
        text = [f"# {line}" for line in self.comment.split("\n")]
        text.append(f"# {self.size} bytes")
        text += self.lines
        text.append(f"descriptors: {descriptors}")
        text.append(f"expect: {expect}")
        if expect == "ok":
            text.append(f"msgid: {msgid}")
            text.append(f"reply: {'send-once' if reply == 'send-once' else 'true' if reply else 'false'}")
            for c in components:
                text.append(f"component: {c}")
            for key, value in metadata:
                text.append(f"metadata: {key.hex().upper()} {value.hex().upper() or '-'}")
        with open(os.path.join(OUT, self.name + ".vector"), "w") as f:
            f.write("\n".join(text) + "\n")

def msg(name, comment, msgid, comps, reply=False, metadata=()):
    """A valid frame from a component list: ('data', bytes) / ('rep', byte, n) / ('port',) / ('mem', n)."""
    body = 0
    for c in comps:
        body += len(c[1]) if c[0] == "data" else (c[2] if c[0] == "rep" else 0)
    flags = (1 if reply else 0) | (2 if metadata else 0) | (4 if reply == "send-once" else 0)
    v = V(name, comment).header(flags=flags, count=len(comps), msgid=msgid, body=body)
    for c in comps:
        if c[0] == "data": v.entry(1, len(c[1]))
        elif c[0] == "rep": v.entry(1, c[2])
        elif c[0] == "mem": v.memory(c[1])
        else: v.entry(2, 0)
    for c in comps:
        if c[0] == "data" and c[1]: v.raw(c[1], f"DATA, {len(c[1])} bytes")
        elif c[0] == "rep": v.rep(c[1], c[2], f"DATA: {c[2]} bytes of {c[1]:02X}")
    if metadata: v.metadata(metadata)
    ports = sum(1 for c in comps if c[0] in ("port", "mem"))
    desc = []
    for c in comps:
        if c[0] == "data": desc.append(f"data {c[1].hex().upper()}".rstrip())
        elif c[0] == "rep": desc.append(f"data-repeat {c[1]:02X} {c[2]}")
        elif c[0] == "mem": desc.append(f"memory {c[1]}")
        else: desc.append("port")
    return v, ports + (1 if reply else 0), desc

def ok(name, comment, msgid, comps, reply=False, metadata=()):
    v, d, desc = msg(name, comment, msgid, comps, reply, metadata=metadata)
    v.write(d, "ok", msgid, reply, desc, metadata)

TRACEPARENT = (b"traceparent", b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")

def metadata_vectors():
    """The METADATA section (section 3.6, check F11)."""
    ok("ok-metadata-traceparent", "One DATA component \"hello\" and a W3C traceparent in the metadata section.", 1000,
       [("data", b"hello")], metadata=[TRACEPARENT])
    ok("ok-metadata-ports-reply", "DATA, PORT, reply port and three fields, one with an empty value: the section follows the body, descriptors as without it.",
       21, [("data", b"ab"), ("port",)], reply=True,
       metadata=[TRACEPARENT, (b"tracestate", b""), (b"baggage", "user=é".encode())])
    ok("ok-metadata-empty-message", "No components, one field: the section follows the table directly.", 3, [],
       metadata=[(b"k", b"v")])
    ok("ok-metadata-limits", "16 fields, the first with a 256-byte key and a 4096-byte value: the section's limits.", 8,
       [("data", b"x")], metadata=[(b"K" * 256, b"V" * 4096)] + [(bytes([0x61 + i]), b"") for i in range(15)])
    def bad(name, comment, section, descriptors=0):
        v = V(name, comment).header(flags=2, count=1, body=2).entry(1, 2).raw(b"hi")
        v.raw(section, "metadata section") if section else None
        v.write(descriptors, "error badMetadata")
    bad("err-metadata-missing", "METADATA set and nothing after the body.", b"")
    bad("err-metadata-one-byte", "A section of one byte: no room for the count.", b"\x01")
    bad("err-metadata-count-zero", "A field count of 0.", struct.pack("<H", 0))
    bad("err-metadata-count-17", "A field count of 17 (limit 16), with 17 well-formed fields.",
        struct.pack("<H", 17) + b"".join(struct.pack("<H", 1) + bytes([0x61 + i]) + struct.pack("<H", 0) for i in range(17)))
    bad("err-metadata-key-empty", "A key of length 0.", struct.pack("<HH", 1, 0) + struct.pack("<H", 1) + b"v")
    bad("err-metadata-key-too-long", "A key of 257 bytes (limit 256).",
        struct.pack("<HH", 1, 257) + b"k" * 257 + struct.pack("<H", 0))
    bad("err-metadata-value-too-long", "A value of 4097 bytes (limit 4096).",
        struct.pack("<HH", 1, 1) + b"k" + struct.pack("<H", 4097) + b"v" * 4097)
    bad("err-metadata-value-truncated", "A value length of 9 with 3 bytes left.",
        struct.pack("<HH", 1, 1) + b"k" + struct.pack("<H", 9) + b"abc")
    bad("err-metadata-count-short", "Count 2 and one field.", struct.pack("<HH", 2, 1) + b"k" + struct.pack("<H", 1) + b"v")
    bad("err-metadata-trailing", "A well-formed field followed by one extra byte.",
        struct.pack("<HH", 1, 1) + b"k" + struct.pack("<H", 1) + b"v" + b"\x00")
    bad("err-metadata-bad-utf8", "A value that is not UTF-8 (FF).", struct.pack("<HH", 1, 1) + b"k" + struct.pack("<H", 1) + b"\xff")
    bad("err-metadata-key-bad-utf8", "A key that is a lone continuation byte (80).", struct.pack("<HH", 1, 1) + b"\x80" + struct.pack("<H", 0))
    V("order-lengths-before-metadata", "METADATA set, bodyLength 9 and 2 bytes after the table: F7 (lengthMismatch) before F11.") \
        .header(flags=2, count=1, body=9).entry(1, 9).raw(b"hi").write(0, "error lengthMismatch")
    V("order-descriptors-before-metadata", "METADATA set with a malformed section, and a PORT without its descriptor: F10 before F11.") \
        .header(flags=2, count=1).entry(2, 0).raw(struct.pack("<H", 0), "metadata: 0 fields").write(0, "error descriptorCountMismatch")

def main():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        if f.endswith(".vector"): os.remove(os.path.join(OUT, f))

    # ---- valid ----
    ok("ok-empty-message", "msgid 0, no components, no reply port: the smallest frame (header only).", 0, [])
    ok("ok-single-data", "msgid 1000 with one DATA component \"hello\".", 1000, [("data", b"hello")])
    ok("ok-empty-data", "One DATA component of length 0.", 7, [("data", b"")])
    ok("ok-several-data", "Three DATA components, the middle one empty; body = concatenation.", 42,
       [("data", b"abc"), ("data", b""), ("data", b"\x00\xff\x10\x80")])
    ok("ok-ports-only", "Two PORT components: two descriptors, no body.", 5, [("port",), ("port",)])
    ok("ok-ports-data-interleaved", "DATA, PORT, DATA, PORT, DATA: only DATA contributes body bytes.", 77,
       [("data", b"one"), ("port",), ("data", b"two"), ("port",), ("data", b"three")])
    ok("ok-reply-port", "REPLY_PORT set, one DATA component: one descriptor (the reply port).", 1000,
       [("data", b"hello from C")], reply=True)
    ok("ok-reply-port-only", "REPLY_PORT set, no components.", 9, [], reply=True)
    ok("ok-reply-port-send-once", "REPLY_PORT and SEND_ONCE (a request's reply port, section 4.7), one DATA component.", 1000,
       [("data", b"request")], reply="send-once")
    ok("ok-ports-and-reply", "The worked example of section 10: DATA \"hello\", PORT, reply port; descriptors [port, reply].",
       1000, [("data", b"hello"), ("port",)], reply=True)
    ok("ok-msgid-byte-order", "msgid 0x04030201 is sent as 01 02 03 04 (little-endian).", 0x04030201, [("data", b"\x01")])
    ok("ok-msgid-max", "msgid 0xFFFFFFFF.", 0xFFFFFFFF, [])
    ok("ok-max-components-data", "64 DATA components of one byte each (the component limit).", 3,
       [("data", bytes([i])) for i in range(64)])
    ok("ok-max-descriptors", "64 PORT components and a reply port: 65 descriptors, the most a frame carries.", 11,
       [("port",)] * 64, reply=True)
    ok("ok-max-frame-size", "One DATA component of 65512 bytes: 16 + 8 + 65512 = 65536 bytes, exactly the limit.", 4096,
       [("rep", 0xAB, 65512)])
    ok("ok-near-limit-mixed", "PORT, 40000 bytes, DATA \"x\", 25486 bytes, reply port: 16 + 32 + 65487 = 65535 bytes.", 65535,
       [("port",), ("rep", 0x00, 40000), ("data", b"x"), ("rep", 0xFF, 25486)], reply=True)
    ok("ok-memory", "One MEMORY component of 1 MiB: no body, one descriptor (a sealed memfd of at least 1 MiB).", 8,
       [("mem", 1 << 20)])
    ok("ok-memory-mixed", "DATA \"head\", MEMORY 100000, PORT, MEMORY 40000, reply port: descriptors [memfd, port, memfd, reply].", 21,
       [("data", b"head"), ("mem", 100000), ("port",), ("mem", 40000)], reply=True)
    ok("ok-memory-high-length", "MEMORY of 2^32 + 5 bytes: 05 00 00 00 in the length, 01 00 00 in the three bytes after the kind.", 22,
       [("mem", (1 << 32) + 5)])
    ok("ok-memory-max-length", "MEMORY of 2^56 - 1 bytes, the most an entry states (a receiver's limit refuses it, not the decoder).", 23,
       [("mem", (1 << 56) - 1)])

    # ---- invalid: one per reason decode can produce ----
    V("err-truncated-header-empty", "No bytes at all.").write(0, "error truncatedHeader")
    V("err-truncated-header-empty-with-descriptors", "No bytes, but 3 descriptors: not the end of stream (section 5), and F2 comes before F10.").write(3, "error truncatedHeader")
    V("err-truncated-header-15", "The first 15 bytes of a valid empty message.").raw(b"RLKM\x01\x00\x00\x00" + b"\x00" * 7).write(0, "error truncatedHeader")
    V("err-bad-magic", "Magic \"RLKN\".").header(magic=b"RLKN").write(0, "error badMagic")
    V("err-bad-magic-byte-order", "Magic written as a big-endian u32 read back little-endian: \"MKLR\".").header(magic=b"MKLR").write(0, "error badMagic")
    V("err-unsupported-version-0", "Version 0.").header(version=0).write(0, "error unsupportedVersion")
    V("err-unsupported-version-2", "Version 2 (a future version): rejected, not skipped.").header(version=2).write(0, "error unsupportedVersion")
    V("err-reserved-flags-bit2", "Flag bit 2 (SEND_ONCE) set without REPLY_PORT.").header(flags=0x04).write(0, "error reservedFlags")
    V("err-reserved-flags-bit3", "Flag bit 3 set together with REPLY_PORT and SEND_ONCE.").header(flags=0x0D).write(1, "error reservedFlags")
    V("err-reserved-flags-bit7", "Flag bit 7 set together with REPLY_PORT.").header(flags=0x81).write(1, "error reservedFlags")
    v = V("err-too-many-components", "65 DATA components of length 0 (limit 64); the frame is otherwise consistent.").header(count=65)
    for _ in range(65): v.entry(1, 0)
    v.write(0, "error tooManyComponents")
    V("err-too-many-components-ffff", "Component count 0xFFFF in a bare header.").header(count=0xFFFF).write(0, "error tooManyComponents")
    V("err-bad-component-kind-0", "A component of kind 0.").header(count=1).entry(0, 0).write(0, "error badComponentKind")
    V("err-bad-component-kind-4", "A component of kind 4 after a valid DATA one.").header(count=2, body=2).entry(1, 2).entry(4, 0).raw(b"hi").write(0, "error badComponentKind")
    V("err-memory-length", "A MEMORY entry of length 0.").header(count=1).memory(0).write(1, "error memoryLength")
    V("err-memory-length-in-body", "A MEMORY entry of length 5 counted in the body length, with 5 body bytes: MEMORY bytes are never in the frame.").header(count=1, body=5).memory(5).raw(b"abcde").write(1, "error lengthMismatch")
    V("err-descriptors-missing-memory", "One MEMORY component, no descriptor received.").header(count=1).memory(70000).write(0, "error descriptorCountMismatch")
    V("err-descriptors-memory-and-port-one-short", "MEMORY and PORT, one descriptor received.").header(count=2).memory(70000).entry(2, 0).write(1, "error descriptorCountMismatch")
    V("err-reserved-bytes", "A DATA entry whose second reserved byte is 01.").header(count=1, body=1).entry(1, 1, reserved=b"\0\x01\0").raw(b"z").write(0, "error reservedBytes")
    V("err-reserved-bytes-port", "A PORT entry whose third reserved byte is 80.").header(count=1).entry(2, 0, reserved=b"\0\0\x80").write(1, "error reservedBytes")
    V("err-port-length", "A PORT entry with length 5 (body length 5 and 5 body bytes, so the totals agree).").header(count=1, body=5).entry(2, 5).raw(b"abcde").write(1, "error portLength")
    V("err-length-body-short", "bodyLength says 6, only 5 body bytes follow.").header(count=1, body=6).entry(1, 6).raw(b"hello").write(0, "error lengthMismatch")
    V("err-length-extra-bytes", "A valid one-DATA frame followed by one extra byte.").header(count=1, body=5).entry(1, 5).raw(b"hello").raw(b"\x00", "extra byte").write(0, "error lengthMismatch")
    V("err-length-table-truncated", "Count 2 but only one table entry present.").header(count=2).entry(2, 0).write(1, "error lengthMismatch")
    V("err-length-empty-with-trailing", "An empty message (count 0, body 0) with 4 trailing bytes.").header().raw(b"\xde\xad\xbe\xef").write(0, "error lengthMismatch")
    V("err-length-sum", "Header body length 5 and 5 body bytes, but the entries say 2 + 2 = 4.").header(count=2, body=5).entry(1, 2).entry(1, 2).raw(b"hello").write(0, "error lengthMismatch")
    V("err-length-sum-overflow", "Entries 0xFFFFFFFF + 6 = 2^32 + 5: equal to bodyLength 5 only if the sum wraps at 32 bits.").header(count=2, body=5).entry(1, 0xFFFFFFFF).entry(1, 6).raw(b"hello").write(0, "error lengthMismatch")
    v = V("err-frame-too-large", "One DATA component of 65513 bytes: 65537 bytes, otherwise consistent.").header(count=1, body=65513).entry(1, 65513).rep(0x5A, 65513)
    v.write(0, "error frameTooLarge")
    V("err-descriptors-missing-port", "One PORT component, no descriptor received.").header(count=1).entry(2, 0).write(0, "error descriptorCountMismatch")
    V("err-descriptors-missing-reply", "REPLY_PORT set, no descriptor received.").header(flags=1).write(0, "error descriptorCountMismatch")
    V("err-descriptors-extra", "One DATA component and a descriptor nobody asked for.").header(count=1, body=2).entry(1, 2).raw(b"hi").write(1, "error descriptorCountMismatch")
    V("err-descriptors-one-short", "Two PORTs and a reply port, but only 2 descriptors received.").header(flags=1, count=2).entry(2, 0).entry(2, 0).write(2, "error descriptorCountMismatch")

    # ---- check order (several faults; the first check of section 5.2 wins) ----
    v = V("order-too-large-before-magic", "65537 bytes of zeros: F1 (frameTooLarge) before F3 (badMagic).").rep(0x00, 65537)
    v.write(0, "error frameTooLarge")
    V("order-short-before-magic", "4 bytes \"XXXX\": F2 (truncatedHeader) before F3.").raw(b"XXXX").write(0, "error truncatedHeader")
    V("order-magic-before-version", "Bad magic and version 9: F3 before F4.").header(magic=b"ABCD", version=9).write(0, "error badMagic")
    V("order-version-before-flags", "Version 2 and flags FF: F4 before F5.").header(version=2, flags=0xFF).write(0, "error unsupportedVersion")
    V("order-flags-before-count", "Flags 04 and count 100: F5 before F6.").header(flags=0x04, count=100).write(0, "error reservedFlags")
    V("order-count-before-lengths", "Count 65 in a bare 16-byte header: F6 before F7.").header(count=65).write(0, "error tooManyComponents")
    V("order-table-before-kind", "Count 2, only one entry present and it has kind 9: F7 (table does not fit) before F8a.").header(count=2).entry(9, 0).write(0, "error lengthMismatch")
    V("order-entry-by-entry", "Entry 0 has non-zero reserved bytes, entry 1 has kind 7: entries are checked one at a time, so entry 0's reservedBytes wins.").header(count=2).entry(1, 0, reserved=b"\x01\0\0").entry(7, 0).write(0, "error reservedBytes")
    V("order-kind-before-reserved", "One entry with kind 4 and reserved bytes FF FF FF: F8a before F8b.").header(count=1).entry(4, 0, reserved=b"\xff\xff\xff").write(0, "error badComponentKind")
    V("order-reserved-before-port-length", "A PORT entry with reserved bytes and length 3: F8b before F8c.").header(count=1, body=3).entry(2, 3, reserved=b"\0\x02\0").raw(b"abc").write(1, "error reservedBytes")
    V("order-port-length-before-sum", "A PORT entry with length 3, body length 0: F8c before F9.").header(count=1).entry(2, 3).write(1, "error portLength")
    V("order-memory-length-before-sum", "A MEMORY entry of length 0, then entry lengths that disagree with the body: F8d before F9.").header(count=2, body=3).memory(0).entry(1, 1).raw(b"abc").write(1, "error memoryLength")
    V("order-sum-before-descriptors", "Entry lengths 1 + 1 != body length 3, and a PORT without descriptor: F9 before F10.").header(count=3, body=3).entry(1, 1).entry(1, 1).entry(2, 0).raw(b"abc").write(0, "error lengthMismatch")
    metadata_vectors()
    print("wrote", len([f for f in os.listdir(OUT) if f.endswith('.vector')]), "vectors to", os.path.normpath(OUT))
    named()

# ---- named-ports.md section 8 ----

NAMED = os.path.join(OUT, "named")

def fnv1a64(data):
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h

def address(name, uid):
    scope = f"runloopkit/{uid}/".encode()
    if len(scope) + len(name) <= 107:
        return scope + name
    return scope + b"~" + f"{fnv1a64(name):016x}".encode()

def write_named(file, comment, lines):
    text = [f"# {line}" for line in comment.split("\n")] + lines
    with open(os.path.join(NAMED, file + ".vector"), "w") as f:
        f.write("\n".join(text) + "\n")

def address_vector(file, comment, name, uid, name_line=None):
    a = address(name, uid)
    write_named(file, comment + f"\n{len(a)} address bytes: {a.decode()}", [
        name_line or f"name: {name.decode()}", f"uid: {uid}", f"address: {hx(a)}"])

def record(kind, name=b"", magic=b"RLKN", version=1, length=None, reserved=0, extra=b""):
    n = len(name) if length is None else length
    return [("magic", magic), ("version", bytes([version])), ("kind", bytes([kind])),
            (f"name length {n}", bytes([n])), ("reserved", bytes([reserved]))] + \
           ([("name", name)] if name else []) + ([("extra bytes", extra)] if extra else [])

def handshake_vector(file, comment, side, fields, expect):
    lines = []
    size = 0
    for note, b in fields:
        lines.append(f"# {note}")
        lines.append(f"record: {hx(b)}")
        size += len(b)
    write_named(file, comment + f"\n{size} bytes", lines + [f"side: {side}", f"expect: {expect}"])

def named():
    os.makedirs(NAMED, exist_ok=True)
    for f in os.listdir(NAMED):
        if f.endswith(".vector"): os.remove(os.path.join(NAMED, f))
    address_vector("address-system-scope", "The example daemon's name in the system scope (uid 0).", b"example-daemon", 0)
    address_vector("address-user-scope", "A user's name: the scope is the decimal uid.", b"com.example.editor_2", 1000)
    address_vector("address-dot", "'.' is a plain name: no file system is involved.", b".", 65534)
    address_vector("address-fits-exactly", "uid 0 (prefix 13 bytes) and a 94-byte name: 107 bytes, the most that fits.", b"a" * 94, 0,
                   "name-repeat: a 94")
    address_vector("address-hashed-95", "uid 0 and a 95-byte name: 108 bytes do not fit, so the FNV-1a-64 form.", b"a" * 95, 0,
                   "name-repeat: a 95")
    address_vector("address-hashed-max", "The largest uid and a 100-byte name: hashed.", b"Z" * 100, 4294967295,
                   "name-repeat: Z 100")
    address_vector("address-hashed-mixed", "A long name of every name byte class, uid 1000: hashed.",
                   (b"Abc.def_ghi-0123456789" * 5)[:100], 1000)

    hello = record(1, b"example-daemon")
    handshake_vector("handshake-hello", "HELLO for 'example-daemon'.", "owner", hello, "hello example-daemon")
    handshake_vector("handshake-hello-max", "HELLO with a 100-byte name.", "owner", record(1, b"n" * 100), "hello " + "n" * 100)
    handshake_vector("handshake-welcome", "WELCOME.", "client", record(2), "welcome")
    handshake_vector("handshake-denied", "DENIED.", "client", record(3), "denied")
    handshake_vector("handshake-unknown-name", "UNKNOWN_NAME.", "client", record(4), "unknown-name")
    handshake_vector("handshake-too-many-connections", "TOO_MANY_CONNECTIONS.", "client", record(5), "too-many-connections")
    handshake_vector("err-handshake-truncated", "7 bytes: H3.", "owner", [("magic, version, kind, length", b"RLKN\x01\x01\x01")], "error truncated")
    handshake_vector("err-handshake-bad-magic", "Magic 'RLKM' (a frame's magic) where a HELLO belongs: H4.", "owner",
                     record(1, b"x", magic=b"RLKM"), "error badMagic")
    handshake_vector("err-handshake-version", "Version 2: H5.", "owner", record(1, b"x", version=2), "error unsupportedVersion")
    handshake_vector("err-handshake-owner-gets-welcome", "A WELCOME sent to the owner: H6.", "owner", record(2), "error unexpectedKind")
    handshake_vector("err-handshake-client-gets-hello", "A HELLO sent back to the client: H6.", "client", record(1, b"x"), "error unexpectedKind")
    handshake_vector("err-handshake-kind-6", "Kind 6: H6.", "client", record(6), "error unexpectedKind")
    handshake_vector("err-handshake-reserved", "Reserved byte 01: H7.", "owner", record(1, b"x", reserved=1), "error reservedBytes")
    handshake_vector("err-handshake-length-short", "Length 5, 4 name bytes: H8.", "owner", record(1, b"abcd", length=5), "error lengthMismatch")
    handshake_vector("err-handshake-length-long", "Length 1, 2 bytes after the header: H8.", "owner", record(1, b"a", extra=b"b"), "error lengthMismatch")
    handshake_vector("err-handshake-empty-name", "HELLO with length 0: H9.", "owner", record(1), "error invalidName")
    handshake_vector("err-handshake-long-name", "HELLO with a 101-byte name: H9.", "owner", record(1, b"n" * 101), "error invalidName")
    handshake_vector("err-handshake-path-name", "HELLO naming a path: H9.", "owner", record(1, b"/run/x"), "error invalidName")
    handshake_vector("err-handshake-welcome-with-name", "WELCOME with a name: H9.", "client", record(2, b"x"), "error invalidName")
    handshake_vector("order-handshake-magic-before-kind", "Bad magic and kind 9: H4 before H6.", "owner",
                     record(9, b"x", magic=b"XXXX"), "error badMagic")
    handshake_vector("order-handshake-kind-before-reserved", "Kind 2 at the owner and reserved 07: H6 before H7.", "owner",
                     record(2, reserved=7), "error unexpectedKind")
    handshake_vector("order-handshake-reserved-before-length", "Reserved 01 and a wrong length: H7 before H8.", "owner",
                     record(1, b"ab", length=9, reserved=1), "error reservedBytes")
    print("wrote", len(os.listdir(NAMED)), "vectors to", os.path.normpath(NAMED))

main()
