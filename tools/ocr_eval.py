#!/usr/bin/python3
"""Scores OCR systems on a set from make_ocr_eval.py: character error rate and time per subset.

  ocr_eval.py EVAL_DIR [--mminfer BIN] [--peer] [--threads N] [--subset NAME]... [--limit N]
              [--save DIR] [--variant NAME=ARGS]...

--mminfer runs `BIN ocr IMAGE... --jsonl --threads N`; --peer runs tools/ocr_peer.js (the
@gutenye/ocr-node peer) with --threads N (default 2). Each must print one JSON object per
image: {"file", "lines": [{"text", ...}], "ms"}. With both, the table is side by side and the
last column is peer ms / mminfer ms (above 1: mminfer is faster). --save DIR keeps each
system's raw output as DIR/<system>.jsonl. --variant NAME=ARGS adds mminfer run with extra
arguments (e.g. "int8=--precision int8") as one more system, and a table of the share of its
lines identical to plain mminfer's (image by image, line by line, as printed).

Scoring. A system's text for an image is its lines in the order it printed them, joined with
one space; the reference is the ground-truth lines joined the same way. Both sides are NFKC
normalised (full-width ，：？ become , : ?) and runs of whitespace become one space. CER is the
Levenshtein distance over characters divided by the reference length, summed over a subset's
images before dividing (long texts weigh more). "CER" counts spaces; "CER no sp." removes all
whitespace first, since PP-OCR's Chinese recogniser often drops spaces between English words.
An image with no result (error, missing) scores as empty text. Times are medians of "ms".
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import unicodedata

TOOLS = os.path.dirname(os.path.abspath(__file__))


def normalize(text):
    return " ".join(unicodedata.normalize("NFKC", text).split())


def levenshtein(a, b):
    """Edit distance (insert, delete, substitute; each costs 1)."""
    if len(a) < len(b):
        a, b = b, a
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[len(b)]


def run_system(name, cmd, images):
    """Runs cmd over all images; returns {realpath: record} from its JSON lines."""
    proc = subprocess.run(cmd, capture_output=True, text=True)
    records, junk = {}, 0
    for line in proc.stdout.splitlines():
        try:
            rec = json.loads(line)
            records[os.path.realpath(rec["file"])] = rec
        except (json.JSONDecodeError, KeyError, TypeError):
            junk += bool(line.strip())
    stderr = proc.stderr.strip().splitlines()
    if proc.returncode != 0 and not records:
        said = next((l for l in stderr if "unknown command" in l), stderr[-1] if stderr else "nothing on stderr")
        if name == "mminfer" and "unknown command" in said:
            raise SystemExit(f"ocr_eval: {cmd[0]} has no `ocr` command (it says: {said}); "
                             "build a tree that has `mminfer ocr`")
        raise SystemExit(f"ocr_eval: {name} failed (exit {proc.returncode}): {said}")
    if proc.returncode != 0 or junk:
        print(f"ocr_eval: warning: {name} exited {proc.returncode}, {junk} non-JSON lines; "
              f"{len(records)}/{len(images)} images answered", file=sys.stderr)
    return records, proc.stdout


def score(gt, records, root):
    """Per subset and "all": images, CER with and without spaces, median ms, images without a result."""
    keys = list(dict.fromkeys(item["subset"] for item in gt)) + ["all"]
    acc = {k: {"n": 0, "ref": 0, "dist": 0, "ref_ns": 0, "dist_ns": 0, "ms": [], "failed": 0} for k in keys}
    for item in gt:
        rec = records.get(os.path.realpath(os.path.join(root, item["file"])), {})
        hyp = normalize(" ".join(line["text"] for line in rec.get("lines", [])))
        ref = normalize(" ".join(item["lines"]))
        hyp_ns, ref_ns = hyp.replace(" ", ""), ref.replace(" ", "")
        counts = {"n": 1, "ref": len(ref), "dist": levenshtein(hyp, ref),
                  "ref_ns": len(ref_ns), "dist_ns": levenshtein(hyp_ns, ref_ns)}
        ok = "ms" in rec and "error" not in rec
        for key in (item["subset"], "all"):
            a = acc[key]
            for c, v in counts.items():
                a[c] += v
            if ok:
                a["ms"].append(float(rec["ms"]))
            else:
                a["failed"] += 1
    return {k: {"n": a["n"], "cer": a["dist"] / max(1, a["ref"]), "cer_ns": a["dist_ns"] / max(1, a["ref_ns"]),
                "ms": statistics.median(a["ms"]) if a["ms"] else float("nan"), "failed": a["failed"]}
            for k, a in acc.items()}


def table(results):
    """Markdown table, one row per subset, columns per system."""
    names = list(results)
    subsets = list(next(iter(results.values())))
    head = ["subset", "images"]
    head += [f"CER {n}" for n in names] + [f"CER no sp. {n}" for n in names] + [f"median ms {n}" for n in names]
    if len(names) == 2:
        head.append(f"{names[1]} / {names[0]} ms")
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in subsets:
        r = [results[n][s] for n in names]
        cells = [s, str(r[0]["n"])]
        cells += [f"{x['cer'] * 100:.2f}%" for x in r] + [f"{x['cer_ns'] * 100:.2f}%" for x in r]
        cells += [f"{x['ms']:.1f}" for x in r]
        if len(names) == 2:
            cells.append(f"{r[1]['ms'] / r[0]['ms']:.2f}x")
        rows.append("| " + " | ".join(cells) + " |")
    failed = {n: results[n]["all"]["failed"] for n in names if results[n]["all"]["failed"]}
    if failed:
        rows.append("\nimages without a result (scored as empty): " + ", ".join(f"{n} {c}" for n, c in failed.items()))
    return "\n".join(rows)


def identical_lines(base, other):
    """Lines (position by position within each image) the same in both, over the larger count."""
    same = total = 0
    for key, rec in base.items():
        a = [l["text"] for l in rec.get("lines", [])]
        b = [l["text"] for l in other.get(key, {}).get("lines", [])]
        total += max(len(a), len(b))
        same += sum(x == y for x, y in zip(a, b))
    return same, total


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("eval_dir")
    p.add_argument("--mminfer", metavar="BIN")
    p.add_argument("--peer", action="store_true")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--subset", action="append", help="only this subset (repeatable)")
    p.add_argument("--limit", type=int, help="first N images of each subset")
    p.add_argument("--save", metavar="DIR")
    p.add_argument("--variant", action="append", default=[], metavar="NAME=ARGS",
                   help="mminfer with extra arguments as another system (needs --mminfer)")
    p.add_argument("--max-cer", type=float, metavar="PCT",
                   help="exit 1 when mminfer's CER (with spaces) on any subset is above PCT percent")
    args = p.parse_args()
    if not (args.mminfer or args.peer):
        p.error("name at least one system: --mminfer BIN and/or --peer")

    with open(os.path.join(args.eval_dir, "ground_truth.json"), encoding="utf-8") as f:
        gt = json.load(f)["images"]
    if args.subset:
        gt = [g for g in gt if g["subset"] in args.subset]
    if args.limit:
        taken = {}
        for g in gt:
            taken[g["subset"]] = taken.get(g["subset"], 0) + 1
            g["skip"] = taken[g["subset"]] > args.limit
        gt = [g for g in gt if not g["skip"]]
    if not gt:
        raise SystemExit("ocr_eval: no images selected")

    systems = {}
    if args.mminfer:
        if not (os.path.isfile(args.mminfer) and os.access(args.mminfer, os.X_OK)):
            raise SystemExit(f"ocr_eval: --mminfer {args.mminfer}: not an executable file")
        systems["mminfer"] = ([args.mminfer, "ocr"], ["--jsonl", "--threads", str(args.threads)])
    for v in args.variant:
        name, eq, extra = v.partition("=")
        if not args.mminfer or not eq or not name or name in ("mminfer", "peer"):
            p.error(f"--variant {v!r}: expected NAME=ARGS (with --mminfer)")
        systems[name] = ([args.mminfer, "ocr"], ["--jsonl", "--threads", str(args.threads)] + shlex.split(extra))
    if args.peer:
        if not os.path.isdir(os.path.join(TOOLS, "node_modules", "@gutenye", "ocr-node")):
            raise SystemExit("ocr_eval: @gutenye/ocr-node is not in tools/node_modules; run scripts/bootstrap")
        systems["peer"] = (["node", os.path.join(TOOLS, "ocr_peer.js")], ["--threads", str(args.threads)])

    # Subset by subset, the systems take turns, so a busy spell on a shared machine falls on
    # both rather than on whichever happened to run then.
    records = {name: {} for name in systems}
    raws = {name: "" for name in systems}
    for subset in dict.fromkeys(g["subset"] for g in gt):
        part = [os.path.join(args.eval_dir, g["file"]) for g in gt if g["subset"] == subset]
        for name, (prefix, suffix) in systems.items():
            recs, raw = run_system(name, prefix + part + suffix, part)
            records[name].update(recs)
            raws[name] += raw
    results = {}
    for name in systems:
        if args.save:
            os.makedirs(args.save, exist_ok=True)
            with open(os.path.join(args.save, f"{name}.jsonl"), "w", encoding="utf-8") as f:
                f.write(raws[name])
        results[name] = score(gt, records[name], args.eval_dir)
    print(table(results))
    if args.variant:
        print("\n| variant | lines identical to mminfer |\n|---|---|")
        for v in args.variant:
            name = v.partition("=")[0]
            same, total = identical_lines(records["mminfer"], records[name])
            print(f"| {name} ({v.partition('=')[2]}) | {same}/{total} = {100 * same / max(1, total):.2f}% |")
    if args.max_cer is not None and "mminfer" in results:
        over = {k: v["cer"] for k, v in results["mminfer"].items() if 100 * v["cer"] > args.max_cer}
        if over:
            raise SystemExit("ocr_eval: CER above %.2f%%: %s" % (args.max_cer, ", ".join(f"{k} {100 * v:.2f}%" for k, v in over.items())))


if __name__ == "__main__":
    main()
