#!/usr/bin/env python3
"""Writes Protocols/vectors/distributed/*.vector (format: distributed-envelope.md section 7).

Each envelope is written field by field, one `envelope:` line per field, so that a reader can
check it by eye against section 4. Re-run after editing; the files are the normative
artefact, this script only saves typing.
"""
import os, struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "vectors", "distributed")
KINDS = {"hello": 1, "welcome": 2, "call": 3, "return": 4, "throw": 5, "failure": 6}
REASONS = {1: "actorNotFound", 2: "unknownTarget", 3: "remoteCallFailed"}
TWICE = b"$s15DistributedPeer5StoreC5twiceyS2iYaKFTE"
ECHO = b"$s15DistributedPeer5StoreC4echoyxxYaKSeRzSERzlFTE"

def hx(b):
    return " ".join(f"{x:02X}" for x in b)

def hexstr(b):
    return b.hex().upper() if b else "-"

class V:
    def __init__(self, name, comment):
        self.name, self.comment, self.lines, self.size = name, comment, [], 0
    def raw(self, b, note):
        self.lines.append(f"# {note}\nenvelope: {hx(b)}" if b else f"# {note} (no bytes)")
        self.size += len(b)
        return self
    def rep(self, byte, count, note):
        self.lines.append(f"# {note}\nrepeat: {byte:02X} {count}")
        self.size += count
        return self
    def header(self, kind, call_id, magic=b"RLKD", version=1, reserved=0):
        kind_byte = KINDS.get(kind, kind)
        self.raw(magic, "magic")
        self.raw(bytes([version]), f"version {version}")
        self.raw(bytes([kind_byte]), f"kind {kind_byte} ({kind})")
        self.raw(struct.pack("<H", reserved), "reserved")
        self.raw(struct.pack("<Q", call_id), f"call id {call_id}")
        return self
    def write(self, expect):
        text = [f"# {line}" for line in self.comment.split("\n")]
        text.append(f"# {self.size} bytes")
        text += self.lines
        text.append(f"expect: {expect}")
        with open(os.path.join(OUT, self.name + ".vector"), "w") as f:
            f.write("\n".join(text) + "\n")

def call(name, comment, call_id, target, subs, args, counts=None, tail=b"", expect=None):
    t, g, a = counts or (len(target), len(subs), len(args))
    v = V(name, comment).header("call", call_id)
    v.raw(struct.pack("<H", t), f"target length {t}")
    v.raw(bytes([g]), f"substitution count {g}")
    v.raw(bytes([a]), f"argument count {a}")
    for i, arg in enumerate(args):
        v.raw(struct.pack("<I", len(arg)), f"argument {i + 1}: length {len(arg)}")
        v.raw(arg, f"argument {i + 1}: {arg.decode(errors='replace')}")
    for i, sub in enumerate(subs):
        v.raw(struct.pack("<H", len(sub)), f"substitution {i + 1}: length {len(sub)}")
        v.raw(sub, f"substitution {i + 1}: {sub.decode(errors='replace')}")
    v.raw(target, f"target: {target.decode(errors='replace')}")
    if tail:
        v.raw(tail, "more bytes")
    if expect is None:
        expect = "call {} {} {} {}".format(call_id, target.decode(),
                                           ",".join(s.decode() for s in subs) or "-",
                                           ",".join(hexstr(x) for x in args) or "-")
    v.write(expect)

def failure(name, comment, call_id, reason, text, reserved=b"\0\0\0", expect=None):
    v = V(name, comment).header("failure", call_id)
    v.raw(bytes([reason]), f"reason {reason}")
    v.raw(reserved, "reserved")
    if len(text) > 64 and len(set(text)) == 1:
        v.rep(text[0], len(text), f"text: {len(text)} bytes of '{chr(text[0])}'")
    else:
        v.raw(text, f"text: {text.decode(errors='replace')}")
    v.write(expect or f"failure {call_id} {REASONS[reason]} {hexstr(text)}")

def main():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        if f.endswith(".vector"):
            os.remove(os.path.join(OUT, f))

    # ---- valid ----
    V("ok-hello", "HELLO, call id 1: opens a session (sent with the caller's reply port).").header("hello", 1).write("hello 1")
    V("ok-welcome", "WELCOME answering HELLO 1 (sent with the session port as the frame's second component).") \
        .header("welcome", 1).write("welcome 1")
    call("ok-call-twice", "CALL 7 of DistributedPeer.Store.twice(_:) with the Int 21.", 7, TWICE, [], [b"21"])
    call("ok-call-no-arguments", "CALL of a function without parameters.", 2,
         b"$s15DistributedPeer5StoreC7entriesSaySiGyYaKFTE", [], [])
    call("ok-call-generic", "CALL of the generic echo(_:) with the substitution String (SS) and a string argument.",
         0xFFFFFFFFFFFFFFFF, ECHO, [b"SS"], [b'"a\\/b"'])
    call("ok-call-several", "CALL with three arguments: a string, an object, an empty array.", 3,
         b"$s4Demo5StoreC3put_2toySS_AA4ItemVSaySiGtYaKFTE", [],
         [b'"k"', b'{"count":2,"name":"x"}', b"[]"])
    call("ok-call-two-substitutions", "CALL with two substitutions, Int (Si) then [String] (SaySSG), and no arguments.", 9,
         b"$s4Demo5StoreC4pairyyx_q_tSeRzSERzSeR_SER_r0_lFTE", [b"Si", b"SaySSG"], [])
    call("ok-call-empty-argument", "CALL whose one argument is empty: the envelope is valid; the value does not decode (section 5).",
         4, TWICE, [], [b""])
    V("ok-return", "RETURN 7: the Int 42.").header("return", 7).raw(b"42", "value: 42").write(f"return 7 {hexstr(b'42')}")
    V("ok-return-void", "RETURN of a function that returns nothing: no value.").header("return", 8).write("return 8 -")
    v = V("ok-throw", "THROW 5: a DistributedPeer.StoreError.").header("throw", 5)
    name = b"15DistributedPeer10StoreErrorV"
    value = b'{"missingKey":"absent"}'
    v.raw(struct.pack("<H", len(name)), f"type name length {len(name)}").raw(name, f"type: {name.decode()}")
    v.raw(value, f"value: {value.decode()}").write(f"throw 5 {name.decode()} {hexstr(value)}")
    failure("ok-failure-not-found", "FAILURE answering HELLO 1: nothing published as 'store'.", 1, 1, b"store")
    failure("ok-failure-unknown-target", "FAILURE 3: the target is not one of the actor's.", 3, 2,
            b"DistributedPeer.Store.twice(_:)")
    failure("ok-failure-remote", "FAILURE 4: an error that is not Codable, by its description.", 4, 3,
            "plain error: caf\u00e9".encode())
    failure("ok-failure-empty-text", "FAILURE with no text.", 6, 3, b"")
    failure("ok-failure-longest-text", "FAILURE with 4096 bytes of text, the most.", 10, 3, b"x" * 4096)

    # ---- errors, in the order of section 5 ----
    v = V("err-truncated-header", "15 bytes: shorter than the header.")
    v.raw(b"RLKD", "magic").raw(bytes([1, 1]), "version, kind").raw(b"\0\0", "reserved")
    v.raw(struct.pack("<Q", 1)[:7], "call id, one byte short").write("error truncated")
    v = V("err-empty", "no bytes at all.")
    v.write("error truncated")
    # tooLarge (2^32 bytes or more) has no vector: a file of 4 GiB would be needed.
    V("err-bad-magic", "magic RLKM (a frame's), not RLKD.").header("hello", 1, magic=b"RLKM").write("error badMagic")
    V("err-version-2", "version 2.").header("hello", 1, version=2).write("error unsupportedVersion")
    V("err-version-0", "version 0.").header("hello", 1, version=0).write("error unsupportedVersion")
    V("err-kind-0", "kind 0.").header(0, 1).write("error unknownKind")
    V("err-kind-7", "kind 7.").header(7, 1).write("error unknownKind")
    V("err-reserved", "reserved header bytes not 0.").header("hello", 1, reserved=0x0100).write("error reservedNotZero")
    V("err-call-id-0", "call id 0.").header("call", 0).write("error badCallID")
    V("order-magic-before-version", "bad magic and bad version: the magic is checked first.") \
        .header("hello", 1, magic=b"XLKD", version=9).write("error badMagic")
    V("order-kind-before-reserved", "unknown kind and reserved bytes set: the kind is checked first.") \
        .header(9, 1, reserved=1).write("error unknownKind")
    V("order-reserved-before-call-id", "reserved bytes set and call id 0: the reserved bytes first.") \
        .header("hello", 0, reserved=1).write("error reservedNotZero")
    V("err-hello-trailing", "HELLO followed by a byte.").header("hello", 1).raw(b"\0", "one more byte").write("error trailingBytes")
    V("err-welcome-trailing", "WELCOME followed by a byte.").header("welcome", 1).raw(b"\0", "one more byte").write("error trailingBytes")
    V("err-call-truncated-counts", "CALL cut inside its counts (19 bytes).").header("call", 1) \
        .raw(struct.pack("<H", 3) + b"\0", "target length 3, substitution count 0; no argument count").write("error truncated")
    call("err-call-target-length-0", "CALL with target length 0.", 1, b"", [], [], expect="error badLength")
    v = V("err-call-target-length-1025", "CALL with a target of 1025 bytes.").header("call", 1)
    v.raw(struct.pack("<H", 1025), "target length 1025").raw(bytes([0, 0]), "no substitutions, no arguments")
    v.rep(0x78, 1025, "target: 1025 bytes of 'x'").write("error badLength")
    call("err-call-17-substitutions", "CALL claiming 17 substitutions.", 1, TWICE, [], [], counts=(len(TWICE), 17, 0),
         expect="error badCount")
    call("err-call-65-arguments", "CALL claiming 65 arguments.", 1, TWICE, [], [], counts=(len(TWICE), 0, 65),
         expect="error badCount")
    call("order-target-length-before-counts", "CALL with target length 0 and 65 arguments: the target length first.",
         1, b"", [], [], counts=(0, 0, 65), expect="error badLength")
    call("err-call-argument-missing", "CALL claiming 2 arguments, with 1 (the target is read as the second's length).",
         1, TWICE, [], [b"21"], counts=(len(TWICE), 0, 2), expect="error truncated")
    v = V("err-call-argument-past-end", "CALL whose argument length runs past the end.").header("call", 1)
    v.raw(struct.pack("<H", 1), "target length 1").raw(bytes([0, 1]), "no substitutions, 1 argument")
    v.raw(struct.pack("<I", 100), "argument 1: length 100").raw(b"21", "2 bytes").write("error truncated")
    call("err-call-substitution-length-0", "CALL with a substitution of length 0.", 1, ECHO, [b""], [b"1"],
         expect="error badLength")
    call("err-call-substitution-space", "CALL with a space in a substitution.", 1, ECHO, [b"S S"], [b"1"],
         expect="error badName")
    call("err-call-target-nonprintable", "CALL with a byte 0x7F in the target.", 1, b"$s3Foo\x7f", [], [],
         expect="error badName")
    call("err-call-target-short", "CALL whose target has 2 of its 40 bytes.", 1, b"$s", [], [], counts=(40, 0, 0),
         expect="error truncated")
    call("err-call-trailing", "CALL followed by a byte after its target.", 1, TWICE, [], [b"21"], tail=b"!",
         expect="error trailingBytes")
    call("order-arguments-before-substitutions", "CALL whose argument runs past the end and whose substitution count is 1: "
         "the arguments are walked first.", 1, b"x", [], [], counts=(1, 1, 1), tail=b"\xff\xff\xff\x7f",
         expect="error truncated")
    v = V("err-throw-truncated", "THROW with one byte of its type-name length.").header("throw", 1)
    v.raw(b"\x05", "one byte").write("error truncated")
    v = V("err-throw-name-length-0", "THROW with a type name of length 0.").header("throw", 1)
    v.raw(struct.pack("<H", 0), "type name length 0").raw(b"{}", "value").write("error badLength")
    v = V("err-throw-name-short", "THROW whose type name is cut.").header("throw", 1)
    v.raw(struct.pack("<H", 30), "type name length 30").raw(b"15Distri", "8 bytes").write("error truncated")
    v = V("err-throw-name-newline", "THROW with a newline in its type name.").header("throw", 1)
    v.raw(struct.pack("<H", 3), "type name length 3").raw(b"S\nS", "type").raw(b"{}", "value").write("error badName")
    v = V("err-failure-truncated", "FAILURE of 19 bytes.").header("failure", 1)
    v.raw(bytes([3, 0, 0]), "reason 3, two reserved bytes").write("error truncated")
    failure("err-failure-reason-0", "FAILURE with reason 0.", 1, 0, b"x", expect="error unknownReason")
    failure("err-failure-reason-4", "FAILURE with reason 4.", 1, 4, b"x", expect="error unknownReason")
    failure("err-failure-reserved", "FAILURE with a reserved byte set.", 1, 3, b"x", reserved=b"\0\1\0",
            expect="error reservedNotZero")
    failure("order-failure-reason-before-reserved", "FAILURE with reason 9 and a reserved byte set: the reason first.",
            1, 9, b"x", reserved=b"\1\0\0", expect="error unknownReason")
    failure("err-failure-text-4097", "FAILURE with 4097 bytes of text.", 1, 3, b"x" * 4097, expect="error badLength")
    failure("err-failure-text-not-utf8", "FAILURE whose text is not UTF-8.", 1, 3, b"caf\xe9", expect="error badText")
    print(f"wrote {len([f for f in os.listdir(OUT) if f.endswith('.vector')])} vectors to {os.path.normpath(OUT)}")

main()
