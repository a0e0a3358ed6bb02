#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
# json_schema.py SCHEMA_DIR COMMAND EXIT_STATUS FILE [--lines]: FILE (a
# command's --json output) matches daemon/json/COMMAND.json, and its ok
# says its exit status (0: true).  With --lines, FILE is JSON Lines: every
# line an object, the last the result, those before progress lines
# (progress.json).  Exit 0, or 1 saying why.
import json
import sys

import jsonschema

sdir, cmd, rc, path = sys.argv[1:5]
lines = "--lines" in sys.argv[5:]
rc = int(rc)


def schema(name):
    with open("%s/%s.json" % (sdir, name)) as f:
        return json.load(f)


def fail(why):
    print("%s %s: %s" % (cmd, path, why))
    sys.exit(1)


text = open(path).read()
if lines:
    docs = []
    for n, line in enumerate(text.splitlines(), 1):
        try:
            docs.append(json.loads(line))
        except ValueError as e:
            fail("line %d is not one JSON object: %s" % (n, e))
    if not docs:
        fail("no line")
    for d in docs[:-1]:
        try:
            jsonschema.validate(d, schema("progress"))
        except jsonschema.ValidationError as e:
            fail("progress line: %s" % e.message)
        if d["command"] != cmd:
            fail("progress line of %s" % d["command"])
    result = docs[-1]
else:
    try:
        result = json.loads(text)
    except ValueError as e:
        fail("not JSON: %s" % e)
try:
    jsonschema.validate(result, schema(cmd))
except jsonschema.ValidationError as e:
    fail("%s (at %s)" % (e.message, "/".join(str(p) for p in e.path)))
if not isinstance(result, dict):
    fail("not one JSON object")
ok = result["ok"]
if ok != (rc == 0):
    fail("ok is %s, exit status %d" % (ok, rc))
print("%s: matches %s.json, ok %s, exit %d" % (path, cmd, ok, rc))
