#!/usr/bin/env python3
"""Proves that the grader's checks catch real mistakes, not only `todo!()`.

For each phase with a `grader/checks/<phase>/mutants.json`, the solution's files are copied into
the exercise crate, first as they are (every check must pass: the exercise crate and the solution
share one API), then with one deliberate bug at a time (the checks named in `fails` must fail,
and every other check must pass, except those named in `may_fail`, which depend on the bug's
effect on measured timings). The learner's files are restored afterwards, whatever happens.

A mutant is {"name", "file" (relative to the crates), "find", "replace", "fails": [check ids],
"may_fail": [check ids] (optional)}, or, for a mutant that delegates the exercise to an engine item
the grader refuses to see used, {"name", "file", "find", "replace", "refused": true}: then every
check of the phase must be an `error` that says the crate was refused.
"""
import json
import pathlib
import shutil
import subprocess
import sys
import tempfile

root = pathlib.Path(__file__).resolve().parent.parent


def check(phase):
    run = subprocess.run(["cargo", "grader", "check", phase, "--json"], cwd=root, capture_output=True, text=True)
    try:
        return {c["id"]: c for c in json.loads(run.stdout)["checks"]}
    except ValueError:
        sys.exit(f"cargo grader check {phase} --json printed no JSON:\n{run.stderr[-3000:]}")


def judge(phase, name, checks, fails=(), may_fail=()):
    """The problems with one run: checks that should fail and did not, and the other way round."""
    # GPU checks skip on a machine without a GPU: there a skip is neither a catch nor a miss.
    problems = [f"{i} is {checks[i]['status']}, expected fail" for i in fails
                if checks[i]["status"] not in ("fail", "skipped")]
    problems += [f"{i} is {c['status']}: {c['message'][:300]}" for i, c in checks.items()
                 if i not in fails and c["status"] not in ("pass", "skipped")
                 and not (i in may_fail and c["status"] == "fail")]
    print(f"{phase}: {name}: " + ("ok" if not problems else "WRONG\n    " + "\n    ".join(problems)))
    return problems


def judge_refused(phase, name, checks):
    """The problems with a run that should have been refused before building."""
    problems = [f"{i} is {c['status']}, expected an error saying the crate was refused" for i, c in checks.items()
                if c["status"] != "error" or "refused by the grader" not in c["message"]]
    print(f"{phase}: {name}: " + ("refused" if not problems else "WRONG\n    " + "\n    ".join(problems[:3])))
    return problems


def mutate(spec_path):
    spec = json.loads(spec_path.read_text())
    phase, exercises, solutions = spec["phase"], root / spec["exercises"], root / spec["solutions"]
    files = sorted({m["file"] for m in spec["mutants"]})
    problems = []
    with tempfile.TemporaryDirectory() as backup:
        for f in files:
            (pathlib.Path(backup) / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(exercises / f, pathlib.Path(backup) / f)
        try:
            for f in files:
                shutil.copy(solutions / f, exercises / f)
            problems += judge(phase, "the solution, inside the exercise crate", check(phase))
            for mutant in spec["mutants"]:
                for f in files:
                    shutil.copy(solutions / f, exercises / f)
                text = (solutions / mutant["file"]).read_text()
                if mutant["find"] not in text:
                    problems.append(f"mutant `{mutant['name']}`: its text is not in {mutant['file']} any more")
                    continue
                (exercises / mutant["file"]).write_text(text.replace(mutant["find"], mutant["replace"], 1))
                if mutant.get("refused"):
                    problems += judge_refused(phase, mutant["name"], check(phase))
                else:
                    problems += judge(phase, mutant["name"], check(phase), mutant["fails"], mutant.get("may_fail", ()))
        finally:
            for f in files:
                shutil.copy(pathlib.Path(backup) / f, exercises / f)
    return problems


problems = [p for spec in sorted(root.glob("grader/checks/*/mutants.json")) for p in mutate(spec)]
sys.exit(1 if problems else 0)
