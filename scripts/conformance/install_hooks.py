"""Add the dump hook to a checkout of KAI Scheduler, so that its action tests write what kai_cases.py reads.

    install_hooks.py KAI_CHECKOUT

Copies go/dump_hook.go into pkg/scheduler/test_utils and go/subgroup_dump_json.go into
pkg/scheduler/api/podgroup_info/subgroup_info (JSON for the subgroup tree, whose fields are unexported), and adds
three calls: DumpTopology in test_utils.BuildSession and in integration_tests_utils.RunTest, DumpResult in
test_utils.MatchExpectedAndRealTasks. Nothing changes what KAI's tests do; without KAI_DUMP set the hook is silent.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

HERE = Path(__file__).parent / "go"
EDITS = (
    (
        "pkg/scheduler/test_utils/test_utils_builder.go",
        "\tconfig := buildSchedulerConfiguration(testMetadata)\n",
        '\tDumpTopology("session", testMetadata, config, nil)\n',
    ),
    (
        "pkg/scheduler/test_utils/test_utils.go",
        "func MatchExpectedAndRealTasks(t *testing.T, testNumber int, testMetadata TestTopologyBasic, "
        "ssn *framework.Session) {\n",
        "\tDumpResult(testMetadata.Name, ssn)\n",
    ),
    (
        "pkg/scheduler/actions/integration_tests/integration_tests_utils/integration_tests_utils.go",
        "\tvar ssn *framework.Session\n\n\trunRoundsUntilMatch",
        '\ttest_utils.DumpTopology("integration", testMetadata.TestTopologyBasic, nil, map[string]any{'
        '"RoundsUntilMatch": testMetadata.RoundsUntilMatch, "RoundsAfterMatch": testMetadata.RoundsAfterMatch, '
        '"Name": testMetadata.Name})\n',
    ),
)


def main() -> None:
    kai = Path(sys.argv[1])
    shutil.copy(HERE / "dump_hook.go", kai / "pkg/scheduler/test_utils/dump_hook.go")
    shutil.copy(HERE / "subgroup_dump_json.go", kai / "pkg/scheduler/api/podgroup_info/subgroup_info/dump_json.go")
    for rel, anchor, line in EDITS:
        path = kai / rel
        text = path.read_text()
        if line in text:
            continue
        if anchor not in text:
            sys.exit(f"{rel}: the line to hook after is not there; KAI's harness changed")
        if anchor.endswith("runRoundsUntilMatch"):  # insert before the rounds, after the declaration
            text = text.replace(anchor, anchor.replace("\n\n", "\n" + line + "\n", 1), 1)
        else:
            text = text.replace(anchor, anchor + line, 1)
        path.write_text(text)


if __name__ == "__main__":
    main()
