#!/usr/bin/env python3
"""Fails when ctest skipped a test that may not skip.

Only the programs labelled gpu may skip as a whole (exit status 77 without a CUDA device); any
other skipped or not-run test in ctest's JUnit report is an error, since a skip there can hide a
failure (a failed SetUpTestSuite, a missing fixture).

    check_skips.py JUNIT_XML BUILD_DIR
"""
import re
import subprocess
import sys
import xml.etree.ElementTree as ET


def gpu_tests(build_dir):
    # `ctest -N -L gpu` lists "  Test  #7: name" lines.
    out = subprocess.run(["ctest", "--test-dir", build_dir, "-N", "-L", "gpu"],
                         capture_output=True, text=True, check=True).stdout
    return set(re.findall(r"^\s*Test\s+#\d+: (\S+)$", out, re.MULTILINE))


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    junit, build_dir = sys.argv[1], sys.argv[2]
    allowed = gpu_tests(build_dir)
    bad = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        skipped = case.find("skipped") is not None or case.get("status") in ("notrun", "disabled")
        if skipped and case.get("name") not in allowed:
            bad.append(case.get("name"))
    if bad:
        print("check_skips: tests outside the gpu label skipped: " + ", ".join(sorted(bad)),
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
