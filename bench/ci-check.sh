#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# CI check of the bench harness:
#  0. the published runs (bench/results/*/results.json, when there are any)
#     validate, and `stripe-bench --replot` redraws their charts;
#  0b. bench/test-noise-marking: a copy of a published run made mostly noisy
#     is refused (`--replot --strict` exits 3, validate-results --published
#     fails) and its noisy points are marked in the charts;
#  then `stripe-bench --quick`
#  1. with 2 repetitions, on remote members (nbdkit servers behind the rate and delay filters),
#     N = 1 and 2, profiles SEQ1M-Q8T1 and RND4K-Q1T1, reads only (about 50 s; no root
#     needed), whose charts `--replot` must redraw from results.json alone,
#     then
#  1b. --fsync --flush-us 1000 at N = 1 and 4 (emulated drives: files in RAM
#     behind nbdkit and bench's flushlat filter), then
#  2. on emulated local members with N = 1 and 2, a sequential and a
#     random profile (SEQ1M-Q8T1, RND4K-Q32T1: the other profiles run
#     the same code of the harness; all five took 113 s against 44 s,
#     measured one after the other), a scrub running through every plugin
#     run (--scrub-during),
# must complete, its results.json must validate against
# bench/results.schema.json, every run must carry its load sample and noise
# verdict, every noisy point must be marked in its chart, and the chart files
# must exist; then
#  3. `replace-impact --quick` (nbdstripe replace on emulated members) and
#  4. `reshape-impact --quick` (nbdstripe grow on emulated members) must
# complete with every part in their results.json.  It asserts no speed, and
# no quiet machine: the runs are not --strict (CI runs tests in parallel on 2
# cores, so most rows may well be noisy); it prints their noise verdict.
#
#   bench/ci-check.sh [PLUGIN.so]
#
# PLUGIN.so defaults to $NBDSTRIPE_PLUGIN, then build/plugin/; the nbdstripe
# command to $NBDSTRIPE, then PLUGIN.so's ../daemon/nbdstripe.  Exit 0 pass,
# 1 fail, 77 skip of the local part (not root, no cgroup block throttling, no
# loop devices) after the remote part passed.  Installs gnuplot-nox,
# python3-jsonschema and fio with apt-get when missing (as root).
# Takes about 3 minutes (196 s measured on an idle machine).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

plugin=${1:-${NBDSTRIPE_PLUGIN:-$repo/build/plugin/nbdkit-stripe-plugin.so}}
[ -f "$plugin" ] || fail "plugin not found: $plugin (pass it as the first argument)"

command -v nbdkit >/dev/null || fail "nbdkit missing"

# our own packages
need=()
command -v gnuplot >/dev/null || need+=(gnuplot-nox)
/usr/bin/python3 -c 'import jsonschema' 2>/dev/null || need+=(python3-jsonschema)
command -v fio >/dev/null || need+=(fio)
if [ ${#need[@]} -gt 0 ]; then
  [ "$(id -u)" -eq 0 ] || skip "missing ${need[*]} and not root to install them"
  echo "== installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null 2>&1; then
    apt-get update -qq >/dev/null 2>&1
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null ||
      fail "apt-get install ${need[*]} failed"
  fi
fi

out=$(mktemp -d /tmp/stripe-bench-ci.XXXXXX)
trap 'rm -rf "$out"' EXIT

# ---- 0. the published runs
/usr/bin/python3 "$here/validate-results"
rc=$?
case $rc in
  0)
    for j in "$here"/results/*/results.json; do
      "$here/stripe-bench" --replot "$j" --out "$out/replot-$(basename "$(dirname "$j")")" >/dev/null ||
        fail "--replot $j failed"
    done ;;
  77) ;;
  *) fail "a published results.json does not validate" ;;
esac

# ---- 0b. the noise verdict and marking, on a published run made noisy
if [ -s "$here/results/remote/results.json" ]; then
  /usr/bin/python3 "$here/test-noise-marking" "$here/results/remote/results.json"
  case $? in
    0|77) ;;
    *) fail "test-noise-marking" ;;
  esac
fi

# check_noise DIR: every run of DIR/results.json has its load sample and
# reasons, the verdict is there (validate-results checks that they agree),
# and every noisy point of a scaling chart is marked; prints the verdict.
check_noise() {
  /usr/bin/python3 - "$1" <<'PY'
import json, os, sys
d = json.load(open(os.path.join(sys.argv[1], "results.json")))
assert d["parameters"]["load_sample_s"] > 0, "no load sample"
for r in d["runs"]:
    assert r["load_before"] and r["load_before"]["sample_s"] > 0, "a run without its load sample"
    assert isinstance(r["noisy_why"], list), "a run without noisy_why"
nv = d["noise"]
for r in d["results"]:
    if r["phase"] != "main" or not r["noisy_runs"] or r["config"] != "plugin":
        continue
    chart = ("fsync-%s.gp" if r["profile"] == "FSYNC4K-Q1T4" else "scaling-%s.gp") % r["profile"]
    gp = open(os.path.join(sys.argv[1], "charts", chart)).read()
    assert "noisy point (hollow, boxed)" in gp, "%s: noisy rows, no marker in the chart" % chart
print("== noise: %d of %d rows noisy (threshold %.2f CPUs): %s" % (
    nv["noisy_rows"], nv["rows"], nv["threshold_cores"],
    "publishable" if nv["publishable"] else "NOT publishable, as expected on a busy CI machine"))
PY
}

# ---- 1. remote members
# Reads only: the write path over remote members is the test suite's
# (tests/remote); this checks the harness's remote mode, both phases.
echo "== bench/stripe-bench --quick --repeat 2 --remote --counts 1,2 --profiles SEQ1M-Q8T1,RND4K-Q1T1 --rw read (output in $out/remote)"
start=$(date +%s)
"$here/stripe-bench" --plugin "$plugin" --quick --repeat 2 --remote --counts 1,2 \
  --profiles SEQ1M-Q8T1,RND4K-Q1T1 --rw read --out "$out/remote" --noisy-retries 0 ||
  fail "stripe-bench --remote exited with $?"
echo "== remote run took $(( $(date +%s) - start )) s"
rres=$out/remote
[ -s "$rres/results.json" ] || fail "remote: results.json missing"
[ -s "$rres/results.csv" ] || fail "remote: results.csv missing"
[ -s "$rres/summary.md" ] || fail "remote: summary.md missing"
/usr/bin/python3 "$here/validate-results" "$rres/results.json" || fail "remote: results.json does not validate"
check_noise "$rres" || fail "remote: noise marking missing or wrong"
# 2 profiles x read x (nbd plugin, N=1, N=2) main rows, RND4K-Q1T1 x read x 3
# with rate and delay lifted; the member servers and their sockets are gone
/usr/bin/python3 - "$rres/results.json" <<'PY' || fail "remote: unexpected results.json content"
import json, os, re, subprocess, sys
d = json.load(open(sys.argv[1]))
rows = d["results"]
assert d["members"]["mode"] == "remote" and d["parameters"]["reference"] == "nbd", "not a remote run"
assert sum(r["phase"] == "main" for r in rows) == 6, "expected 6 main rows"
assert sum(r["phase"] == "unthrottled" for r in rows) == 3, "expected 3 rows with limits lifted"
assert {r["rw"] for r in rows} == {"read"}, "reads only"
assert len(d["runs"]) == 2 * len(rows), "expected 2 runs (repetitions) per result row"
assert all(r["mbps_min"] <= r["mbps"] <= r["mbps_max"] for r in rows), "median outside its range"
assert {r["config"] for r in rows} == {"nbd", "plugin"}, "configs"
for u in d["members"]["devices"]:
    m = re.search(r"socket=(\S+)", u)
    assert not (m and os.path.exists(m.group(1))), "member socket left behind: " + u
    left = subprocess.run(["pgrep", "-f", re.escape(m.group(1) if m else u)],
                          stdout=subprocess.PIPE).stdout.strip()
    assert not left, "member server left running: " + u
PY
for p in SEQ1M-Q8T1 RND4K-Q1T1; do
  [ -s "$rres/charts/scaling-$p.png" ] || fail "remote: chart missing: scaling-$p.png"
done
# the charts come back from results.json alone
rm -f "$rres"/charts/*
"$here/stripe-bench" --replot "$rres/results.json" >/dev/null || fail "remote: --replot failed"
/usr/bin/python3 "$here/validate-results" "$rres/results.json" >/dev/null ||
  fail "remote: --replot did not redraw every chart"

# ---- 1b. the fsync profile on emulated drives (--flush-us)
# Files in RAM, each served by nbdkit behind the flushlat filter built
# beside the plugin; no root needed.
echo "== bench/stripe-bench --quick --fsync --flush-us 1000 --counts 1,4 (output in $out/drives)"
"$here/stripe-bench" --plugin "$plugin" --quick --fsync --flush-us 1000 --counts 1,4 \
  --workdir "/dev/shm/stripe-bench-ci.$$" --out "$out/drives" --noisy-retries 0 || fail "stripe-bench --fsync --flush-us exited with $?"
/usr/bin/python3 "$here/validate-results" "$out/drives/results.json" ||
  fail "drives: results.json does not validate"
check_noise "$out/drives" || fail "drives: noise marking missing or wrong"
/usr/bin/python3 - "$out/drives/results.json" <<'PY' || fail "drives: unexpected results.json content"
import json, os, re, subprocess, sys
d = json.load(open(sys.argv[1]))
rows = d["results"]
assert d["members"]["mode"] == "drives" and d["parameters"]["flush_us"] == 1000, "not a drives run"
assert sorted((r["config"], r["n"]) for r in rows) == [("file", 1), ("plugin", 1), ("plugin", 4)], \
    "expected the file plugin and the stripe plugin at N = 1 and 4"
assert all(r["iops"] > 0 and r["profile"] == "FSYNC4K-Q1T4" for r in rows), "a row without writes"
assert [t["n"] for t in d["targets"]] == [1, 4], "targets at N = 1 and 4"
for u in d["members"]["devices"]:
    m = re.search(r"socket=(\S+)", u)
    assert m, "a drive is not an NBD export over a Unix socket: " + u
    assert not os.path.exists(m.group(1)), "drive socket left behind: " + u
    left = subprocess.run(["pgrep", "-f", re.escape(m.group(1))], stdout=subprocess.PIPE).stdout.strip()
    assert not left, "drive server left running: " + u
PY
[ -s "$out/drives/charts/fsync-FSYNC4K-Q1T4.png" ] || fail "drives: chart missing"
[ ! -e "/dev/shm/stripe-bench-ci.$$" ] || fail "drives: member files left in /dev/shm/stripe-bench-ci.$$"

# ---- 2. emulated local members
[ "$(id -u)" -eq 0 ] || skip "local part: not root: emulated members need loop devices and cgroup throttling (remote part passed)"
if [ ! -e /sys/fs/cgroup/blkio/blkio.throttle.read_bps_device ] &&
   ! grep -qw io /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
  skip "local part: no cgroup v1 blkio or v2 io controller: block throttling is unavailable (remote part passed)"
fi
[ -e /dev/loop-control ] || skip "local part: no loop devices (/dev/loop-control missing) (remote part passed)"
command -v losetup >/dev/null || skip "local part: losetup missing (remote part passed)"
echo "== bench/stripe-bench --quick --counts 1,2 --profiles SEQ1M-Q8T1,RND4K-Q32T1 --scrub-during (output in $out)"
start=$(date +%s)
"$here/stripe-bench" --plugin "$plugin" --quick --counts 1,2 --out "$out/res" \
  --profiles SEQ1M-Q8T1,RND4K-Q32T1 \
  --workdir "$out/members" --noisy-retries 0 --scrub-during || fail "stripe-bench exited with $?"
echo "== harness took $(( $(date +%s) - start )) s"

res=$out/res
[ -s "$res/results.json" ] || fail "results.json missing"
[ -s "$res/results.csv" ] || fail "results.csv missing"
[ -s "$res/summary.md" ] || fail "summary.md missing"
/usr/bin/python3 "$here/validate-results" "$res/results.json" || fail "results.json does not validate"
check_noise "$res" || fail "noise marking missing or wrong"

# every row is there (file plugin, N=1 and N=2), nothing more is asserted
rows=$(/usr/bin/python3 -c '
import json,sys
d=json.load(open(sys.argv[1]))
print(sum(1 for r in d["results"] if r["phase"]=="main"))' "$res/results.json")
[ "$rows" -eq 12 ] || fail "expected 12 main rows (2 profiles x 2 rw x 3 configs), got $rows"
# --scrub-during: a scrub read something in every plugin run (validate-results
# checks that every plugin run and none other has one); the drive poller at
# the plugin's default period
/usr/bin/python3 - "$res/results.json" <<'PY' || fail "--scrub-during: unexpected results.json content"
import json, sys
d = json.load(open(sys.argv[1]))
p = d["parameters"]
assert p["scrub_during"] and p["scrub_rate"] == 256 << 20, "parameters"
assert p["drive_interval_s"] == 600, "drive poller period %r" % p["drive_interval_s"]
sc = [r["scrub"] for r in d["runs"] if r["config"] == "plugin"] + [s["scrub"] for s in d["sustained"]]
assert sc and all(x["scrubs_started"] >= 1 and x["bytes_read"] > 0 for x in sc), "a run without scrub reads"
PY

for p in SEQ1M-Q8T1 RND4K-Q32T1; do
  f=$res/charts/scaling-$p.png
  [ -s "$f" ] || fail "chart missing: $f"
done
for n in 1 2; do
  [ -s "$res/charts/sustained-n$n.png" ] || fail "chart missing: sustained-n$n.png"
done

# it must have cleaned up after itself
if losetup -l -n -O BACK-FILE 2>/dev/null | grep -q "$out/members"; then
  fail "loop devices left behind"
fi
ls -d /sys/fs/cgroup/blkio/nbdstripe-bench-* /sys/fs/cgroup/nbdstripe-bench-* 2>/dev/null |
  grep -q . && echo "note: a nbdstripe-bench cgroup exists (another run in progress?)"

# ---- 3. nbdstripe replace while served (bench/replace-impact --quick, about 40 s)
nbdstripe=${NBDSTRIPE:-$(dirname "$plugin")/../daemon/nbdstripe}
[ -x "$nbdstripe" ] || fail "nbdstripe not found: $nbdstripe (set NBDSTRIPE)"
"$here/replace-impact" --help >/dev/null || fail "replace-impact --help failed"
echo "== bench/replace-impact --quick (output in $out/replace)"
start=$(date +%s)
"$here/replace-impact" --plugin "$plugin" --nbdstripe "$nbdstripe" --quick --out "$out/replace" \
  --workdir "$out/replace-members" --noisy-retries 0 || fail "replace-impact exited with $?"
echo "== replace-impact took $(( $(date +%s) - start )) s"
[ -s "$out/replace/summary.md" ] || fail "replace-impact: summary.md missing"
# every part is there (no speed is asserted): device rates, the dd reference,
# both copies completed over the whole member, 2 runs without and 2 with a replace
/usr/bin/python3 - "$out/replace/results.json" <<'PY' || fail "replace-impact: unexpected results.json content"
import json, sys
d = json.load(open(sys.argv[1]))
size = d["parameters"]["member_size"]
assert len(d["device_rates"]) == 4 and all(r["mbps"] > 0 for r in d["device_rates"]), "device rates"
assert d["serial_copy_reference"]["mbps"] > 0, "dd reference"
for k in ("copy_idle", "copy_rate_limited"):
    c = d[k]
    assert c["bytes_total"] == size and c["elapsed_s"] > 0 and c["mbps"] > 0, k
    assert c["config_updated"] is True, k + ": config not rewritten"
assert d["copy_rate_limited"]["rate_limit_bytes_per_s"] > 0, "rate"
assert d["copy_idle"]["new"] == d["copy_rate_limited"]["old"], "the copies go there and back"
runs = d["impact"]["runs"]
for case in ("without_replace", "with_replace"):
    rs = [r for r in runs if r["case"] == case]
    assert len(rs) == 2 and all(r["iops"] > 0 and r["lat_p99_us"] > 0 for r in rs), case
assert all(r["replace_end_state"] in ("cancelled", "done") for r in runs if r["case"] == "with_replace")
assert [t["met"] in (True, False) for t in d["targets"]] == [True, True], "targets"
PY
if losetup -l -n -O BACK-FILE 2>/dev/null | grep -q "$out/replace-members"; then
  fail "replace-impact: loop devices left behind"
fi

# ---- 4. nbdstripe grow while served (bench/reshape-impact --quick, about 40 s)
"$here/reshape-impact" --help >/dev/null || fail "reshape-impact --help failed"
echo "== bench/reshape-impact --quick (output in $out/reshape)"
start=$(date +%s)
"$here/reshape-impact" --plugin "$plugin" --nbdstripe "$nbdstripe" --quick --out "$out/reshape" \
  --workdir "$out/reshape-members" --noisy-retries 0 || fail "reshape-impact exited with $?"
echo "== reshape-impact took $(( $(date +%s) - start )) s"
[ -s "$out/reshape/summary.md" ] || fail "reshape-impact: summary.md missing"
# every part is there (no speed is asserted): both grows completed over the
# whole volume with its read beside them, the new size seen by a new client,
# 2 runs without and 2 with a grow
/usr/bin/python3 - "$out/reshape/results.json" <<'PY' || fail "reshape-impact: unexpected results.json content"
import json, sys
d = json.load(open(sys.argv[1]))
assert [(g["from"], g["to"]) for g in d["grows"]] == [(2, 3), (4, 5)], "grows"
for g in d["grows"]:
    for r in g["runs"]:
        assert r["bytes_total"] == r["size_from"] == r["read"]["bytes"] > 0, "grow %d: bytes" % r["from"]
        assert r["size_to"] * r["from"] == r["size_from"] * r["to"], "grow %d: size" % r["from"]
        assert r["size_seen_after"] == r["size_to"], "grow %d: the new size not seen" % r["from"]
        assert r["grow_s"] > 0 and r["read"]["seconds"] > 0 and r["ratio"] > 0, "grow %d" % r["from"]
        assert r["data_moved_s"] is not None and r["progress"], "grow %d: progress" % r["from"]
runs = d["impact"]["runs"]
for case in ("without_grow", "with_grow"):
    rs = [r for r in runs if r["case"] == case]
    assert len(rs) == 2 and all(r["iops"] > 0 and r["lat_p99_us"] > 0 for r in rs), case
assert all(r["grow_end_state"] in ("paused", "done") for r in runs if r["case"] == "with_grow"), "end"
assert [t["met"] in (True, False) for t in d["targets"]] == [True, True], "targets"
PY
if losetup -l -n -O BACK-FILE 2>/dev/null | grep -q "$out/reshape-members"; then
  fail "reshape-impact: loop devices left behind"
fi
echo "PASS"
