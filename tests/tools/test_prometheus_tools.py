"""Prometheus, promtool and dashboard-check, each the real one built by ``make
cluster-tools``: Prometheus started by ``cluster.prometheus`` scrapes itself and a
``prometheus_client`` exporter, evaluates alerting rules and counts a labelled counter's
first increment (created-timestamp zero ingestion); promtool accepts a valid rules file
and names the parse error of an invalid one; dashboard-check accepts a valid dashboard
and names the unknown field or the wrong type of an invalid one."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry, Counter, start_http_server

from cluster.process import free_port
from cluster.prometheus import Prometheus, PrometheusError, duration, promtool
from cluster.tools import Tools, ToolsMissingError, find_tools
from kubetrain.manifest import parse_yaml
from tests.integration.kube import wait_for


@pytest.fixture(scope="module")
def tools() -> Tools:
    try:
        return find_tools(only=("prometheus", "grafana"))
    except ToolsMissingError as err:
        pytest.fail(str(err), pytrace=False)


def _rules_file(path: Path, rules: list[dict[str, Any]]) -> Path:
    path.write_text(
        yaml.safe_dump({"groups": [{"name": "kubetrain-test", "rules": rules}]}),
        encoding="utf-8",
    )
    return path


def _value(result: list[dict[str, Any]]) -> float | None:
    """The value of a one-series instant query result (None when there is no series)."""
    return float(result[0]["value"][1]) if len(result) == 1 else None


# Prometheus -----------------------------------------------------------------------------


def test_prometheus_scrapes_itself(tmp_path: Path, tools: Tools) -> None:
    with Prometheus(tmp_path / "prometheus", scrape_self=True, tools=tools) as prometheus:
        up = wait_for(
            lambda: prometheus.query('up{job="prometheus"}'),
            lambda result: _value(result) == 1.0,
            what="up{job='prometheus'} to be 1",
            timeout=30,
        )
        assert up[0]["metric"]["instance"] == prometheus.address
        [target] = prometheus.targets()
        assert target["health"] == "up" and target["labels"]["job"] == "prometheus"
        assert prometheus.address.startswith("127.0.0.1:")
        config = parse_yaml(prometheus.config_path.read_text(encoding="utf-8"))
        assert config["global"] == {"scrape_interval": "1s", "evaluation_interval": "1s"}
    assert not prometheus.is_running()
    assert (tmp_path / "prometheus" / "data").is_dir()


def test_alerting_rules_fire(tmp_path: Path, tools: Tools) -> None:
    rules = _rules_file(
        tmp_path / "rules.yml",
        [
            {
                "alert": "KubetrainTestAlwaysFiring",
                "expr": "vector(1) > 0",
                "labels": {"severity": "info"},
                "annotations": {"summary": "fires at the first evaluation"},
            }
        ],
    )
    with Prometheus(tmp_path / "prometheus", rule_files=[rules], tools=tools) as prometheus:
        alerts = wait_for(
            prometheus.alerts,
            lambda alerts: [a["state"] for a in alerts] == ["firing"],
            what="KubetrainTestAlwaysFiring to fire",
            timeout=30,
        )
    assert alerts[0]["labels"] == {"alertname": "KubetrainTestAlwaysFiring", "severity": "info"}
    assert alerts[0]["annotations"] == {"summary": "fires at the first evaluation"}


@pytest.fixture
def exporter() -> Iterator[tuple[str, Counter]]:
    """A prometheus_client exporter on 127.0.0.1 with one labelled counter, no series yet."""
    registry = CollectorRegistry()
    failures = Counter(
        "kubetrain_test_failures", "Failures by reason.", ["reason"], registry=registry
    )
    port = free_port()
    server, thread = start_http_server(port, addr="127.0.0.1", registry=registry)
    try:
        yield f"127.0.0.1:{port}", failures
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_counts_the_first_increment_of_a_labelled_counter(
    tmp_path: Path, tools: Tools, exporter: tuple[str, Counter]
) -> None:
    # The series appears already at 1; without created-timestamp zero ingestion every
    # sample Prometheus has of it is 1 and increase() stays 0.
    target, failures = exporter
    with Prometheus(tmp_path / "prometheus", targets=[target], tools=tools) as prometheus:
        wait_for(
            lambda: prometheus.query('up{job="kubetrain"}'),
            lambda result: _value(result) == 1.0,
            what="the exporter to be scraped",
            timeout=30,
        )
        failures.labels(reason="OOMKilled").inc()
        wait_for(
            lambda: prometheus.query("kubetrain_test_failures_total"),
            lambda result: _value(result) == 1.0,
            what="the counter's first sample",
            timeout=30,
        )
        # A few more scrapes: without the feature increase() would have stayed 0 by then.
        increase = wait_for(
            lambda: prometheus.query("increase(kubetrain_test_failures_total[1m])"),
            lambda result: (_value(result) or 0.0) > 0.0,
            what="increase() to count the first increment",
            timeout=10,
        )
    assert increase[0]["metric"]["reason"] == "OOMKilled"


def test_fails_to_start_with_promtools_error_for_an_invalid_rule(
    tmp_path: Path, tools: Tools
) -> None:
    rules = _rules_file(tmp_path / "rules.yml", [{"record": "bad", "expr": "sum(rate(x[5m])"}])
    prometheus = Prometheus(tmp_path / "prometheus", rule_files=[rules], tools=tools)
    with pytest.raises(PrometheusError, match=r"promtool check config .* failed") as raised:
        prometheus.start()
    assert "unclosed left parenthesis" in str(raised.value)
    assert not prometheus.is_running()


def test_rejects_a_query_prometheus_cannot_parse(tmp_path: Path, tools: Tools) -> None:
    with Prometheus(tmp_path / "prometheus", tools=tools) as prometheus:
        assert _value(prometheus.query("1 + 1")) == 2.0
        with pytest.raises(PrometheusError, match=r"bad_data: .*parse error"):
            prometheus.query("sum(")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({"targets": ["localhost"]}, r"'localhost' is not host:port", id="no-port"),
        pytest.param({"targets": [":9090"]}, r"':9090' is not host:port", id="no-host"),
        pytest.param({"scrape_interval": 0.0}, r"interval 0.0 s is not a positive", id="zero"),
        pytest.param(
            {"targets": ["127.0.0.1:1"], "job": "prometheus", "scrape_self": True},
            r"job 'prometheus' is the name scrape_self gives",
            id="job-clash",
        ),
    ],
)
def test_rejects_a_bad_setting(tmp_path: Path, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Prometheus(tmp_path, **kwargs)


def test_writes_intervals_as_prometheus_durations() -> None:
    assert [duration(1.0), duration(0.5), duration(90.0)] == ["1s", "500ms", "90s"]


# promtool -------------------------------------------------------------------------------


def test_promtool_checks_rules(tmp_path: Path, tools: Tools) -> None:
    valid = _rules_file(
        tmp_path / "valid.yml",
        [
            {
                "alert": "KubetrainJobsFailing",
                "expr": "increase(kubetrain_jobs_failed_total[10m]) > 0",
            }
        ],
    )
    checked = promtool("check", "rules", str(valid), tools=tools)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 1 rules found" in checked.stdout


def test_fails_promtool_check_rules_on_bad_promql(tmp_path: Path, tools: Tools) -> None:
    invalid = _rules_file(
        tmp_path / "invalid.yml",
        [
            {
                "alert": "KubetrainJobsFailing",
                "expr": "increase(kubetrain_jobs_failed_total[10m] > 0",
            }
        ],
    )
    checked = promtool("check", "rules", str(invalid), tools=tools)
    output = checked.stdout + checked.stderr
    assert checked.returncode == 1, output
    assert "FAILED" in output and "unclosed left parenthesis" in output, output


# dashboard-check ------------------------------------------------------------------------


def _dashboard() -> dict[str, Any]:
    return {
        "uid": "kubetrain-test",
        "title": "kubetrain test",
        "schemaVersion": 41,
        "templating": {"list": []},
        "annotations": {"list": []},
        "time": {"from": "now-1h", "to": "now"},
        "panels": [
            {
                "type": "timeseries",
                "title": "Failed jobs",
                "gridPos": {"h": 8, "w": 12, "x": 0, "y": 0},
                "datasource": {"type": "prometheus", "uid": "prometheus"},
                "targets": [
                    {
                        "refId": "A",
                        "expr": "sum(increase(kubetrain_jobs_failed_total[10m]))",
                        "datasource": {"type": "prometheus", "uid": "prometheus"},
                    }
                ],
                "fieldConfig": {"defaults": {"unit": "short"}, "overrides": []},
                # With the SDK's panel plugins registered, the timeseries panel's options
                # are checked strictly too: these are the fields its schema requires.
                "options": {
                    "legend": {
                        "showLegend": True,
                        "displayMode": "list",
                        "placement": "bottom",
                        "calcs": [],
                    },
                    "tooltip": {"mode": "multi", "sort": "none"},
                },
            }
        ],
    }


def _dashboard_check(tools: Tools, *paths: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(tools.dashboard_check), *map(str, paths)],
        capture_output=True,
        text=True,
        check=False,
    )


def _write(path: Path, dashboard: dict[str, Any]) -> Path:
    path.write_text(json.dumps(dashboard), encoding="utf-8")
    return path


def test_dashboard_check_accepts_a_valid_dashboard(tmp_path: Path, tools: Tools) -> None:
    valid = _write(tmp_path / "valid.json", _dashboard())
    checked = _dashboard_check(tools, valid)
    assert (checked.returncode, checked.stdout) == (0, f"{valid}: ok\n"), checked.stderr


def test_fails_dashboard_check_on_an_unknown_field(tmp_path: Path, tools: Tools) -> None:
    valid = _write(tmp_path / "valid.json", _dashboard())
    invalid = _write(tmp_path / "unknown.json", {**_dashboard(), "refreshEvery": "5s"})
    checked = _dashboard_check(tools, valid, invalid)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert checked.stdout.splitlines() == [
        f"{valid}: ok",
        f"{invalid}: Dashboard: unexpected field 'refreshEvery'",
    ]


def test_fails_dashboard_check_on_a_wrong_type(tmp_path: Path, tools: Tools) -> None:
    dashboard = _dashboard()
    dashboard["panels"][0]["gridPos"]["w"] = "half"
    invalid = _write(tmp_path / "wrong-type.json", dashboard)
    checked = _dashboard_check(tools, invalid)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    [line] = checked.stdout.splitlines()
    assert line.startswith(f"{invalid}: panels[0].gridPos.w: "), line
    assert "cannot unmarshal string" in line, line


def test_fails_dashboard_check_on_an_unknown_panel_option(tmp_path: Path, tools: Tools) -> None:
    dashboard = _dashboard()
    dashboard["panels"][0]["options"]["legend"]["showLegnd"] = True
    invalid = _write(tmp_path / "panel-option.json", dashboard)
    checked = _dashboard_check(tools, invalid)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert checked.stdout.splitlines() == [
        f"{invalid}: panels[0].options.legend.VizLegendOptions: unexpected field 'showLegnd'"
    ]
