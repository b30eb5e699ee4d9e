"""The shipped alert rules and dashboard, checked by the real tools: ``promtool check
rules`` on every stack's rules file, ``promtool test rules`` on the rules at their
shipped thresholds (each alert fires in one case and stays silent in another:
``tests/data/prometheus/alerts-test.yaml``), and the Grafana foundation SDK's strict
schema check on every stack's dashboard, plus two dashboards it must refuse."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from cluster.prometheus import promtool
from cluster.tools import find_tools
from kubetrain.constructs.monitoring import MonitoringProps, dashboard_file, rules_file
from kubetrain.constructs.operator import TrainingOperatorProps
from kubetrain.constructs.types import Image
from kubetrain.gitops.stack import load_stacks
from kubetrain.manifest import parse_yaml
from tests.conftest import REPO_ROOT

PROMTOOL_TESTS = REPO_ROOT / "tests" / "data" / "prometheus" / "alerts-test.yaml"
MONITORED = {name: s for name, s in load_stacks().items() if s.monitoring is not None}


def test_the_gpu_stacks_ship_monitoring() -> None:
    assert sorted(MONITORED) == ["a3-mega-tcpxo", "h100-infiniband", "p5-efa"]


@pytest.mark.parametrize("name", sorted(MONITORED))
def test_promtool_accepts_every_stacks_rules(name: str, tmp_path: Path) -> None:
    stack = MONITORED[name]
    assert stack.monitoring is not None
    path = tmp_path / "prometheus-rules.yaml"
    rules = rules_file(stack.monitoring, stack.operator)
    path.write_text(yaml.safe_dump(rules))
    checked = promtool("check", "rules", str(path))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # Every rule written, the nine alerts, is one promtool found.
    written = sum(len(group["rules"]) for group in rules["groups"])
    assert written == 9 and f"SUCCESS: {written} rules found" in checked.stdout


def test_promtool_unit_tests_of_every_alert_pass(tmp_path: Path) -> None:
    operator = TrainingOperatorProps(image=Image("ghcr.io/kubetrain/operator:0.1.0"))
    (tmp_path / "prometheus-rules.yaml").write_text(
        yaml.safe_dump(rules_file(MonitoringProps(), operator))
    )
    shutil.copy(PROMTOOL_TESTS, tmp_path / PROMTOOL_TESTS.name)
    ran = promtool("test", "rules", str(tmp_path / PROMTOOL_TESTS.name))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    # Every alert is tested, each both ways.
    tests = parse_yaml(PROMTOOL_TESTS.read_text())["tests"]
    names = {r["alert"] for r in rules_file(MonitoringProps(), operator)["groups"][0]["rules"]}
    fires = {c["alertname"] for t in tests for c in t["alert_rule_test"] if c["exp_alerts"]}
    silent = {c["alertname"] for t in tests for c in t["alert_rule_test"] if not c["exp_alerts"]}
    assert fires == names and silent == names


def test_a_wrong_expectation_fails_promtool(tmp_path: Path) -> None:
    """The unit tests can fail: the same file with one expected label changed does."""
    operator = TrainingOperatorProps(image=Image("ghcr.io/kubetrain/operator:0.1.0"))
    (tmp_path / "prometheus-rules.yaml").write_text(
        yaml.safe_dump(rules_file(MonitoringProps(), operator))
    )
    tests = parse_yaml(PROMTOOL_TESTS.read_text())
    wrong = copy.deepcopy(tests)
    wrong["tests"][0]["alert_rule_test"][1]["exp_alerts"][0]["exp_labels"]["severity"] = "info"
    (tmp_path / "wrong.yaml").write_text(yaml.safe_dump(wrong))
    ran = promtool("test", "rules", str(tmp_path / "wrong.yaml"))
    assert ran.returncode != 0
    assert "KubetrainOperatorDown" in ran.stdout + ran.stderr


def _dashboard_check(*paths: Path) -> subprocess.CompletedProcess[str]:
    binary = find_tools(only=("grafana",)).dashboard_check
    return subprocess.run(
        [str(binary), *map(str, paths)], capture_output=True, text=True, check=False
    )


def test_every_stacks_dashboard_passes_the_sdks_strict_schema_check(tmp_path: Path) -> None:
    paths = []
    for name, stack in sorted(MONITORED.items()):
        assert stack.monitoring is not None
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(dashboard_file(stack.monitoring, stack.operator)))
        paths.append(path)
    checked = _dashboard_check(*paths)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.count(": ok") == len(paths)


def test_the_checker_refuses_an_unknown_field_and_a_wrong_type(tmp_path: Path) -> None:
    operator = TrainingOperatorProps(image=Image("ghcr.io/kubetrain/operator:0.1.0"))
    good = dashboard_file(MonitoringProps(), operator)
    unknown = {**good, "refreshEvery": "30s"}
    wrong_type = {**good, "schemaVersion": "39"}
    (tmp_path / "unknown.json").write_text(json.dumps(unknown))
    (tmp_path / "wrong-type.json").write_text(json.dumps(wrong_type))
    checked = _dashboard_check(tmp_path / "unknown.json", tmp_path / "wrong-type.json")
    assert checked.returncode == 1
    out = checked.stdout + checked.stderr
    assert "refreshEvery" in out
    assert "schemaVersion" in out
