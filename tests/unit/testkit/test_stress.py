"""The stress command's reading of a run: test ids and outcomes from pytest's JUnit XML report, the
tests a stopped run left unfinished, and the summary of several runs."""

from __future__ import annotations

from pathlib import Path

from testkit.stress import Failure, Run, parse, read_report, summary
from testkit.stress_plugin import unfinished

# What pytest writes with junit_family=xunit1 for a module with a class, a parametrized test, a
# setup error, a failure whose teardown errs too, a skip, and the stand-in of an interrupted test.
REPORT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tests.integration.test_x" name="test_ok" file="tests/integration/test_x.py" line="1" />
<testcase classname="tests.integration.test_x.TestGroup" name="test_p[a-1]" file="tests/integration/test_x.py" line="9">
  <failure message="AssertionError: assert 1 == 2&#10;more">long text</failure></testcase>
<testcase classname="tests.integration.test_x" name="test_setup" file="tests/integration/test_x.py" line="20">
  <error message='failed on setup with "RuntimeError: no broker"'>trace</error></testcase>
<testcase classname="tests.integration.test_x" name="test_both" file="tests/integration/test_x.py" line="30">
  <failure message="boom">trace</failure><error message="teardown">trace</error></testcase>
<testcase classname="tests.integration.test_x" name="test_skip" file="tests/integration/test_x.py" line="40">
  <skipped message="no etcd" /></testcase>
<testcase classname="" name="tests.integration.test_broken"><error message="collection failure">x</error></testcase>
<testcase time="0.000" />
</testsuite></testsuites>"""


def test_the_report_gives_each_test_its_node_id_and_outcome(tmp_path: Path) -> None:
    path = tmp_path / "run.xml"
    path.write_text(REPORT)
    counts, failures = read_report(path, 3)
    assert counts == {"passed": 1, "failed": 2, "error": 2, "skipped": 1}
    assert [(f.run, f.kind, f.test_id, f.message) for f in failures] == [
        (3, "failed", "tests/integration/test_x.py::TestGroup::test_p[a-1]", "AssertionError: assert 1 == 2"),
        (3, "error", "tests/integration/test_x.py::test_setup", 'failed on setup with "RuntimeError: no broker"'),
        (3, "failed", "tests/integration/test_x.py::test_both", "boom"),
        (3, "error", "tests/integration/test_x.py::test_both", "teardown"),
        (3, "error", "tests.integration.test_broken", "collection failure"),
    ]


def test_unfinished_tests_are_those_started_and_never_ended(tmp_path: Path) -> None:
    progress = tmp_path / "run.progress"
    progress.write_text("start\ta::t1\nstart\ta::t2\nend\ta::t1\nstart\tb::t3\n")
    assert unfinished(progress) == ["a::t2", "b::t3"]
    assert unfinished(tmp_path / "absent") == []


def test_the_summary_names_every_failure_with_its_run_and_each_run_with_its_time(tmp_path: Path) -> None:
    runs = [Run(1, 12.5, 1, False, False, tmp_path / "1.xml", tmp_path / "1.log", {"passed": 5, "failed": 1},
                [Failure(1, "t.py::flaky", "failed", "assert 0")]),
            Run(2, 11.0, 0, False, False, tmp_path / "2.xml", tmp_path / "2.log", {"passed": 6}),
            Run(3, 30.0, 2, True, False, tmp_path / "3.xml", tmp_path / "3.log", {"passed": 4},
                [Failure(3, "t.py::flaky", "unfinished", "still running"), Failure(3, "t.py::a", "error", "x")]),
            Run(4, 2.0, 4, False, False, tmp_path / "4.xml", tmp_path / "4.log")]
    text = summary(runs, 2, tmp_path)
    assert "4 run(s) beside 2 CPU hog(s)" in text
    assert "run 1:    12.5 s  exit 0" not in text and "run 1:    12.5 s  exit 1  5 passed, 1 failed" in text
    assert "run 3:    30.0 s  exit 2  TIMED OUT, 4 passed" in text
    assert "run 1  failed      t.py::flaky  assert 0" in text
    assert "run 3  unfinished  t.py::flaky  still running" in text
    assert "t.py::flaky: did not pass in 2 of 4 run(s) (1, 3)" in text
    assert "t.py::a: did not pass in 1 of 4 run(s) (3)" in text
    assert f"run 4: exit code 4 with no failed test in its report, see {tmp_path / '4.log'}" in text
    assert text.endswith("== 1 of 4 run(s) passed")


def test_the_integration_and_differential_tiers_run_unless_the_arguments_name_tests() -> None:
    default = ["-m", "integration or differential"]
    assert parse([])[1] == default
    assert parse(["--runs", "2", "-x", "-k", "offsets"])[1] == [*default, "-x", "-k", "offsets"]
    assert parse(["-m", "slow"])[1] == ["-m", "slow"]
    assert parse(["--hogs", "1", "tests/unit/testkit"])[1] == ["tests/unit/testkit"]
    assert parse(["tests/unit/testkit/test_stress.py::test_x", "--", "-x"])[1] == [
        "tests/unit/testkit/test_stress.py::test_x", "-x"]
    options, _ = parse(["--runs", "4", "--hogs", "2", "--run-timeout", "90", "--workers", "1"])
    assert (options.runs, options.hogs, options.run_timeout, options.workers) == (4, 2, 90.0, 1)
