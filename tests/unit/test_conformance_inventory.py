"""The KAI conformance inventory (tests/scenarios/kai/cases.json, tests/scenarios/CONFORMANCE.md) agrees with the
scenario folders and with docs/differences.md.

Every KAI case has a scenario folder or a reason; every folder under tests/scenarios/kai belongs to a case; the
page's counts are the data's; a case kai deliberately decides otherwise on, or cannot express, is named in
docs/differences.md (nothing is left unexplained).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "tests" / "scenarios"
CASES = json.loads((SCENARIOS / "kai" / "cases.json").read_text())
PAGE = (SCENARIOS / "CONFORMANCE.md").read_text()
DIFFERENCES = (ROOT / "docs" / "differences.md").read_text()
KINDS = ("not expressible", "pending", "internal", "backend", "covered")


def test_every_case_has_a_scenario_or_a_reason() -> None:
    for case in CASES:
        assert case["line"] > 0, case  # the case is found in KAI's file
        if "scenario" in case:
            folder = SCENARIOS / case["scenario"]
            assert (folder / "cluster.yaml").is_file() and (folder / "expect.yaml").is_file(), case
        else:
            assert case["why"].split(":", 1)[0] in KINDS, case


def test_every_generated_folder_belongs_to_a_case() -> None:
    listed = {case["scenario"] for case in CASES if "scenario" in case}
    folders = {str(p.parent.relative_to(SCENARIOS)) for p in (SCENARIOS / "kai").glob("*/*/expect.yaml")}
    assert folders == listed


def test_the_page_lists_every_case_and_its_counts() -> None:
    rows = [line for line in PAGE.splitlines() if re.match(r"^\| \d+ \| ", line)]
    assert len(rows) == len(CASES)
    counts = dict(re.findall(r"(\w+)=(\d+)", re.search(r"<!-- counts: ([^>]*)-->", PAGE).group(1)))
    with_scenario = [c for c in CASES if "scenario" in c]
    assert int(counts["total"]) == len(CASES)
    assert int(counts["deliberate"]) == sum(1 for c in with_scenario if "deliberate" in c)
    assert int(counts["pass"]) == sum(1 for c in with_scenario if "deliberate" not in c)
    assert all(c.get("after") == "pass" for c in with_scenario)  # recorded when the page was written
    assert f"**{counts['expressible']}**" in PAGE


def test_deliberate_and_inexpressible_cases_are_in_differences_md() -> None:
    for case in CASES:
        if "deliberate" in case:
            assert case["name"] in DIFFERENCES, f"docs/differences.md does not name KAI's {case['name']!r}"
    for topic in ("DRA", "NUMA", "Pipelined in the input", "PersistentVolumeClaims"):
        assert topic.lower() in DIFFERENCES.lower(), topic
