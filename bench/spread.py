#!/usr/bin/env python3
"""The spread of repeated bench runs: bench/spread.py RUN.md... [--write BENCHMARKS.md]

Each RUN.md is what one `cargo bench --bench wrapper` printed (its machine line and its
table). For every row of the tables, prints the minimum, median and maximum of the figure
and of its overhead over the baseline measured in the same run, and in how many runs the
target was met. `bench/run.sh --repeat N` runs the bench N times and calls this; with
--write, the table replaces the block between `<!-- bench:spread:begin -->` and
`<!-- bench:spread:end -->`.
"""

import re
import statistics
import sys

BEGIN, END = "<!-- bench:spread:begin -->", "<!-- bench:spread:end -->"
NUMBER = re.compile(r"([+-]*)([0-9][0-9,]*(?:\.[0-9]+)?)\s*(ms|µs|ns|MiB|MB/s|%|×|/s)?")


def number(cell):
    """The first number of a cell, with its unit ("+-0.10 ms" is -0.10 ms); None if none."""
    m = NUMBER.search(cell)
    if not m:
        return None
    value = float(m.group(2).replace(",", ""))
    return (-value if "-" in m.group(1) else value), m.group(3) or ""


def rows(path):
    """The table rows of one run: (figure, ours, overhead, target, meets)."""
    out = []
    for line in open(path, encoding="utf-8"):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 6 or cells[0] in ("Figure", "") or set(cells[0]) <= {"-"}:
            continue
        out.append(cells[:1] + [cells[1], cells[3], cells[4], cells[5]])
    return out


def spread(values, signed=False):
    """min / median / max of (value, unit) pairs, in the first one's unit; `signed` for
    a difference (a ratio such as "57 % of the pipe" is not one)."""
    if not values:
        return "—"
    unit = values[0][1]
    nums = sorted(v for v, u in values if u == unit)
    big = max(abs(n) for n in nums) >= 100
    signed = signed and unit in ("ms", "µs", "ns", "MiB")
    whole = big or all(n == int(n) for n in nums)
    fmt = ("{:+,.0f}" if whole else "{:+.2f}") if signed else ("{:,.0f}" if whole else "{:.2f}")
    parts = [fmt.format(n) for n in (nums[0], statistics.median(nums), nums[-1])]
    return f"{' / '.join(parts)} {unit}".strip()


def main(argv):
    files, write = [], None
    it = iter(argv)
    for a in it:
        if a == "--write":
            write = next(it)
        else:
            files.append(a)
    if not files:
        sys.exit(__doc__)
    runs = [rows(f) for f in files]
    order, by_figure = [], {}
    for run in runs:
        for figure, ours, overhead, target, meets in run:
            if figure not in by_figure:
                order.append(figure)
                by_figure[figure] = {"ours": [], "over": [], "target": target, "meets": []}
            entry = by_figure[figure]
            for key, cell in (("ours", ours), ("over", overhead)):
                n = number(cell)
                if n is not None:
                    entry[key].append(n)
            if meets not in ("—", ""):
                entry["meets"].append(meets.strip("*") == "yes")
    machines = []
    for f in files:
        for line in open(f, encoding="utf-8"):
            if line.startswith("Measured "):
                machines.append(line.strip())
                break
    lines = [
        f"{len(files)} runs; each figure as min / median / max over them (each run's own "
        "baseline taken in the same run). The rows a run reads from criterion's saved "
        "estimates (the client, the audit log, the parent's in-process share) were measured "
        "once, before the runs, and repeat that figure.",
        "",
    ]
    lines += [f"- {m}" for m in machines]
    lines += [
        "",
        "| Figure | ahp-wrap | Overhead over the baseline | Target | Met in |",
        "|---|---|---|---|---|",
    ]
    for figure in order:
        e = by_figure[figure]
        met = f"{sum(e['meets'])} of {len(e['meets'])}" if e["meets"] else "—"
        lines.append(
            f"| {figure} | {spread(e['ours'])} | {spread(e['over'], signed=True)} | {e['target']} | {met} |"
        )
    table = "\n".join(lines)
    print(table)
    if write:
        text = open(write, encoding="utf-8").read()
        if BEGIN not in text or END not in text:
            sys.exit(f"{write} has no {BEGIN} … {END} block")
        head, rest = text.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        open(write, "w", encoding="utf-8").write(f"{head}{BEGIN}\n{table}\n{END}{tail}")


if __name__ == "__main__":
    main(sys.argv[1:])
