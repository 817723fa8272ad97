# SPDX-License-Identifier: MIT
"""The chart of tools/bench (imported by it): every measured target's
throughput relative to the raw image, one cluster of bars per workload,
each bar labelled with its ratio and its absolute value, written with
gnuplot as OUT/ratios.png (and its .dat and .gp beside it)."""
import os
import shutil
import subprocess


def short(value, unit):
    """An absolute value for a bar's label: 63.1k (IOPS) or 1,405 (MiB/s)."""
    if value is None:
        return "-"
    if unit == "MiB/s":
        return f"{value:,.0f}"
    return f"{value / 1000:.1f}k" if value >= 1000 else f"{value:.0f}"


def chart(out, targets, workloads, med, title_note, labels, log):
    """Write OUT/ratios.png; return its path, or None (no raw target, no
    gnuplot, nothing to show, or gnuplot failed: logged).
    labels: {"targets": {id: name}, "workloads": {id: (label, .., unit)}}."""
    if "raw" not in targets or not shutil.which("gnuplot"):
        return None
    shown = [t for t in targets if t != "raw"]
    if not shown:
        return None
    wl = labels["workloads"]
    dat = os.path.join(out, "ratios.dat")
    with open(dat, "w") as f:
        f.write("# workload, then per target: ratio to raw image, label\n")
        for w in workloads:
            unit = wl[w][4]
            cells = []
            for t in shown:
                m = med[t, w]
                r = m["ratio_to_raw"]
                v = m["bw_mib_s"] if unit == "MiB/s" else m["iops"]
                cells += ["-" if r is None else f"{r:.4f}",
                          '""' if r is None else f'"{r:.2f} ({short(v, unit)})"']
            f.write(f'"{wl[w][0]}" ' + " ".join(cells) + "\n")
    n = len(shown)
    bars = ", ".join(
        (f"'{dat}' using {2 * i + 2}:xtic(1)" if i == 0 else f"'' using {2 * i + 2}")
        + f" title '{labels['targets'][t]}'" for i, t in enumerate(shown))
    # Bar i of a cluster of n (gap 1) is centred at x + (i - (n-1)/2)/(n+1).
    texts = ", ".join(
        f"'' using ($0 + ({i} - ({n} - 1) / 2.0) / ({n} + 1)):{2 * i + 2}:{2 * i + 3}"
        " with labels rotate by 90 left offset 0,0.4 font ',7' notitle"
        for i in range(n))
    png = os.path.join(out, "ratios.png")
    gp = os.path.join(out, "ratios.gp")
    with open(gp, "w") as f:
        f.write(f"""set terminal pngcairo size 1300,600 font ',10'
set output '{png}'
set title "dioloop bench: throughput relative to the raw image" . \\
    " ({title_note}); labels: ratio (IOPS, or MiB/s for 1M)"
set datafile missing '-'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set yrange [0:*]
set offsets 0, 0, graph 0.25, 0
set ylabel 'ratio to raw image (higher is better)'
set grid ytics
set key outside right top
set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2 lw 1.5 lc rgb '#444444'
plot {bars}, {texts}
""")
    r = subprocess.run(["gnuplot", gp], capture_output=True, text=True, check=False)
    if r.returncode:
        log(f"gnuplot failed: {r.stderr.strip()}")
        return None
    return png
