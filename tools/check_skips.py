#!/usr/bin/env python3
"""Fails when ctest skipped a test that may not skip.

Only the programs labelled gpu may skip as a whole (exit status 77 without a CUDA device); any
other skipped or not-run test in ctest's JUnit report is an error, since a skip there can hide a
failure (a failed SetUpTestSuite, a missing fixture). Within the other programs, no test case may
skip either (GTEST_SKIP, for a machine without what the case needs: AVX-512 VBMI2, promtool, a
tmpfs mount, /dev/full): GoogleTest's XML reports, one per program in BUILD_DIR/gtest-xml/
(GTEST_OUTPUT, set by tools/test.sh), say which cases did.

    check_skips.py JUNIT_XML BUILD_DIR
"""
import glob
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET


def labelled(build_dir, label):
    # `ctest -N -L LABEL` lists "  Test  #7: name" lines.
    out = subprocess.run(["ctest", "--test-dir", build_dir, "-N", "-L", label],
                         capture_output=True, text=True, check=True).stdout
    return set(re.findall(r"^\s*Test\s+#\d+: (\S+)$", out, re.MULTILINE))


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    junit, build_dir = sys.argv[1], sys.argv[2]
    allowed = labelled(build_dir, "gpu")
    bad = []
    ran = [case.get("name") for case in ET.parse(junit).getroot().iter("testcase")]
    for case in ET.parse(junit).getroot().iter("testcase"):
        skipped = case.find("skipped") is not None or case.get("status") in ("notrun", "disabled")
        if skipped and case.get("name") not in allowed:
            bad.append(case.get("name"))
    xml_dir = os.path.join(build_dir, "gtest-xml")
    # Every GoogleTest program writes a report; the libFuzzer runs (label fuzz) write none.
    fuzz = labelled(build_dir, "fuzz")
    expects_reports = any(name not in fuzz and name not in allowed for name in ran)
    if expects_reports and not glob.glob(os.path.join(xml_dir, "*.xml")):
        print(f"check_skips: no GoogleTest reports in {xml_dir}: run ctest with "
              f"GTEST_OUTPUT=xml:{xml_dir}/ (tools/test.sh does)", file=sys.stderr)
        return 1
    bad_cases = skipped_cases(xml_dir, allowed)
    if bad:
        print("check_skips: tests outside the gpu label skipped: " + ", ".join(sorted(bad)),
              file=sys.stderr)
    for case in bad_cases:
        print("check_skips: a test case outside the gpu label skipped: " + case, file=sys.stderr)
    return 1 if bad or bad_cases else 0


def skipped_cases(xml_dir, allowed):
    """The skipped test cases of programs outside `allowed`, as "program: Suite.Case (why)"."""
    out = []
    for path in sorted(glob.glob(os.path.join(xml_dir, "*.xml"))):
        program = os.path.splitext(os.path.basename(path))[0]
        if program in allowed:
            continue
        for case in ET.parse(path).getroot().iter("testcase"):
            skipped = case.find("skipped")
            if skipped is None and case.get("result") != "skipped":
                continue
            why = skipped.get("message", "").strip() if skipped is not None else ""
            out.append(f"{program}: {case.get('classname')}.{case.get('name')} ({why})")
    return out


if __name__ == "__main__":
    sys.exit(main())
