"""Charts (gnuplot, PNG), made from a results document alone."""

import os
import shutil

from .profiles import PROFILE_NAMES
from .util import fmt_size, log, run


def make_charts(doc, out):
    """Draw every chart of doc into out/charts; returns their paths
    relative to out (what results.json lists)."""
    p_ = doc["parameters"]
    m_ = doc["members"]
    ref = p_["reference"]
    cdir = os.path.join(out, "charts")
    os.makedirs(cdir, exist_ok=True)
    if not shutil.which("gnuplot"):
        log("WARNING: gnuplot not found (apt-get install gnuplot-nox): no charts")
        return []
    charts = []
    main = [r for r in doc["results"] if r["phase"] == "main"]
    for p in PROFILE_NAMES:
        rows = [r for r in main if r["profile"] == p]
        if not rows:
            continue
        datf = os.path.join(cdir, "scaling-%s.dat" % p)
        plots = []
        with open(datf, "w") as f:
            blocks = 0
            for rw in ("read", "write"):
                pr = sorted([r for r in rows if r["rw"] == rw and r["config"] == "plugin"],
                            key=lambda r: r["n"])
                if not pr:
                    continue
                one = next((r["mbps"] for r in pr if r["n"] == 1), None)
                fp = next((r["mbps"] for r in rows if r["rw"] == rw and r["config"] == ref), None)
                f.write("# %s: N measured ideal %s\n" % (rw, ref))
                for r in pr:
                    f.write("%d %.3f %s %s\n" % (r["n"], r["mbps"],
                                                 "%.3f" % (one * r["n"]) if one else "NaN",
                                                 "%.3f" % fp if (fp and r["n"] == 1) else "NaN"))
                f.write("\n\n")
                color = "#1f77b4" if rw == "read" else "#d62728"
                plots.append("'%s' index %d using 1:2 with linespoints lw 2 pt 7 lc rgb '%s' title '%s measured'"
                             % (datf, blocks, color, rw))
                plots.append("'%s' index %d using 1:3 with lines dt 2 lc rgb '%s' title '%s ideal N x N=1'"
                             % (datf, blocks, color, rw))
                plots.append("'%s' index %d using 1:4 with points pt 4 ps 2 lc rgb '%s' title '%s %s plugin'"
                             % (datf, blocks, color, rw, ref))
                blocks += 1
        png = os.path.join(cdir, "scaling-%s.png" % p)
        ns = sorted({r["n"] for r in rows})
        gnuplot(png, "%s: throughput vs members (chunk %s)%s" % (
            p, fmt_size(p_["chunk"]), (", remote members: %d MB/s, %d ms each" % (m_["mbps"], m_["remote"]["delay_ms"]))
            if m_["mode"] == "remote" else ""),
                     "members (N)", "MB/s", plots,
                     extra="set xtics (%s)\nset xrange [0.5:%g]\nset yrange [0:*]\nset key left top\n"
                     % (",".join(str(n) for n in ns), max(ns) + 0.5))
        charts.append(os.path.relpath(png, out))
    sweep = [r for r in doc["results"] if r["phase"] == "chunks"]
    if sweep:
        datf = os.path.join(cdir, "chunks.dat")
        plots = []
        chunks = sorted({r["chunk"] for r in sweep})
        refc = p_["chunk"] if p_["chunk"] in chunks else chunks[0]
        with open(datf, "w") as f:
            b = 0
            for p in PROFILE_NAMES:
                for rw in ("read", "write"):
                    rr = {r["chunk"]: r["mbps"] for r in sweep if r["profile"] == p and r["rw"] == rw}
                    if not rr or refc not in rr:
                        continue
                    f.write("# %s %s\n" % (p, rw))
                    for c in chunks:
                        if c in rr:
                            f.write("%d %.4f\n" % (c // 1024, rr[c] / rr[refc]))
                    f.write("\n\n")
                    plots.append("'%s' index %d using 1:2 with linespoints lw 2 %s title '%s %s'"
                                 % (datf, b, "dt 1" if rw == "read" else "dt 2", p, rw))
                    b += 1
        png = os.path.join(cdir, "chunks.png")
        gnuplot(png, "chunk sweep at N=%d: throughput relative to %s" % (sweep[0]["n"], fmt_size(refc)),
                     "chunk (KiB)", "relative throughput", plots,
                     extra="set logscale x 2\nset key outside right\n")
        charts.append(os.path.relpath(png, out))
    for s in doc["sustained"]:
        datf = os.path.join(cdir, "sustained-n%d.dat" % s["n"])
        with open(datf, "w") as f:
            f.write("# array: t MB/s\n")
            for t, v in s["array_curve"]:
                f.write("%.3f %.3f\n" % (t, v))
            f.write("\n\n# members: t MB/s...\n")
            for row in s["member_curves"]:
                f.write(" ".join("%.3f" % v for v in row) + "\n")
        plots = ["'%s' index 0 using 1:2 with lines lw 2 lc rgb 'black' title 'array (fio bw log)'" % datf]
        for i in range(s["n"]):
            plots.append("'%s' index 1 using 1:%d with lines title 'member %d'" % (datf, i + 2, i))
        png = os.path.join(cdir, "sustained-n%d.png" % s["n"])
        gnuplot(png, "sustained sequential write, N=%d, %s" % (s["n"], fmt_size(s["bytes"])),
                     "time (s)", "MB/s", plots, extra="set yrange [0:*]\nset key outside right\n")
        charts.append(os.path.relpath(png, out))
    return charts

def gnuplot(png, title, xl, yl, plots, extra=""):
    script = ("set terminal pngcairo size 1000,600 noenhanced\nset output '%s'\n"
              "set title '%s'\nset xlabel '%s'\nset ylabel '%s'\nset grid\n%s"
              "plot %s\n") % (png, title, xl, yl, extra, ", \\\n  ".join(plots))
    spath = png[:-4] + ".gp"
    with open(spath, "w") as f:
        f.write(script)
    r = run(["gnuplot", spath], check=False)
    if r.returncode != 0 or not os.path.exists(png):
        # pngcairo may be missing; fall back to the gd png terminal
        script = script.replace("pngcairo size 1000,600", "png size 1000,600")
        with open(spath, "w") as f:
            f.write(script)
        run(["gnuplot", spath])
