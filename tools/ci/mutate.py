#!/usr/bin/env python3
"""Planted-bug check: does the test suite catch each of a list of one-line bugs?

    tools/ci/mutate.py [--list test/mutations/mutations.json] [--work DIR] [--only TEXT]
                    [--report FILE] [--full]
    tools/ci/mutate.py --check-list    the list against this tree only (a ctest)

Mirrors the working tree (git's tracked and untracked, not ignored, files) into DIR/src, builds
each preset the mutations name once in DIR/build-PRESET and runs its tests unmutated (they must
pass). Then, one at a time: applies a mutation (its `find` text must occur exactly once in its
file), rebuilds incrementally, runs ctest (only the suites matching its `tests` regex unless
--full), records which tests failed, and restores the file. The source tree is never touched; DIR is kept, so a second run rebuilds only what changed.

A mutation is caught when at least one test fails; "build broken" means the mutation did not
compile (fix the list: it tests nothing). Prints a Markdown table (also to --report).
Exit status: 0 every mutation caught, 1 some missed or broke the build, 2 bad list or a
baseline that fails. Takes a few minutes per preset plus about a minute per mutation on 2 cores.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

SOURCE = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


class ListProblem(Exception):
    pass


def run(command, cwd, log):
    """Runs command, appending its output to log; returns (status, output)."""
    result = subprocess.run(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    with open(log, "a") as out:
        out.write("$ " + " ".join(command) + "\n" + result.stdout + "\n")
    return result.returncode, result.stdout


def copy_tree(work):
    """Mirrors the tree into work/src. Files whose content is unchanged keep their timestamps, the
    others are written anew (a fresh mtime): a build left with a mutation compiled in (a file
    restored after the last one) then rebuilds exactly what differs."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=SOURCE, check=True,
                           stdout=subprocess.PIPE).stdout.decode().split("\0")
    src = os.path.join(work, "src")
    wanted = set()
    for name in filter(None, files):
        path = os.path.join(SOURCE, name)
        if not os.path.isfile(path):
            continue  # deleted but still listed
        wanted.add(name)
        target = os.path.join(src, name)
        with open(path, "rb") as f:
            content = f.read()
        if os.path.isfile(target):
            with open(target, "rb") as f:
                if f.read() == content:
                    continue
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as f:
            f.write(content)
        shutil.copymode(path, target)
    for root, dirs, names in os.walk(src):
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(root, d))]
        for name in names:
            relative = os.path.relpath(os.path.join(root, name), src)
            if relative not in wanted:
                os.remove(os.path.join(root, name))
    # The virtual environments install_deps.sh makes (ignored, not copied): linked, so the tests
    # that run in them (hta_agreement in .venv-hta) run in the mirror too.
    for venv in (".venv", ".venv-hta"):
        link = os.path.join(src, venv)
        if os.path.isdir(os.path.join(SOURCE, venv)) and not os.path.lexists(link):
            os.symlink(os.path.join(SOURCE, venv), link)
    return src


def load_list(path, src):
    with open(path) as f:
        data = json.load(f)
    mutations = data.get("mutations")
    if not isinstance(mutations, list) or not mutations:
        raise ListProblem(f"{path}: needs a non-empty list 'mutations'")
    for i, m in enumerate(mutations):
        for key in ("name", "file", "find", "preset"):
            if not isinstance(m.get(key), str) or not m[key]:
                raise ListProblem(f"{path}: mutation {i + 1} needs a string '{key}'")
        if not isinstance(m.get("replace"), str):  # may be empty: the mutation deletes its find text
            raise ListProblem(f"{path}: mutation {i + 1} needs a string 'replace' (empty deletes 'find')")
        file = os.path.join(src, m["file"])
        if not os.path.isfile(file):
            raise ListProblem(f"{path}: mutation '{m['name']}': no file {m['file']}")
        count = open(file).read().count(m["find"])
        if count != 1:
            raise ListProblem(f"{path}: mutation '{m['name']}': its find text occurs {count} times in {m['file']} "
                              "(must be exactly once)")
        if m["find"] == m["replace"]:
            raise ListProblem(f"{path}: mutation '{m['name']}' changes nothing")
    return mutations


def failed_tests(output):
    """Test names from ctest's 'The following tests FAILED:' list."""
    names = []
    listing = False
    for line in output.splitlines():
        if "The following tests FAILED" in line:
            listing = True
            continue
        if listing:
            match = re.match(r"\s*\d+ - (\S+)", line)
            if match:
                names.append(match.group(1))
            elif line.strip():
                break
    return names


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", default=os.path.join(SOURCE, "test", "mutations", "mutations.json"))
    parser.add_argument("--work", default="/tmp/blockscope-mutate")
    parser.add_argument("--only", help="run only mutations whose name contains this text")
    parser.add_argument("--report", help="also write the Markdown report here")
    parser.add_argument("--full", action="store_true", help="run every test for each mutation, not only 'tests'")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--check-list", action="store_true",
                        help="only check the list against this tree (each find text exactly once in its file)")
    args = parser.parse_args(argv)

    if args.check_list:  # ctest mutation_list_matches_the_tree: code that moves takes its mutations along
        try:
            count = len(load_list(args.list, SOURCE))
        except (ListProblem, json.JSONDecodeError) as problem:
            print(f"mutate: {problem}", file=sys.stderr)
            return 2
        print(f"mutate: the {count} mutations of {args.list} each find their text once in this tree")
        return 0

    os.makedirs(args.work, exist_ok=True)
    log = os.path.join(args.work, "mutate.log")
    open(log, "w").close()
    src = copy_tree(args.work)
    try:
        mutations = load_list(args.list, src)
    except (ListProblem, json.JSONDecodeError) as problem:
        print(f"mutate: {problem}", file=sys.stderr)
        return 2
    if args.only:
        mutations = [m for m in mutations if args.only in m["name"]]
        if not mutations:
            print(f"mutate: no mutation's name contains '{args.only}'", file=sys.stderr)
            return 2

    builds = {}
    for preset in sorted({m["preset"] for m in mutations}):
        build = os.path.join(args.work, "build-" + preset)
        print(f"mutate: building preset {preset} unmutated in {build} (log: {log})", flush=True)
        status, _ = run(["cmake", "--preset", preset, "-B", build], src, log)
        if status == 0:
            status, _ = run(["cmake", "--build", build, f"-j{args.jobs}"], src, log)
        if status == 0:
            status, output = run(["ctest", "--test-dir", build, f"-j{args.jobs}", "--timeout", "900"], src, log)
        if status != 0:
            print(f"mutate: preset {preset} does not build or pass unmutated; see {log}", file=sys.stderr)
            return 2
        builds[preset] = build

    rows = []
    for m in mutations:
        file = os.path.join(src, m["file"])
        original = open(file).read()
        started = time.time()
        print(f"mutate: {m['name']} ({m['file']})", flush=True)
        with open(file, "w") as f:
            f.write(original.replace(m["find"], m["replace"]))
        try:
            build = builds[m["preset"]]
            status, _ = run(["cmake", "--build", build, f"-j{args.jobs}"], src, log)
            if status != 0:
                verdict, failing = "build broken", []
            else:
                command = ["ctest", "--test-dir", build, f"-j{args.jobs}", "--timeout", "900"]
                if m.get("tests") and not args.full:
                    command += ["-R", m["tests"]]
                status, output = run(command, src, log)
                failing = failed_tests(output)
                verdict = "caught" if status != 0 else "MISSED"
        finally:
            with open(file, "w") as f:
                f.write(original)
            now = time.time()
            os.utime(file, (now, now))
        rows.append((m, verdict, failing, time.time() - started))
        print(f"mutate:   {verdict}" + (f" by {len(failing)} tests" if failing else ""), flush=True)

    # Leave every build as the unmutated tree compiles, so the next run starts clean.
    for build in builds.values():
        run(["cmake", "--build", build, f"-j{args.jobs}"], src, log)

    lines = [f"| mutation | file | preset | verdict | failing tests | s |", "|---|---|---|---|---|---:|"]
    for m, verdict, failing, seconds in rows:
        shown = ", ".join(failing[:4]) + (f", … {len(failing) - 4} more" if len(failing) > 4 else "")
        lines.append(f"| {m['name']} | `{m['file']}` | {m['preset']} | {verdict} | {shown} | {seconds:.0f} |")
    caught = sum(1 for _, verdict, _, _ in rows if verdict == "caught")
    lines.append("")
    lines.append(f"{caught} of {len(rows)} mutations caught.")
    report = "\n".join(lines) + "\n"
    print(report)
    if args.report:
        with open(args.report, "w") as f:
            f.write(report)
    return 0 if caught == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
