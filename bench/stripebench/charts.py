# SPDX-License-Identifier: BSD-3-Clause
"""Charts (gnuplot, PNG), made from a results document alone, so that
`stripe-bench --replot RESULTS.json` can redraw them without running
anything.  Every chart's title says what the members were (emulated, remote
or real, and their limits) and how many runs each point is; error bars are
the minimum and maximum over the repetitions, the point their median.  A
noisy point (other processes above the threshold during a run of it or just
before) is drawn hollow in a black box, with a legend entry saying so."""

import os
import shutil

from .profiles import FSYNC_JOBS, FSYNC_PROFILE, PROFILE_NAMES, parallel_members, small_block
from .util import fmt_size, log, run

# colour-blind safe (Okabe-Ito); one colour and one marker per member
MEMBER_COLORS = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00",
                 "#999933", "#000000"]
MEMBER_POINTS = [7, 5, 9, 11, 13, 15, 4, 6]
MEASURED = "#0072B2"
IDEAL = "#b8b8b8"
REFERENCE = "#D55E00"
RW_COLORS = {"read": "#0072B2", "write": "#D55E00"}
NOISY = "#000000"


def noisy_label(doc):
    return "noisy point (hollow, boxed): other processes > %.2f CPUs" % (
        doc["parameters"]["noise_threshold_cores"])


def noisy_plots(datf, index, col, color, title, ps=1.3):
    """A noisy point drawn hollow (a white disc under an open circle in the
    series' colour) with a black box around it; the box is the legend
    entry (TITLE, or none).  Column COL holds the value at noisy points
    and NaN elsewhere."""
    src = "%s index %d using 1:%d" % (q(datf), index, col)
    return ["%s with points pt 7 ps %.1f lc rgb 'white' notitle" % (src, ps),
            "%s with points pt 6 ps %.1f lw 2 lc rgb '%s' notitle" % (src, ps, color),
            "%s with points pt 4 ps %.1f lw 2 lc rgb '%s' %s" % (
                src, ps + 1.6, NOISY, ("title %s" % q(title)) if title else "notitle")]


def q(s):
    """A gnuplot double-quoted string (\\n is a line break in titles)."""
    return '"%s"' % s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def members_label(doc):
    """What the members were, with their limits: the line every title carries."""
    m = doc["members"]
    if m["mode"] == "emulated":
        if m["throttle"] is None:
            return "emulated members, NOT throttled (scaling not meaningful)"
        return "emulated members: %d MB/s, %d IOPS per member (each way)" % (m["mbps"], m["iops"])
    if m["mode"] == "files":
        return "members: files on this machine's disk, the volume %s at every N, not throttled" % (
            fmt_size(doc["parameters"]["volume_size"]))
    if m["mode"] == "drives":
        return "members: emulated drives, a %d us cache flush each, the volume %s at every N" % (
            doc["parameters"]["flush_us"], fmt_size(doc["parameters"]["volume_size"]))
    if m["mode"] == "ram":
        return "members: files in RAM (tmpfs), the volume %s at every N" % (
            fmt_size(doc["parameters"]["volume_size"]))
    if m["mode"] == "remote":
        r = m["remote"]
        return "emulated remote members (NBD servers): %d MB/s%s per member" % (
            m["mbps"], (", %d ms per request" % r["delay_ms"]) if r["delay_ms"] else "")
    return "real drives (%s), not throttled" % ", ".join(os.path.basename(d) for d in m["devices"])


def runs_label(doc):
    rep = doc["parameters"]["repeat"]
    q_ = ", quick run" if doc["parameters"]["quick"] else ""
    if rep > 1:
        return "median of %d runs, bars: min-max%s" % (rep, q_)
    return "1 run per point, no error bars%s" % q_


def ref_label(doc):
    return {"file": "nbdkit file plugin", "nbd": "nbdkit nbd plugin"}[doc["parameters"]["reference"]]


def unit(profile):
    """(field, axis label) a profile is shown in."""
    return ("iops", "IOPS") if small_block(profile) else ("mbps", "MB/s")


def gnuplot(png, script):
    """Run a gnuplot script that draws to png (pngcairo, else the gd png terminal).
    The script is kept next to the PNG."""
    head = "set terminal pngcairo size %s noenhanced font ',10'\nset output %s\n"
    spath = png[:-4] + ".gp"
    for term in ("pngcairo", "png"):
        size = "1200,560"
        text = (head % (size, q(png))) + script
        if term == "png":
            text = text.replace("pngcairo size %s noenhanced font ',10'" % size,
                                "png size %s noenhanced" % size)
        with open(spath, "w") as f:
            f.write(text)
        r = run(["gnuplot", spath], check=(term == "png"))
        if r.returncode == 0 and os.path.exists(png):
            return


def bin_curve(points, width):
    """points: [t_end, rate] per interval (previous t_end, t_end] (the first
    from 0).  Returns [[bin centre, mean rate over the bin]], the rate
    averaged over each `width` seconds (no sampling sawtooth)."""
    acc = {}
    prev = 0.0
    for t, v in points:
        t0, t1 = prev, t
        prev = t
        if t1 <= t0:
            continue
        k = int(t0 // width)
        while k * width < t1:
            lo, hi = max(t0, k * width), min(t1, (k + 1) * width)
            if hi > lo:
                a = acc.setdefault(k, [0.0, 0.0])
                a[0] += v * (hi - lo)
                a[1] += hi - lo
            k += 1
    return [[(k + 0.5) * width, a[0] / a[1]] for k, a in sorted(acc.items())
            if a[1] > 0.2 * width]


def scaling_chart(doc, cdir, profile, rows):
    """Throughput vs N, read and write side by side: the measured median
    with its range, the ideal N x (N = 1) drawn first (dashed, wide, grey:
    visible even where the measured line lies on it) and the reference's
    point at N = 1.  The ideal stops at the members the profile can keep
    busy at once, and is not drawn where that is one (RND4K-Q1T1): no
    scaling is expected there.  RAM members: no ideal (nothing to scale),
    the reference at every N.  Noisy points are hollow and boxed."""
    field, ylabel = unit(profile)
    datf = os.path.join(cdir, "scaling-%s.dat" % profile)
    ref = doc["parameters"]["reference"]
    ram = doc["members"]["mode"] == "ram"
    pm = parallel_members(profile, doc["parameters"]["chunk"])
    ideal = not ram and pm > 1
    panels = []
    with open(datf, "w") as f:
        block = 0
        for rw in ("read", "write"):
            pr = sorted([r for r in rows if r["rw"] == rw and r["config"] == "plugin"],
                        key=lambda r: r["n"])
            if not pr:
                continue
            one = next((r[field] for r in pr if r["n"] == 1), None)
            fp = next((r for r in rows if r["rw"] == rw and r["config"] == ref), None)
            f.write("# %s: N median min max ideal reference reference_min reference_max "
                    "noisy_median noisy_reference\n" % rw)
            noisy = False
            for r in pr:
                isref = fp is not None and (r["n"] == 1 or ram)
                nref = isref and fp["noisy_runs"] > 0
                noisy = noisy or r["noisy_runs"] > 0 or nref
                f.write("%d %.3f %.3f %.3f %s %s %s %s %s %s\n" % (
                    r["n"], r[field], r.get(field + "_min", r[field]), r.get(field + "_max", r[field]),
                    "%.3f" % (one * min(r["n"], pm)) if one and ideal else "NaN",
                    "%.3f" % fp[field] if isref else "NaN",
                    "%.3f" % fp.get(field + "_min", fp[field]) if isref else "NaN",
                    "%.3f" % fp.get(field + "_max", fp[field]) if isref else "NaN",
                    "%.3f" % r[field] if r["noisy_runs"] else "NaN",
                    "%.3f" % fp[field] if nref else "NaN"))
            f.write("\n\n")
            panels.append((rw, block, noisy))
            block += 1
    ns = sorted({r["n"] for r in rows})
    s = ["set multiplot layout 1,%d title %s" % (len(panels), q(
        "%s through the stripe plugin vs number of members (chunk %s)\n%s; %s%s" % (
            profile, fmt_size(doc["parameters"]["chunk"]), members_label(doc), runs_label(doc),
            "" if ideal or ram else "\nno ideal line: one request at a time touches one member, "
            "striping is not expected to scale it")))]
    s.append("set grid\nset key right bottom box opaque\nset xlabel 'members (N)'\nset ylabel %s" % q(ylabel))
    s.append("set xtics (%s)\nset xrange [0.5:%g]\nset yrange [0:*]\nset offsets 0,0,graph 0.08,0"
             % (",".join(str(n) for n in ns), max(ns) + 0.5))
    for rw, b, noisy in panels:
        s.append("set title %s" % q(rw))
        s.append("plot " + ", \\\n  ".join(([] if not ideal else [
            "%s index %d using 1:5 with lines dt (5,3) lw 9 lc rgb '%s' title %s"
            % (q(datf), b, IDEAL, q("ideal: N x (N=1)" if pm >= max(ns) else
                                    "ideal: min(N, %d) x (N=1)" % pm))]) + [
            "%s index %d using 1:2:3:4 with yerrorlines lw 2 pt 7 ps 1.3 lc rgb '%s' title 'stripe plugin, measured'"
            % (q(datf), b, MEASURED),
            "%s index %d using 1:6:7:8 with yerrorbars pt 6 ps 2.5 lw 2 lc rgb '%s' title %s"
            % (q(datf), b, REFERENCE, q("%s, %s" % (ref_label(doc), "one file in RAM (every N)" if ram
                                                   else "same member (N=1)")))] + (
            noisy_plots(datf, b, 9, MEASURED, noisy_label(doc)) +
            noisy_plots(datf, b, 10, REFERENCE, None, ps=2.5) if noisy else [])))
    s.append("unset multiplot")
    png = os.path.join(cdir, "scaling-%s.png" % profile)
    gnuplot(png, "\n".join(s) + "\n")
    return png


def fsync_chart(doc, cdir, rows):
    """The fsync profile: write+flush pairs per second vs N (log scale),
    the stripe plugin's median with its range, nbdkit's file plugin on one
    file (a level: it has no N) and the targets: 0.97 x the file plugin
    for N = 1, 0.95 x N = 1 for the others.  Flat is the goal."""
    prof = FSYNC_PROFILE[0]
    datf = os.path.join(cdir, "fsync-%s.dat" % prof)
    pr = sorted([r for r in rows if r["config"] == "plugin"], key=lambda r: r["n"])
    fp = next((r for r in rows if r["config"] == "file"), None)
    one = next((r["iops"] for r in pr if r["n"] == 1), None)
    with open(datf, "w") as f:
        f.write("# N median min max noisy_median (IOPS: writes, each followed by a flush)\n")
        for r in pr:
            f.write("%d %.3f %.3f %.3f %s\n" % (r["n"], r["iops"], r["iops_min"], r["iops_max"],
                                                 "%.3f" % r["iops"] if r["noisy_runs"] else "NaN"))
    ns = [r["n"] for r in pr]
    s = ["set title %s" % q(
        "%s: %d jobs, each 4K random write + flush at QD1, through the stripe plugin vs N (chunk %s)\n%s; %s"
        % (prof, doc["parameters"].get("jobs", FSYNC_JOBS), fmt_size(doc["parameters"]["chunk"]),
           members_label(doc), runs_label(doc)))]
    s.append("set grid\nset key outside right top box\nset xlabel 'members (N)'\n"
             "set ylabel 'writes (+ flush) per second'\nset logscale x 2\nset yrange [0:*]\n"
             "set offsets 0,0,graph 0.1,0")
    s.append("set xtics (%s)\nset xrange [%g:%g]" % (",".join(str(n) for n in ns),
                                                     min(ns) / 1.5, max(ns) * 1.5))
    plots = []
    if fp:
        s.append("set object 1 rect from graph 0, first %.3f to graph 1, first %.3f fc rgb '%s' "
                 "fs transparent solid 0.15 noborder behind" % (fp["iops_min"], fp["iops_max"], REFERENCE))
        plots.append("%.3f with lines dt (8,4) lw 3 lc rgb '%s' title %s" % (
            fp["iops"], REFERENCE, q("nbdkit file plugin, one %s (band: min-max)"
                                     % ("drive" if doc["members"]["mode"] == "drives" else "file"))))
        plots.append("%.3f with lines dt 3 lw 2 lc rgb '%s' title %s" % (
            0.97 * fp["iops"], REFERENCE, q("target N=1: 0.97 x file plugin")))
    if one:
        plots.append("%.3f with lines dt 3 lw 2 lc rgb '%s' title %s" % (
            0.95 * one, MEASURED, q("target N>1: 0.95 x stripe N=1")))
    plots.append("%s using 1:2:3:4 with yerrorlines lw 2 pt 7 ps 1.3 lc rgb '%s' title 'stripe plugin, measured'"
                 % (q(datf), MEASURED))
    if any(r["noisy_runs"] for r in pr):
        plots += noisy_plots(datf, 0, 5, MEASURED, noisy_label(doc))
    if fp and fp["noisy_runs"]:
        s.append("set label 2 %s at graph 0.02, first %.3f offset 0,0.7 tc rgb '%s'" % (
            q("file plugin: noisy"), fp["iops"], NOISY))
    s.append("plot " + ", \\\n  ".join(plots))
    png = os.path.join(cdir, "fsync-%s.png" % prof)
    gnuplot(png, "\n".join(s) + "\n")
    return png


def chunks_chart(doc, cdir, sweep):
    """One panel per profile, absolute units (MB/s, or IOPS for 4K),
    read and write vs chunk size, the default chunk marked."""
    datf = os.path.join(cdir, "chunks.dat")
    chunks = sorted({r["chunk"] for r in sweep})
    default = doc["parameters"]["chunk"]
    panels = []
    with open(datf, "w") as f:
        b = 0
        for p in PROFILE_NAMES:
            field, ylabel = unit(p)
            lines = []
            for rw in ("read", "write"):
                rr = {r["chunk"]: r for r in sweep if r["profile"] == p and r["rw"] == rw}
                if not rr:
                    continue
                f.write("# %s %s: chunk(KiB) median min max noisy_median (%s)\n" % (p, rw, ylabel))
                for c in chunks:
                    if c in rr:
                        f.write("%d %.3f %.3f %.3f %s\n" % (
                            c // 1024, rr[c][field], rr[c].get(field + "_min", rr[c][field]),
                            rr[c].get(field + "_max", rr[c][field]),
                            "%.3f" % rr[c][field] if rr[c]["noisy_runs"] else "NaN"))
                f.write("\n\n")
                lines.append((rw, b, any(x["noisy_runs"] for x in rr.values())))
                b += 1
            if lines:
                panels.append((p, ylabel, lines))
    cols = 3 if len(panels) > 2 else len(panels)
    nrows = (len(panels) + cols - 1) // cols
    s = ["set multiplot layout %d,%d title %s" % (nrows, cols, q(
        "chunk size sweep at N=%d, absolute throughput (default chunk %s dotted)\n%s; %s" % (
            sweep[0]["n"], fmt_size(default), members_label(doc), runs_label(doc))))]
    s.append("set grid\nset logscale x 2\nset xlabel 'chunk (KiB)'\nset yrange [0:*]\n"
             "set offsets 0,0,graph 0.1,0\nset key left bottom box opaque\n"
             "set xrange [%g:%g]" % (chunks[0] // 1024 / 1.4, chunks[-1] // 1024 * 1.4))
    s.append("set xtics (%s)" % ",".join("%s %d" % (q(fmt_size(c)), c // 1024) for c in chunks))
    s.append("set arrow 1 from %d, graph 0 to %d, graph 1 nohead dt 3 lw 2 lc rgb 'gray40'"
             % (default // 1024, default // 1024))
    for p, ylabel, lines in panels:
        s.append("set title %s\nset ylabel %s" % (q(p), q(ylabel)))
        plots = ["%s index %d using 1:2:3:4 with yerrorlines lw 2 pt %d ps 1.2 %s lc rgb '%s' title '%s'"
                 % (q(datf), b, 7 if rw == "read" else 5, "dt 1" if rw == "read" else "dt 2",
                    RW_COLORS[rw], rw) for rw, b, _ in lines]
        titled = False
        for rw, b, noisy in lines:
            if noisy:
                plots += noisy_plots(datf, b, 5, RW_COLORS[rw], None if titled else "noisy (hollow, boxed)")
                titled = True
        s.append("plot " + ", \\\n  ".join(plots))
    s.append("unset multiplot")
    png = os.path.join(cdir, "chunks.png")
    gnuplot(png, "\n".join(s) + "\n")
    return png


def sustained_chart(doc, cdir, s):
    """MB written per second over time, binned (1 s, or 0.25 s for short
    runs): the array (fio's completions) and every member (its sector
    counter), one colour and marker per member; where each member's write
    cache ran out (dotted)."""
    n = s["n"]
    dur = max([p[0] for p in s["array_curve"]] + [r[0] for r in s["member_curves"]] + [0.0])
    width = 1.0 if dur >= 8 else 0.25
    arr = bin_curve(s["array_curve"], width)
    mem = [bin_curve([[r[0], r[i + 1]] for r in s["member_curves"]], width) for i in range(n)]
    datf = os.path.join(cdir, "sustained-n%d.dat" % n)
    with open(datf, "w") as f:
        f.write("# array (fio bandwidth log), %g s bins: t MB/s\n" % width)
        for t, v in arr:
            f.write("%.3f %.3f\n" % (t, v))
        for i, c in enumerate(mem):
            f.write("\n\n# member %d (sector counter), %g s bins: t MB/s\n" % (i, width))
            for t, v in c:
                f.write("%.3f %.3f\n" % (t, v))
    cache = s.get("cache_bytes")
    what = ("write cache %s per member, then %d MB/s" % (fmt_size(cache), s["slow_mbps"])
            if cache else "no emulated write cache")
    sc = ["set title %s" % q(
        "sustained sequential write, 1 MiB Q8, N=%d, %s in all (%s)\n%s; one run, %g s bins" % (
            n, fmt_size(s["bytes"]), what, members_label(doc), width)),
        "set grid\nset key outside right top box\nset xlabel 'time (s)'\n"
        "set ylabel 'MB written per second'\nset yrange [0:*]\nset offsets 0,0,graph 0.05,0"]
    for i, (k, t) in enumerate(sorted(s["cliff_at_s"].items(), key=lambda kv: int(kv[0]))):
        c = MEMBER_COLORS[int(k) % len(MEMBER_COLORS)]
        sc.append("set arrow %d from %.3f, graph 0 to %.3f, graph 1 nohead dt 3 lc rgb '%s'"
                  % (i + 1, t, t, c))
    plots = ["%s index 0 using 1:2 with linespoints lw 3 pt 1 ps 1 lc rgb 'black' title 'array (fio completions)'"
             % q(datf)]
    for i in range(n):
        # members that write alike lie on each other: the first ones are
        # drawn bigger, so that every marker stays visible
        f = i / (n - 1) if n > 1 else 0.5
        plots.append("%s index %d using 1:2 with linespoints lw %.1f pt %d ps %.2f lc rgb '%s' title %s" % (
            q(datf), i + 1, 4.0 - 3.0 * f, MEMBER_POINTS[i % len(MEMBER_POINTS)], 2.6 - 1.8 * f,
            MEMBER_COLORS[i % len(MEMBER_COLORS)],
            q("member %d%s" % (i, (", cache full at %.1f s" % s["cliff_at_s"][str(i)])
                               if str(i) in s["cliff_at_s"] else ""))))
    sc.append("plot " + ", \\\n  ".join(plots))
    png = os.path.join(cdir, "sustained-n%d.png" % n)
    gnuplot(png, "\n".join(sc) + "\n")
    return png


def make_charts(doc, out):
    """Draw every chart of doc into out/charts; returns their paths
    relative to out (what results.json lists)."""
    cdir = os.path.join(out, "charts")
    os.makedirs(cdir, exist_ok=True)
    if not shutil.which("gnuplot"):
        log("WARNING: gnuplot not found (apt-get install gnuplot-nox): no charts")
        return []
    made = []
    main = [r for r in doc["results"] if r["phase"] == "main"]
    for p in PROFILE_NAMES:
        rows = [r for r in main if r["profile"] == p]
        if rows:
            made.append(scaling_chart(doc, cdir, p, rows))
    rows = [r for r in main if r["profile"] == FSYNC_PROFILE[0]]
    if rows:
        made.append(fsync_chart(doc, cdir, rows))
    sweep = [r for r in doc["results"] if r["phase"] == "chunks"]
    if sweep:
        made.append(chunks_chart(doc, cdir, sweep))
    for s in doc["sustained"]:
        made.append(sustained_chart(doc, cdir, s))
    return [os.path.relpath(p, out) for p in made]
