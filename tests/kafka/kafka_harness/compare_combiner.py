#!/usr/bin/env python3
"""Compares the PersisterStateBatchCombiner outputs of several Kafka releases.

Reads <corpus_dir>/<release>/combiner.jsonl.gz (written by `Main combiner`), checks that every
release got identical inputs, and classifies each case whose result differs from the first
release's:

  - "boundaries": the same (state, count) for every offset, only split into batches differently
    (e.g. two contiguous batches with equal state and count that one release joins and the other
    does not);
  - "per-offset": some offset ends up with a different (state, count), or is present in only one;
  - "error": one release threw.

Writes a JSON summary (with the smallest examples of each kind) to stdout, or to --out.
Standard library only.

Usage: compare_combiner.py <corpus_dir> <release> <release> ... [--out FILE]
"""
import gzip
import json
import sys


def load(path):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def runs(batches):
    """Maximal runs of equal (state, count) over offsets: a boundary-independent form.

    Returns None if batches overlap (then no per-offset reading exists).
    """
    out = []
    for first, last, state, count in sorted(batches, key=lambda b: (b[0], b[1])):
        if out and first <= out[-1][1]:
            return None
        if out and out[-1][1] + 1 == first and out[-1][2] == state and out[-1][3] == count:
            out[-1][1] = last
        else:
            out.append([first, last, state, count])
    return out


def size(case):
    return len(case["current"]) + len(case["new"])


def main(argv):
    out_file = None
    if "--out" in argv:
        i = argv.index("--out")
        out_file = argv[i + 1]
        argv = argv[:i] + argv[i + 2:]
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    corpus_dir, releases = argv[0], argv[1:]
    data = {r: load(f"{corpus_dir}/{r}/combiner.jsonl.gz") for r in releases}
    base = releases[0]
    n = len(data[base])
    summary = {"releases": releases, "cases": n, "baseline": base, "comparisons": {}}
    for r in releases:
        if len(data[r]) != n:
            raise SystemExit(f"{r}: {len(data[r])} cases, {base}: {n}")
        for a, b in zip(data[base], data[r]):
            if (a["case"], a["current"], a["new"], a["start_offset"]) != (b["case"], b["current"], b["new"], b["start_offset"]):
                raise SystemExit(f"inputs differ between {base} and {r} at case {a['case']}")
    for r in releases[1:]:
        kinds = {"identical": 0, "boundaries": 0, "per-offset": 0, "error": 0}
        examples = {"boundaries": [], "per-offset": [], "error": []}
        unsorted_or_overlapping = 0
        for a, b in zip(data[base], data[r]):
            if a.get("error") or b.get("error"):
                kind = "identical" if a.get("error") == b.get("error") else "error"
            elif a["result"] == b["result"]:
                kind = "identical"
            else:
                ra, rb = runs(a["result"]), runs(b["result"])
                kind = "boundaries" if ra is not None and ra == rb else "per-offset"
            kinds[kind] += 1
            for res in (b.get("result"),):
                if res and (res != sorted(res, key=lambda x: (x[0], x[1])) or runs(res) is None):
                    unsorted_or_overlapping += 1
            if kind != "identical":
                examples[kind].append({
                    "case": a["case"], "current": a["current"], "new": a["new"], "start_offset": a["start_offset"],
                    base: a.get("result") if not a.get("error") else a["error"],
                    r: b.get("result") if not b.get("error") else b["error"],
                })
        for k in examples:
            examples[k] = sorted(examples[k], key=lambda e: (len(e["current"]) + len(e["new"]), e["case"]))[:5]
        summary["comparisons"][f"{base} vs {r}"] = {
            "counts": kinds,
            f"{r}_results_unsorted_or_overlapping": unsorted_or_overlapping,
            "smallest_examples": examples,
        }
    text = json.dumps(summary, indent=1, ensure_ascii=False)
    if out_file:
        with open(out_file, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
