# SPDX-License-Identifier: BSD-3-Clause
"""Results: medians and spread over the repetitions, scaling and the
comparison with the reference, and the output files (results.json,
results.csv, summary.md).  Charts are in charts.py."""

import csv
import json
import os
import statistics

from . import charts
from .fio import NOISY_BEFORE, NOISY_DURING
from .profiles import ALL_PROFILE_NAMES, PROFILE_NAMES
from .util import fmt_size, log


def aggregate(runs, chunk, ref, scaling_refused, ref_every_n=False):
    """Medians of the runs of each (phase, config, N, chunk, profile, rw),
    with the minimum and maximum over the repetitions; returns (results,
    index by that key).  vs_file_plugin: N = 1 against the reference, or
    every N when ref_every_n (RAM members: the reference is the ceiling of
    the request path, whatever N)."""
    groups = {}
    for r in runs:
        k = (r["phase"], r["config"], r["n"], r["chunk"], r["profile"], r["rw"])
        groups.setdefault(k, []).append(r)
    res = []
    for k, rs in groups.items():
        def med(f):
            v = [x[f] for x in rs if x[f] is not None]
            return statistics.median(v) if v else None
        r = {"phase": k[0], "config": k[1], "n": k[2], "chunk": k[3], "profile": k[4],
             "rw": k[5], "repeats": len(rs)}
        for f in ("mbps", "iops", "lat_mean_us", "lat_p99_us", "cpu_s_per_gib",
                  "other_user_cores", "other_cpu_cores"):
            r[f] = med(f)
        for f in ("mbps", "iops"):
            r[f + "_min"] = min(x[f] for x in rs)
            r[f + "_max"] = max(x[f] for x in rs)
        r["noisy_runs"] = sum(1 for x in rs if x["noisy"])
        lb = [x["load_before"]["other_user_cores"] for x in rs if x.get("load_before")]
        r["load_before_cores"] = statistics.median(lb) if lb else None
        r["noisy_why"] = sorted({w for x in rs for w in x.get("noisy_why", [])})
        res.append(r)
    idx = {(r["phase"], r["config"], r["n"], r["chunk"], r["profile"], r["rw"]): r for r in res}
    for r in res:
        r["scaling"] = r["efficiency"] = r["vs_file_plugin"] = None
        if r["config"] != "plugin":
            continue
        ph = "unthrottled" if r["phase"] == "unthrottled" else "main"
        one = idx.get((ph, "plugin", 1, chunk, r["profile"], r["rw"]))
        if one and one["mbps"] and scaling_refused is None:
            r["scaling"] = r["mbps"] / one["mbps"]
            r["efficiency"] = r["scaling"] / r["n"]
        if r["n"] == 1 or ref_every_n:
            f = idx.get((ph, ref, 1, None, r["profile"], r["rw"]))
            if f and f["mbps"]:
                r["vs_file_plugin"] = r["mbps"] / f["mbps"]
    order = {p: i for i, p in enumerate(ALL_PROFILE_NAMES)}
    res.sort(key=lambda r: (r["phase"], order[r["profile"]], r["rw"],
                            r["config"] == "plugin", r["n"], r["chunk"] or 0))
    return res, idx


# A run is published (bench/full-run copies it into bench/results/, RESULTS.md
# quotes it) only when at most this share of its result rows is noisy.
NOISY_SHARE_MAX = 0.5


def noise_verdict(results, threshold):
    """Whether a run's results may be published, from its rows alone (so
    that --replot judges old runs too): {"threshold_cores", "rows",
    "noisy_rows", "publishable", "why"}; why is null when publishable."""
    rows = len(results)
    noisy = [r for r in results if r["noisy_runs"]]
    ok = len(noisy) <= NOISY_SHARE_MAX * rows
    why = None
    if not ok:
        before = sum(1 for r in noisy if any(NOISY_BEFORE in w for w in r.get("noisy_why", [])))
        during = sum(1 for r in noisy if any(NOISY_DURING in w for w in r.get("noisy_why", [])))
        why = ("%d of %d result rows are noisy (more than %d%%): other processes used more than "
               "%.2f CPUs during %d of them and just before %d: the figures measure the "
               "machine's load as much as the plugin" % (
                   len(noisy), rows, NOISY_SHARE_MAX * 100, threshold, during, before))
    return {"threshold_cores": threshold, "rows": rows, "noisy_rows": len(noisy),
            "publishable": ok, "why": why}


EXIT_NOT_PUBLISHABLE = 3


def report_noise(doc, strict):
    """The end of a run or a --replot: the noisy rows on stdout, and when
    most rows are noisy a verdict on stderr that cannot be missed.  Returns
    the exit status: EXIT_NOT_PUBLISHABLE then with STRICT, else 0."""
    res = doc["results"]
    nv = noise_verdict(res, doc["parameters"]["noise_threshold_cores"])
    noisy = [r for r in res if r["noisy_runs"]]
    if noisy:
        print("   %d of %d result rows are noisy (other processes > %.2f CPUs), e.g.:" % (
            len(noisy), len(res), nv["threshold_cores"]))
        for r in sorted(noisy, key=lambda r: -max(r["other_user_cores"] or 0,
                                                  r.get("load_before_cores") or 0))[:5]:
            print("     %s %s N=%d %s %s: %s" % (
                r["phase"], r["config"], r["n"], r["profile"], r["rw"],
                "; ".join(r.get("noisy_why") or
                          ["other processes %.2f CPUs" % (r["other_user_cores"] or 0)])))
    if nv["publishable"]:
        return 0
    bar = "*" * 72
    log("%s\nNOT PUBLISHABLE: %s.\nDo not quote these figures; run again on a quiet machine "
        "(--noise-threshold sets what noisy means).\n%s" % (bar, nv["why"], bar))
    return EXIT_NOT_PUBLISHABLE if strict else 0


def write_json(doc, out):
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


CSV_COLUMNS = ["phase", "config", "n", "chunk", "profile", "rw", "repeats", "mbps", "iops",
               "lat_mean_us", "lat_p99_us", "cpu_s_per_gib", "scaling", "efficiency",
               "vs_file_plugin", "other_user_cores", "other_cpu_cores", "load_before_cores", "noisy_runs",
               "mbps_min", "mbps_max", "iops_min", "iops_max"]


def write_csv(doc, out):
    with open(os.path.join(out, "results.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(CSV_COLUMNS)
        for r in doc["results"]:
            w.writerow(["" if r.get(c) is None else (round(r[c], 4) if isinstance(r[c], float) else r[c])
                        for c in CSV_COLUMNS])


def write_outputs(doc, out):
    """results.json, results.csv, summary.md and the charts (which fill
    doc["charts"]; results.json is written again with them)."""
    write_json(doc, out)
    write_csv(doc, out)
    write_summary(doc, out)
    doc["charts"] = charts.make_charts(doc, out)
    write_json(doc, out)


def write_summary(doc, out):
    L = []
    L.append("Command: `%s`  " % doc["command"])
    L.append("Date: %s; host: %s, %s, %d CPUs; load before: %s  " % (
        doc["date"], doc["machine"]["hostname"], doc["machine"]["kernel"],
        doc["machine"]["cpus"], doc["machine"]["loadavg_before"]))
    e = doc["members"]
    if e["mode"] in ("files", "drives", "ram"):
        L.append("Members: %s; %d jobs  " % (e["method"], doc["parameters"].get("jobs", 1)))
    elif e["mode"] == "remote":
        L.append("Members: %d remote (%s), %s MB/s each way and %d ms per request per member, %s each; "
                 "reference: nbdkit's nbd plugin on member 0  " % (
                     e["count"], e["method"], e["mbps"], e["remote"]["delay_ms"], fmt_size(e["size"])))
    else:
        L.append("Members: %s  " % (
            "%d emulated (%s), %s MB/s and %s IOPS each way per member, %s each" % (
                e["count"], e["method"], e["mbps"], e["iops"], fmt_size(e["size"]))
            if e["mode"] == "emulated" else "real: " + ", ".join(e["devices"])))
    if e["calibration"]:
        L.append("Calibration (member 0): %s%s  " % ("; ".join(
            "%s bs=%s Q%d %.1f %s (%.3fx of %s)%s" % (
                c["rw"], fmt_size(c["bs"]), c["iodepth"], c["measured"],
                {"mbps": "MB/s", "iops": "IOPS", "lat_us": "us"}[c["metric"]], c["ratio"],
                c["target"], "" if c.get("enforced", True) else ", not enforced")
            for c in e["calibration"]["checks"]), "" if e["calibration"]["ok"] else " -- FAILED"))
    par = doc["parameters"]
    if par.get("scrub_during"):
        sc = [r["scrub"] for r in doc["runs"] if r.get("scrub")]
        L.append("Scrub during every plugin run: %s/s (nbdstripe scrub's default), %s read in %d "
                 "scrubs over %d runs; drive poller every %s s  " % (
                     fmt_size(par["scrub_rate"]), fmt_size(sum(x["bytes_read"] for x in sc)),
                     sum(x["scrubs_started"] for x in sc), len(sc),
                     par.get("drive_interval_s") if par.get("drive_interval_s") is not None else "?"))
    unl = "rate and delay lifted" if e["mode"] == "remote" else "unthrottled"
    nv = noise_verdict(doc["results"], doc["parameters"]["noise_threshold_cores"])
    L.append("Load: %d of %d result rows noisy (other processes > %.2f CPUs during the run or "
             "in the idle sample before it)  " % (nv["noisy_rows"], nv["rows"], nv["threshold_cores"]))
    if not nv["publishable"]:
        L.insert(0, "**NOT PUBLISHABLE: %s.**\n" % nv["why"])
    if doc["scaling_refused"]:
        L.append("\n**Scaling not reported: %s**\n" % doc["scaling_refused"])
    L.append("")
    # with repetitions: the range of MB/s over them, after the median
    rng = doc["parameters"]["repeat"] > 1
    L.append("| profile | rw | config | N | MB/s |%s IOPS | mean us | p99 us | CPU s/GiB | scaling | eff. | vs %s | other CPU before | other CPU |"
             % (" MB/s min-max |" if rng else "", doc["parameters"]["reference"]))
    L.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|" + ("---|" if rng else ""))
    f2 = lambda v, p=2: "-" if v is None else ("%.*f" % (p, v))
    for r in doc["results"]:
        if r["phase"] not in ("main", "unthrottled"):
            continue
        L.append("| %s%s | %s | %s | %d | %.1f |%s %.0f | %.0f | %.0f | %s | %s | %s | %s | %s | %s%s |" % (
            r["profile"], (" (%s)" % unl) if r["phase"] == "unthrottled" else "", r["rw"],
            "stripe" if r["config"] == "plugin" else r["config"],
            r["n"], r["mbps"], (" %.1f-%.1f |" % (r["mbps_min"], r["mbps_max"])) if rng else "",
            r["iops"], r["lat_mean_us"], r["lat_p99_us"],
            f2(r["cpu_s_per_gib"]), f2(r["scaling"]), f2(r["efficiency"]),
            f2(r["vs_file_plugin"], 3), f2(r.get("load_before_cores")), f2(r["other_user_cores"]),
            " (noisy)" if r["noisy_runs"] else ""))
    sweep = [r for r in doc["results"] if r["phase"] == "chunks"]
    if sweep:
        chunks = sorted({r["chunk"] for r in sweep})
        L.append("\nChunk sweep at N=%d (MB/s):\n" % sweep[0]["n"])
        L.append("| profile | rw | " + " | ".join(fmt_size(c) for c in chunks) + " |")
        L.append("|---|---|" + "---|" * len(chunks))
        for p in PROFILE_NAMES:
            for rw in ("read", "write"):
                row = {r["chunk"]: r for r in sweep if r["profile"] == p and r["rw"] == rw}
                if row:
                    L.append("| %s | %s | " % (p, rw) + " | ".join(
                        "%.1f" % row[c]["mbps"] if c in row else "-" for c in chunks) + " |")
    if doc["sustained"]:
        L.append("\nSustained write:\n")
        for s in doc["sustained"]:
            L.append("- N=%d: %s in %.1f s, mean %.1f MB/s" % (
                s["n"], fmt_size(s["bytes"]), s["elapsed_s"], s["mean_mbps"]))
    if doc["targets"]:
        L.append("\nTargets:\n")
        L.append("| target | phase | profile | rw | N | metric | threshold | measured | met |")
        L.append("|---|---|---|---|---|---|---|---|---|")
        for t in doc["targets"]:
            L.append("| %s | %s | %s | %s | %d | %s | %.2f | %s | %s |" % (
                t["target"], t["phase"], t["profile"], t["rw"], t["n"], t["metric"], t["threshold"],
                f2(t["measured"], 3), {True: "yes", False: "**NO**", None: "n/a"}[t["met"]]))
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write("\n".join(L) + "\n")

