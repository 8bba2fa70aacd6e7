"""The table wdedup-bench prints, held to the JSON it writes beside it: what
check_quick.py (a whole --quick run) and check_args.py (a run with FAILED
rows) both check. Imported from the directory of the script that runs."""
import re


def printed_number(text):
    """A number as print_table writes it (%.0f, %.1f, %.2f, %.3g, %.4g), and
    half the step of its last digit."""
    mant, _, exp = text.partition("e")
    decimals = len(mant.partition(".")[2])
    return float(text), 0.5 * 10.0 ** ((int(exp) if exp else 0) - decimals)


def printed_agrees(text, unit, want):
    """`text` is `want` in `unit` ("" for none) as fmt_value prints it, give
    or take the JSON's rounding to 6 digits."""
    number, _, got_unit = text.partition(" ")
    if got_unit != unit:
        return False
    try:
        got, half_step = printed_number(number)
    except ValueError:
        return False
    return abs(got - want) <= half_step + 1e-5 * abs(want)


def table_problems(stdout, rows):
    """What is wrong with the table in `stdout` against the JSON's `rows`:
    a list of problems, empty when there are none.

    The columns line up: each row's ratio ends where the header's "ratio"
    does. The baseline column was a fixed 30 wide, and the write rows'
    baselines ("fallocate+write()+fsync 0.478 GB/s") pushed their ratio,
    target and met out of line.

    What the table says is what the JSON says, row by row, in its order: the
    figure, the baseline, the ratio (to the digits it prints), the target and
    yes/NO/FAILED. check_quick's other checks hold the JSON to its samples; a
    table that printed each ratio inverted, or yes for NO, passed them all (a
    mutation test of main.cpp's print_table)."""
    problems = []
    table = stdout.splitlines()
    head_at = next((i for i, l in enumerate(table) if l.startswith("group ") and " ratio " in l), None)
    if head_at is None:
        return ["no table header line"]
    head = table[head_at]
    ratio_end = head.index(" ratio ") + len(" ratio")
    thr_at = head.index(" thr ") + 1
    cells = []
    for l in table[head_at + 1:]:
        if re.search(r" of \d+ targets? met", l):
            break
        if not l:
            continue
        if len(l) < ratio_end + 2 or not (l[ratio_end - 1] in "x-" and l[ratio_end:ratio_end + 2] == "  "):
            problems.append(f"table line out of line (its ratio should end at column {ratio_end}): {l!r}")
        cells.append({"group": l[:8].rstrip(), "name": l[9:thr_at - 1].rstrip(), "thr": l[thr_at:thr_at + 3].strip(),
                      "figure": l[thr_at + 4:thr_at + 17].strip(), "baseline": l[thr_at + 19:ratio_end - 10].rstrip(),
                      "ratio": l[ratio_end - 9:ratio_end].strip(), "target": l[ratio_end + 2:ratio_end + 14].strip(),
                      "met": l[ratio_end + 15:].strip()})
    if len(cells) != len(rows):
        problems.append(f"{len(cells)} table rows, {len(rows)} in the JSON")
    for c, r in zip(cells, rows):
        said = []
        if (c["group"], c["name"], c["thr"]) != (r["group"], r["name"], str(r["threads"]) if r["threads"] else "-"):
            said.append(f"group, name, thr {c['group']!r}, {c['name']!r}, {c['thr']!r}")
        if not printed_agrees(c["figure"], r["unit"], r["value"]):
            said.append(f"figure {c['figure']!r}, the JSON's {r['value']} {r['unit']}")
        if not r.get("baseline"):
            if c["baseline"] != "-":
                said.append(f"baseline {c['baseline']!r} where the JSON has none")
        elif not (c["baseline"].startswith(r["baseline"] + " ") and
                  printed_agrees(c["baseline"][len(r["baseline"]) + 1:], r["baseline_unit"], r["baseline_value"])):
            said.append(f"baseline {c['baseline']!r}, the JSON's {r['baseline']} {r['baseline_value']} "
                        f"{r['baseline_unit']}")
        if r.get("ratio") is None:
            if c["ratio"] != "-":
                said.append(f"ratio {c['ratio']!r} where the JSON has none")
        elif not (c["ratio"].endswith("x") and printed_agrees(c["ratio"][:-1], "", r["ratio"])):
            said.append(f"ratio {c['ratio']!r}, the JSON's {r['ratio']}")
        want_met = "FAILED" if r.get("failed") else "" if "target" not in r else "yes" if r["met"] else "NO"
        if (c["target"], c["met"]) != (r.get("target", {}).get("text", ""), want_met):
            said.append(f"target and met {c['target']!r} {c['met']!r}, the JSON's {r.get('target')} {want_met!r}")
        if said:
            problems.append(f"table row {r['name']!r} ({r['threads']} thr, vs {r.get('baseline')!r}): "
                            + "; ".join(said))
    return problems
