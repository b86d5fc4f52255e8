#!/usr/bin/env python3
"""The collect step of the scaffold JUBE campaigns (python3 standard library only).

Reads one benchmark work package: the run folder scaffold wrote there, and report.csv, which
the job produced with `scaffold report --format csv` of that folder. Checks that the run is the
one the campaign asked for (problem scale, ranks, nodes, shards, global batch, as the run
folder records them) and that the log's final line agrees with the folder, then writes
result.txt as "key: value" lines for JUBE's patterns. So every number of the result table
comes from the run folder, the same numbers `scaffold report` prints. A problem is written to
result.txt as the status and is also this script's failure (non-zero exit, reason on stderr).
"""

import argparse
import csv
import glob
import json
import os
import re
import sys

RESULT = "result.txt"


class CollectError(Exception):
    pass


def read_report(path):
    try:
        with open(path, newline="") as handle:
            rows = list(csv.DictReader(handle))
    except OSError:
        raise CollectError("no {0}: the job did not get to `scaffold report`".format(path))
    if len(rows) != 1:
        raise CollectError("{0} has {1} rows, expected one run".format(path, len(rows)))
    return rows[0]


def read_system(run_dir):
    path = os.path.join(run_dir, "system.json")
    try:
        with open(path) as handle:
            return json.load(handle)
    except (OSError, ValueError) as error:
        raise CollectError("cannot read {0}: {1}".format(path, error))


def log_epochs(job_err):
    """Epochs of the benchmark's final line ("Trained to ... E epochs" / "Completed in ...")."""
    try:
        with open(job_err, errors="replace") as handle:
            text = handle.read()
    except OSError:
        return None
    found = re.findall(r"(?:Trained to .* in|Completed in) \S+ seconds, (\d+) epochs", text)
    return int(found[-1]) if found else None


def fixed(value, digits):
    return "{0:.{1}f}".format(float(value), digits)


def collect(args):
    bench = args.benchmark_dir
    if os.path.exists(os.path.join(bench, "dryrun")):
        return {"status": "dry run: job scripts rendered and not run"}
    runs = sorted(d for d in glob.glob(os.path.join(bench, "scaffold_*")) if os.path.isdir(d))
    if len(runs) != 1:
        raise CollectError("expected one run folder scaffold_* in {0}, found {1}".format(
            os.path.realpath(bench), len(runs)))
    run_dir = runs[0]
    report = read_report(os.path.join(bench, "report.csv"))
    system = read_system(run_dir)

    # The run must be the combination JUBE asked for; a launcher that starts fewer ranks, or
    # a config file that overrides a swept key, shows up here rather than as a wrong row.
    recorded = {
        "problem_scale": int(report["problem_scale"]),
        "ranks": int(report["ranks"]),
        "shards": int(report["shards"]),
        "global_batch": int(report["global_batch"]),
        "nodes": int(system.get("nodes", 1)),
    }
    asked = {"problem_scale": args.problem_scale, "ranks": args.ranks, "shards": args.shards,
             "global_batch": args.global_batch, "nodes": args.nodes}
    wrong = ["{0}={1} (asked {2})".format(k, recorded[k], asked[k])
             for k in asked if recorded[k] != asked[k]]
    if wrong:
        raise CollectError("run folder {0} differs from the parameters: {1}".format(
            os.path.basename(run_dir), ", ".join(wrong)))

    epochs = int(report["epochs"])
    from_log = log_epochs(os.path.join(bench, "job.err"))
    if from_log is not None and from_log != epochs:
        raise CollectError("the log says {0} epochs, the run folder {1}".format(from_log, epochs))

    reached = report["reached_target"] == "true"
    measured = report["energy_to_target_wh"] != ""
    not_measured = "not measured"
    result = {
        "status": "ok" if reached else "ok; target Dice not reached (epoch cap): time is a lower bound",
        "run": os.path.basename(run_dir),
        "host": system.get("host", "") or "-",
        "git_commit": system.get("git_commit", "") or "-",
        "threads": int(system.get("threads", 0)),
        # Sharded runs: whose GroupNorm statistics (local: ScaFFold's; global: = unsharded).
        "dc_groupnorm": report.get("dc_groupnorm") or "-",
        "reached_target": report["reached_target"],
        "epochs": epochs,
        "time_to_target_s": report["time_to_target_s"],
        "fom_per_s": report["fom_per_s"] or "-",
        "median_epoch_s": report["median_epoch_s"],
        "samples_per_s": report["samples_per_s"],
        "energy_to_target_wh": report["energy_to_target_wh"] if measured else not_measured,
        "samples_per_wh": report["samples_per_wh"] if measured else not_measured,
        # Rounded copies for the pretty table (the CSV table has full precision).
        "fom_shown": "{0:.4g}".format(float(report["fom_per_s"])) if report["fom_per_s"] else "-",
        "energy_shown": fixed(report["energy_to_target_wh"], 3) if measured else not_measured,
        "samples_per_wh_shown": fixed(report["samples_per_wh"], 1)
        if measured and report["samples_per_wh"] else not_measured,
    }
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("benchmark_dir", help="the benchmark step's work folder")
    for name in ("ranks", "nodes", "problem-scale", "shards", "global-batch"):
        parser.add_argument("--" + name, type=int, required=True)
    args = parser.parse_args()
    code = 0
    try:
        result = collect(args)
    except (CollectError, KeyError, ValueError) as error:
        if isinstance(error, KeyError):
            error = "report.csv lacks the column {0}".format(error)
        result = {"status": "failed at collect: {0}".format(str(error).replace(",", ";"))}
        print("collect: {0}".format(error), file=sys.stderr)
        code = 1
    with open(RESULT, "w") as handle:
        for key, value in result.items():
            handle.write("{0}: {1}\n".format(key, value))
    return code


if __name__ == "__main__":
    sys.exit(main())
