#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Read and edit Linux md v1.x superblocks (struct mdp_superblock_1) in a
member file -- an oracle for the tests, independent of nbdstripe's C code
(written from the md-research notes, sections 1.1, 1.2 and 1.7: fixed
little-endian offsets, md's checksum).

Where the superblock is (-m/--minor, default 2):
  1.2  at 4096 bytes          1.1  at 0
  1.0  ((sectors - 16) & ~7) sectors from the start (sectors: the file's
       size in 512-byte sectors)
or anywhere with --at BYTES.

Usage:
  md_sb.py [--minor 0|1|2 | --at BYTES] FILE get FIELD...
      one value per line: integers in decimal, UUIDs as mdadm prints them
      (8:8:8:8 hex), set_name as text, pad3 as hex, dev_roles as a comma
      list of max_dev entries; derived fields: role (dev_roles[dev_number]),
      csum (the checksum md computes), csum_ok (1/0), location (byte offset
      read), minor
  md_sb.py ... FILE set [--keep-csum] FIELD=VALUE...
      write fields (integers in any Python base: 0x1000; UUIDs as 32 hex
      digits with or without ':'/'-'; dev_roles[N]=V for one entry), then
      recompute the checksum -- unless --keep-csum (or sb_csum is set)
  md_sb.py ... FILE flip OFFSET
      xor the byte at OFFSET (relative to the superblock) with 0xff,
      leaving the checksum as it was: a corrupt superblock
  md_sb.py ... FILE dump
      every field as JSON (with csum and csum_ok)
  md_sb.py ... FILE check
      exit 0 when magic, major version, super_offset (= where it was read)
      and checksum are right, 1 otherwise (the reason on stderr)
  md_sb.py selftest
Exit status 0 on success, 1 on failure, 2 on bad usage.
"""

import json
import os
import struct
import sys

SECTOR = 512
SB_BYTES = 4096          # what md reads at the superblock's location
MAGIC = 0xA92B4EFC
MAX_DEV_LIMIT = (SB_BYTES - 256) // 2

# name: (offset, struct format); '<' little endian.  md_p.h's order.
FIELDS = {
    "magic": (0, "<I"),
    "major_version": (4, "<I"),
    "feature_map": (8, "<I"),
    "pad0": (12, "<I"),
    "set_uuid": (16, "16s"),
    "set_name": (32, "32s"),
    "ctime": (64, "<Q"),
    "level": (72, "<i"),
    "layout": (76, "<I"),
    "size": (80, "<Q"),
    "chunksize": (88, "<I"),
    "raid_disks": (92, "<I"),
    "bitmap_offset": (96, "<i"),
    "new_level": (100, "<I"),
    "reshape_position": (104, "<Q"),
    "delta_disks": (112, "<i"),
    "new_layout": (116, "<I"),
    "new_chunk": (120, "<I"),
    "new_offset": (124, "<i"),
    "data_offset": (128, "<Q"),
    "data_size": (136, "<Q"),
    "super_offset": (144, "<Q"),
    "recovery_offset": (152, "<Q"),
    "dev_number": (160, "<I"),
    "cnt_corrected_read": (164, "<I"),
    "device_uuid": (168, "16s"),
    "devflags": (184, "<B"),
    "bblog_shift": (185, "<B"),
    "bblog_size": (186, "<H"),
    "bblog_offset": (188, "<i"),
    "utime": (192, "<Q"),
    "events": (200, "<Q"),
    "resync_offset": (208, "<Q"),
    "sb_csum": (216, "<I"),
    "max_dev": (220, "<I"),
    "pad3": (224, "32s"),
}
ROLES_AT = 256
CSUM_AT = FIELDS["sb_csum"][0]
UUIDS = ("set_uuid", "device_uuid")


class Error(Exception):
    pass


def location(path, minor):
    """Byte offset of a 1.minor superblock in the member at path."""
    if minor == 2:
        return 8 * SECTOR
    if minor == 1:
        return 0
    if minor == 0:
        sectors = os.stat(path).st_size // SECTOR
        if sectors < 24:
            raise Error("%s: %d sectors: too small for an md superblock"
                        % (path, sectors))
        return ((sectors - 16) & ~7) * SECTOR
    raise Error("minor version %r: expected 0, 1 or 2" % minor)


def csum(buf):
    """md's checksum (calc_sb_1_csum, per md-research 1.7) of a superblock."""
    max_dev = struct.unpack_from("<I", buf, FIELDS["max_dev"][0])[0]
    n = 256 + 2 * max_dev
    if n > len(buf):
        raise Error("max_dev %d: the superblock would end past %d bytes"
                    % (max_dev, len(buf)))
    acc = 0
    o = 0
    while n - o >= 4:
        w = struct.unpack_from("<I", buf, o)[0]
        if o == CSUM_AT:
            w = 0
        acc += w
        o += 4
    if n - o == 2:
        acc += struct.unpack_from("<H", buf, o)[0]
    return ((acc & 0xFFFFFFFF) + (acc >> 32)) & 0xFFFFFFFF


def fmt_uuid(b):
    h = b.hex()
    return ":".join(h[i:i + 8] for i in range(0, 32, 8))


def parse_uuid(s):
    h = s.replace(":", "").replace("-", "")
    if len(h) != 32:
        raise Error("%r: expected 32 hex digits" % s)
    return bytes.fromhex(h)


class Superblock:
    def __init__(self, path, at):
        self.path = path
        self.at = at
        with open(path, "rb") as f:
            f.seek(at)
            self.buf = bytearray(f.read(SB_BYTES))
        if len(self.buf) < SB_BYTES:
            raise Error("%s: only %d bytes at %d" % (path, len(self.buf), at))

    def raw(self, name):
        off, fmt = FIELDS[name]
        return struct.unpack_from(fmt, self.buf, off)[0]

    def roles(self):
        n = min(self.raw("max_dev"), MAX_DEV_LIMIT)
        return list(struct.unpack_from("<%dH" % n, self.buf, ROLES_AT))

    def get(self, name):
        if name == "role":
            roles, d = self.roles(), self.raw("dev_number")
            return roles[d] if d < len(roles) else 0xFFFF
        if name == "csum":
            return csum(self.buf)
        if name == "csum_ok":
            return int(csum(self.buf) == self.raw("sb_csum"))
        if name == "location":
            return self.at
        if name == "minor":
            so = self.raw("super_offset")
            return 1 if so <= 4 else 2 if so <= 8 else 0
        if name == "dev_roles":
            return self.roles()
        if name not in FIELDS:
            raise Error("no field %r" % name)
        v = self.raw(name)
        if name in UUIDS:
            return fmt_uuid(v)
        if name == "set_name":
            return v.split(b"\0", 1)[0].decode("utf-8", "replace")
        if name == "pad3":
            return v.hex()
        return v

    def set(self, name, value):
        if name.startswith("dev_roles[") and name.endswith("]"):
            i = int(name[len("dev_roles["):-1], 0)
            struct.pack_into("<H", self.buf, ROLES_AT + 2 * i, int(value, 0))
            return
        if name == "dev_roles":
            for i, v in enumerate(value.split(",")):
                struct.pack_into("<H", self.buf, ROLES_AT + 2 * i, int(v, 0))
            return
        if name not in FIELDS:
            raise Error("no field %r" % name)
        off, fmt = FIELDS[name]
        if name in UUIDS:
            v = parse_uuid(value)
        elif name == "set_name":
            v = value.encode()
            if len(v) > 32:
                raise Error("set_name: at most 32 bytes")
        elif name == "pad3":
            v = bytes.fromhex(value)
        else:
            v = int(value, 0)
        struct.pack_into(fmt, self.buf, off, v)

    def fix_csum(self):
        struct.pack_into("<I", self.buf, CSUM_AT, csum(self.buf))

    def write(self):
        with open(self.path, "r+b") as f:
            f.seek(self.at)
            f.write(self.buf)

    def problems(self):
        out = []
        if self.raw("magic") != MAGIC:
            out.append("magic %#x, not %#x" % (self.raw("magic"), MAGIC))
            return out
        if self.raw("major_version") != 1:
            out.append("major_version %d, not 1" % self.raw("major_version"))
        if self.raw("max_dev") > MAX_DEV_LIMIT:
            out.append("max_dev %d > %d" % (self.raw("max_dev"), MAX_DEV_LIMIT))
            return out
        if self.raw("super_offset") * SECTOR != self.at:
            out.append("super_offset %d sectors, read at byte %d"
                       % (self.raw("super_offset"), self.at))
        if csum(self.buf) != self.raw("sb_csum"):
            out.append("checksum %#x, md computes %#x"
                       % (self.raw("sb_csum"), csum(self.buf)))
        return out

    def dump(self):
        d = {name: self.get(name) for name in FIELDS}
        for name in ("role", "csum", "csum_ok", "location", "minor",
                     "dev_roles"):
            d[name] = self.get(name)
        return d


def selftest():
    # A superblock built by hand: checksum by the rule, an odd max_dev
    # (trailing 16-bit word), the fold of the high half.
    buf = bytearray(SB_BYTES)
    struct.pack_into("<I", buf, 0, MAGIC)
    struct.pack_into("<I", buf, 220, 3)          # max_dev 3: n = 262
    struct.pack_into("<3H", buf, 256, 0, 1, 0xFFFF)
    want = MAGIC + 3 + (0 | 1 << 16) + 0xFFFF
    assert csum(buf) == want, (hex(csum(buf)), hex(want))
    struct.pack_into("<I", buf, 216, 0x12345678)  # the csum field counts as 0
    assert csum(buf) == want
    for o in range(0, 216, 4):                    # force a carry
        struct.pack_into("<I", buf, o, 0xFFFFFFFF)
    acc = sum(struct.unpack_from("<I", buf, o)[0] for o in range(0, 260, 4)
              if o != 216) + struct.unpack_from("<H", buf, 260)[0]
    assert csum(buf) == ((acc & 0xFFFFFFFF) + (acc >> 32)) & 0xFFFFFFFF
    assert acc >> 32 != 0
    # One fold, the carry out of it dropped: all 0xff, max_dev 1920, word 0
    # 0xffffffff - 903: 1023 words sum to 1022 * 2^32 - 5.
    buf = bytearray(b"\xff" * SB_BYTES)
    struct.pack_into("<I", buf, 220, 1920)
    struct.pack_into("<I", buf, 0, 0xFFFFFFFF - 903)
    assert csum(buf) == 0x3F8, hex(csum(buf))
    # A member of a 2 x 1 GiB raid0 made by mdadm 4.1, rebuilt from its
    # published --examine (md-research 5: "Checksum : e02839a - correct")
    # and what mdadm writes (1.9); ctime 20:21:09 +05:30.
    buf = bytearray(SB_BYTES)
    for name, v in (("magic", MAGIC), ("major_version", 1),
                    ("set_uuid", parse_uuid("05cbbd18:3f0d68d1:98b0fc01:6f6b7f26")),
                    ("set_name", b"localhost.localdomain:0"),
                    ("ctime", 1688827869), ("chunksize", 1024),
                    ("raid_disks", 2), ("data_offset", 4096),
                    ("data_size", 2093056), ("super_offset", 8),
                    ("device_uuid", parse_uuid("c383b4b4:dcf3fb33:bb517561:1a73562c")),
                    ("bblog_size", 8), ("bblog_offset", 8),
                    ("utime", 1688827869), ("resync_offset", 2**64 - 1),
                    ("max_dev", 128)):
        off, fmt = FIELDS[name]
        struct.pack_into(fmt, buf, off, v)
    struct.pack_into("<128H", buf, ROLES_AT, 0, 1, *([0xFFFF] * 126))
    assert csum(buf) == 0x0E02839A, hex(csum(buf))
    assert fmt_uuid(bytes(range(16))) == "00010203:04050607:08090a0b:0c0d0e0f"
    assert parse_uuid("00010203-0405-0607-0809-0a0b0c0d0e0f") == bytes(range(16))
    # Offsets: the fields tile bytes 0..255 without gap or overlap.
    spans = sorted((o, struct.calcsize(f)) for o, f in FIELDS.values())
    at = 0
    for o, n in spans:
        assert o == at, (o, at)
        at = o + n
    assert at == 256
    print("md_sb selftest: ok")
    return 0


def main(argv):
    args = list(argv)
    minor, at = 2, None
    while args and args[0].startswith("-"):
        opt = args.pop(0)
        if opt in ("-m", "--minor") and args:
            minor = int(args.pop(0))
        elif opt == "--at" and args:
            at = int(args.pop(0), 0)
        else:
            print(__doc__, file=sys.stderr)
            return 2
    if args == ["selftest"]:
        return selftest()
    if len(args) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    path, cmd, rest = args[0], args[1], args[2:]
    try:
        sb = Superblock(path, location(path, minor) if at is None else at)
        if cmd == "get" and rest:
            for name in rest:
                v = sb.get(name)
                print(",".join(map(str, v)) if isinstance(v, list) else v)
        elif cmd == "set" and rest:
            keep = "--keep-csum" in rest
            pairs = [r for r in rest if r != "--keep-csum"]
            for p in pairs:
                if "=" not in p:
                    raise Error("%r: expected FIELD=VALUE" % p)
                name, value = p.split("=", 1)
                sb.set(name, value)
                if name == "sb_csum":
                    keep = True
            if not keep:
                sb.fix_csum()
            sb.write()
        elif cmd == "flip" and len(rest) == 1:
            off = int(rest[0], 0)
            sb.buf[off] ^= 0xFF
            sb.write()
        elif cmd == "dump" and not rest:
            print(json.dumps(sb.dump(), indent=1))
        elif cmd == "check" and not rest:
            bad = sb.problems()
            for b in bad:
                print("%s: superblock at %d: %s" % (path, sb.at, b),
                      file=sys.stderr)
            return 1 if bad else 0
        else:
            print(__doc__, file=sys.stderr)
            return 2
    except (Error, OSError, ValueError, struct.error) as e:
        print("md_sb: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
