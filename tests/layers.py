#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The engine's house rules, checked on the objects the build made.

    layers.py SOURCE_DIR LOWER_OBJS UPPER_OBJS

LOWER_OBJS and UPPER_OBJS are the object files of the two libraries
(stripe-base and stripe-engine, plugin/CMakeLists.txt), each list joined
with ':'.  Each object's folder (member, core, array...) is the name of
the directory it was built in, as CMake mirrors the source tree.

  1. Calls go down: no object of the lower library has an undefined
     symbol that the upper library defines (nm).
  2. No circle between folders: the graph "folder A uses a symbol that
     folder B defines" has no cycle.
  3. core imports nothing from health but the recorder's interface:
     plugin/core includes health_record.h, never health.h.
  4. Names: no exported symbol in another library's namespace (libnbd's
     nbd_, libuuid's uuid_, liburing's io_uring_, json-c's json_object_
     and json_tokener_), and none that one of the linked libraries
     exports itself.
  5. include/ holds module faces: a header there that only one plugin
     folder includes, and nothing outside it, belongs in that folder.
  6. No C file over 800 lines in plugin/ and daemon/.

Each rule prints what breaks it; the exit status is 1 when any does.
"""

import collections
import glob
import os
import re
import subprocess
import sys

FOREIGN = ("nbd_", "uuid_", "io_uring_", "json_object_", "json_tokener_")
SHARED = ("libnbd.so.0", "liburing.so.2", "libjson-c.so.5", "libconfig.so.9")
MAX_LINES = 800

failed = False


def fail(rule, msg):
    global failed
    failed = True
    print("FAIL (%s): %s" % (rule, msg))


_nm_cache = {}


def nm(obj, *flags):
    key = (obj, flags)
    if key not in _nm_cache:
        _nm_cache[key] = _nm(obj, *flags)
    return _nm_cache[key]


def _nm(obj, *flags):
    out = subprocess.run(["nm", *flags, obj], check=True, capture_output=True,
                         text=True).stdout
    return [line.split()[-1] for line in out.splitlines() if line.strip()]


def folder(obj):
    return os.path.basename(os.path.dirname(obj))


def defined(objs):
    where = {}
    for o in objs:
        for s in nm(o, "--defined-only", "-g"):
            where[s] = o
    return where


def rule_down(lower, upper):
    up = defined(upper)
    for o in lower:
        for s in nm(o, "-u"):
            if s in up:
                fail("down", "%s (%s) uses %s, defined above it in %s"
                     % (os.path.basename(o), folder(o), s,
                        os.path.basename(up[s])))


def rule_no_circle(objs):
    where = defined(objs)
    edges = collections.defaultdict(dict)
    for o in objs:
        for s in nm(o, "-u"):
            if s in where and folder(where[s]) != folder(o):
                edges[folder(o)].setdefault(folder(where[s]), (o, s))
    # A cycle: a path back to where it started (depth-first, colours).
    colour = {}
    stack = []

    def visit(a):
        colour[a] = 1
        stack.append(a)
        for b in sorted(edges[a]):
            if colour.get(b) == 1:
                cyc = stack[stack.index(b):] + [b]
                why = []
                for x, y in zip(cyc, cyc[1:]):
                    o, s = edges[x][y]
                    why.append("%s -> %s (%s uses %s)"
                               % (x, y, os.path.basename(o), s))
                fail("circle", "; ".join(why))
            elif b not in colour:
                visit(b)
        stack.pop()
        colour[a] = 2

    for a in sorted(edges):
        if a not in colour:
            visit(a)


def rule_core_health(src):
    for f in sorted(glob.glob(os.path.join(src, "plugin/core/*.[ch]"))):
        with open(f) as fp:
            if re.search(r'#include "health\.h"', fp.read()):
                fail("recorder", "%s includes health.h: core knows health "
                     "only as a recorder (health_record.h)"
                     % os.path.relpath(f, src))


def shared_exports():
    names = set()
    for lib in SHARED:
        for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
                  "/lib/x86_64-linux-gnu", "/usr/lib"):
            p = os.path.join(d, lib)
            if os.path.exists(p):
                names.update(nm(p, "-D", "--defined-only"))
                break
    return names


def rule_names(objs):
    theirs = shared_exports()
    for o in objs:
        for s in nm(o, "--defined-only", "-g"):
            if s.startswith(FOREIGN):
                fail("names", "%s exports %s, in another library's namespace"
                     % (os.path.basename(o), s))
            elif s in theirs:
                fail("names", "%s exports %s, which a linked library exports "
                     "too" % (os.path.basename(o), s))


def rule_faces(src):
    users = collections.defaultdict(set)
    trees = ["plugin", "daemon", "tests", "bench", "include"]
    for t in trees:
        for f in glob.glob(os.path.join(src, t, "**/*.[ch]"), recursive=True):
            rel = os.path.relpath(f, src).split(os.sep)
            where = "/".join(rel[:2]) if rel[0] == "plugin" and len(rel) > 2 \
                else rel[0]
            with open(f, errors="replace") as fp:
                for h in re.findall(r'#include "([^"]+\.h)"', fp.read()):
                    users[h].add(where)
    for h in sorted(glob.glob(os.path.join(src, "include/*.h"))):
        name = os.path.basename(h)
        who = users.get(name, set())
        inside = [w for w in who if w.startswith("plugin/")]
        if len(who) == 1 and len(inside) == 1:
            fail("faces", "include/%s is used only in %s: it belongs there"
                 % (name, inside[0]))


def rule_lines(src):
    for t in ("plugin", "daemon"):
        for f in sorted(glob.glob(os.path.join(src, t, "**/*.c"),
                                  recursive=True)):
            with open(f, errors="replace") as fp:
                n = sum(1 for _ in fp)
            if n > MAX_LINES:
                fail("lines", "%s has %d lines (at most %d)"
                     % (os.path.relpath(f, src), n, MAX_LINES))


def main():
    src = sys.argv[1]
    lower = [o for o in sys.argv[2].split(":") if o]
    upper = [o for o in sys.argv[3].split(":") if o]
    if not lower or not upper:
        print("layers.py: no objects given")
        return 1
    rule_down(lower, upper)
    rule_no_circle(lower + upper)
    rule_core_health(src)
    rule_names(lower + upper)
    rule_faces(src)
    rule_lines(src)
    if not failed:
        print("layers: %d lower and %d upper objects, every rule holds"
              % (len(lower), len(upper)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
