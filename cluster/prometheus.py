"""A real Prometheus, for tests and demos of metrics and alerting rules.

``Prometheus(workdir, targets=[...]).start()`` (or ``with Prometheus(...) as prometheus:``)
runs the Prometheus server that ``make cluster-tools`` builds, as a local process:

1. writes ``prometheus.yml`` into the work directory (one static scrape job for the
   ``targets``, optionally a ``prometheus`` job scraping Prometheus itself, and the rule
   files) and checks it with ``promtool check config``, which checks the rule files too;
2. starts the server on a free port of 127.0.0.1 (nothing else: it serves no other port),
   with its TSDB in ``<workdir>/data`` and its log in ``<workdir>/prometheus.log``, and
   waits until ``/-/ready`` answers;
3. answers PromQL queries, the alerts of its rules and its scrape targets from its HTTP
   API; ``stop()`` ends it (SIGTERM, then SIGKILL after a timeout).

It runs with ``--enable-feature=created-timestamp-zero-ingestion``: a counter series that
first appears already incremented (a labelled counter is created by its first ``inc()``)
then starts from a zero sample at its ``_created`` time, so ``increase()`` and ``rate()``
count that first increment, as alerting rules on failures need. ``promtool(*args)`` runs
promtool itself (``check rules``, ``test rules``, ...).
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from cluster.process import LocalProcess, ProcessError, free_port, wait_http_ok
from cluster.tools import Tools, find_tools

PROCESS_NAME = "prometheus"
#: The job that scrapes Prometheus itself (``scrape_self``), as upstream's example
#: configuration names it.
SELF_JOB = "prometheus"
#: What ``start()`` passes to ``--enable-feature`` (see the module docstring).
FEATURES = ("created-timestamp-zero-ingestion",)


class PrometheusError(RuntimeError):
    """Prometheus could not be configured, started, queried or stopped."""


def promtool(
    *args: str, tools: Tools | None = None, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``promtool args...`` and return its result (not checked: look at ``returncode``,
    ``stdout`` and ``stderr``). Raises ``ToolsMissingError`` when it is not built."""
    binary = (tools or find_tools(only=("prometheus",))).promtool
    return subprocess.run(
        [str(binary), *args], input=input, capture_output=True, text=True, check=False
    )


def duration(seconds: float) -> str:
    """``seconds`` as a Prometheus duration (``15s``, ``500ms``)."""
    millis = round(seconds * 1000)
    if millis <= 0 or abs(millis - seconds * 1000) > 1e-6:
        raise ValueError(
            f"interval {seconds!r} s is not a positive whole number of milliseconds: "
            "use e.g. 1.0 or 0.5"
        )
    return f"{millis // 1000}s" if millis % 1000 == 0 else f"{millis}ms"


def _check_target(target: str) -> None:
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"scrape target {target!r} is not host:port: use e.g. '127.0.0.1:8080'")


def prometheus_config(
    *,
    jobs: dict[str, Sequence[str]],
    scrape_interval: float,
    evaluation_interval: float,
    rule_files: Sequence[Path] = (),
) -> dict[str, Any]:
    """A ``prometheus.yml`` with one static scrape job per entry of ``jobs`` (job name to
    ``host:port`` targets, scraped at ``/metrics`` over HTTP) and the ``rule_files``
    (made absolute, so the file may be checked and read from anywhere)."""
    for targets in jobs.values():
        for target in targets:
            _check_target(target)
    return {
        "global": {
            "scrape_interval": duration(scrape_interval),
            "evaluation_interval": duration(evaluation_interval),
        },
        "rule_files": [str(Path(path).resolve()) for path in rule_files],
        "scrape_configs": [
            {"job_name": job, "static_configs": [{"targets": list(targets)}]}
            for job, targets in jobs.items()
        ],
    }


class Prometheus:
    """A Prometheus server in ``workdir`` scraping ``targets`` as job ``job``.

    ``scrape_self`` adds the job ``prometheus`` scraping this server's own metrics.
    ``scrape_interval`` defaults to 1 s so that tests see a change within a scrape or two;
    ``evaluation_interval`` (of the ``rule_files``' rules) defaults to the scrape interval.
    The tools default to those ``make cluster-tools`` built (``ToolsMissingError`` when
    they are not).
    """

    def __init__(
        self,
        workdir: Path,
        *,
        targets: Sequence[str] = (),
        job: str = "kubetrain",
        scrape_self: bool = False,
        scrape_interval: float = 1.0,
        evaluation_interval: float | None = None,
        rule_files: Sequence[Path] = (),
        tools: Tools | None = None,
    ) -> None:
        if not job:
            raise ValueError("job must be a non-empty job name: e.g. 'kubetrain'")
        if scrape_self and job == SELF_JOB and targets:
            raise ValueError(
                f"job {job!r} is the name scrape_self gives Prometheus's own job: "
                "name the targets' job differently"
            )
        for target in targets:
            _check_target(target)
        duration(scrape_interval)
        if evaluation_interval is not None:
            duration(evaluation_interval)
        self.workdir = workdir
        self.scrape_targets = tuple(targets)
        self.job = job
        self.scrape_self = scrape_self
        self.scrape_interval = scrape_interval
        self.evaluation_interval = evaluation_interval or scrape_interval
        self.rule_files = tuple(rule_files)
        self._tools = tools
        self.port: int | None = None
        self.process = LocalProcess(
            PROCESS_NAME,
            pid_file=workdir / f"{PROCESS_NAME}.pid",
            log_file=workdir / f"{PROCESS_NAME}.log",
        )

    @property
    def tools(self) -> Tools:
        if self._tools is None:
            self._tools = find_tools(only=("prometheus",))
        return self._tools

    @property
    def config_path(self) -> Path:
        return self.workdir / "prometheus.yml"

    @property
    def data_dir(self) -> Path:
        return self.workdir / "data"

    @property
    def log_file(self) -> Path:
        return self.process.log_file

    @property
    def address(self) -> str:
        """``127.0.0.1:<port>`` of the running server (also its own scrape target)."""
        if self.port is None:
            raise PrometheusError("Prometheus has not been started: call start() first")
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.address}"

    def is_running(self) -> bool:
        return self.process.is_running()

    def config(self, port: int) -> dict[str, Any]:
        """The configuration ``start()`` writes for a server listening on ``port``."""
        jobs: dict[str, Sequence[str]] = {}
        if self.scrape_targets:
            jobs[self.job] = self.scrape_targets
        if self.scrape_self:
            jobs[SELF_JOB] = [f"127.0.0.1:{port}"]
        return prometheus_config(
            jobs=jobs,
            scrape_interval=self.scrape_interval,
            evaluation_interval=self.evaluation_interval,
            rule_files=self.rule_files,
        )

    def start(self, *, timeout: float = 60.0) -> None:
        """Write and check the configuration, start the server, return once it is ready.

        Raises ``PrometheusError`` with promtool's output when the configuration or a
        rule file is invalid, and with the log tail when the server exits or is not
        ready within ``timeout`` seconds (it is stopped then).
        """
        if self.is_running():
            raise PrometheusError(
                f"Prometheus already runs in {self.workdir} (pid {self.process.pid}): stop it first"
            )
        # Before the deadline starts: under make test, finding the tools may wait for a build.
        _ = self.tools
        deadline = time.monotonic() + timeout
        port = free_port()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(
            yaml.safe_dump(self.config(port), sort_keys=False), encoding="utf-8"
        )
        checked = promtool("check", "config", str(self.config_path), tools=self.tools)
        if checked.returncode != 0:
            raise PrometheusError(
                f"promtool check config {self.config_path} failed "
                f"(exit {checked.returncode}):\n{(checked.stdout + checked.stderr).strip()}"
            )
        self.port = port
        command = [
            str(self.tools.prometheus),
            f"--web.listen-address={self.address}",
            f"--storage.tsdb.path={self.data_dir}",
            f"--config.file={self.config_path}",
            f"--enable-feature={','.join(FEATURES)}",
        ]
        try:
            # In the work directory: without its built-in UI assets Prometheus looks for
            # them relative to where it runs.
            self.process.start(command, cwd=self.workdir)
        except ProcessError as err:
            raise PrometheusError(str(err)) from err
        try:
            self._wait_ready(deadline)
        except BaseException:
            self.stop()
            raise

    def _fail(self, message: str) -> PrometheusError:
        return PrometheusError(f"{message}\n{self.process.log_tail(40)}")

    def _wait_ready(self, deadline: float) -> None:
        wait_http_ok(self.process, "Prometheus", f"{self.url}/-/ready", deadline, self._fail)

    def _api(self, path: str, **params: str) -> Any:
        """The ``data`` of a Prometheus HTTP API answer; ``PrometheusError`` on an error."""
        url = f"{self.url}/api/v1/{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                body = json.loads(response.read())
        except urllib.error.HTTPError as err:
            # Bad queries come back as 4xx with the error in the usual JSON envelope.
            text = err.read().decode(errors="replace")
            try:
                body = json.loads(text)
            except ValueError:
                raise PrometheusError(f"GET {url}: HTTP {err.code}: {text[:500]}") from err
        except OSError as err:
            raise PrometheusError(f"GET {url}: {err}") from err
        if body.get("status") != "success":
            raise PrometheusError(
                f"GET {url}: {body.get('errorType', 'error')}: {body.get('error', body)}"
            )
        return body["data"]

    def query(self, promql: str) -> list[dict[str, Any]]:
        """The result of an instant query now: one ``{"metric": {...}, "value": [time,
        "value"]}`` per series (a matrix's have ``"values"``); a scalar or string result
        is one such dict with empty ``metric``."""
        data = self._api("query", query=promql)
        if data["resultType"] in ("scalar", "string"):
            return [{"metric": {}, "value": data["result"]}]
        result: list[dict[str, Any]] = data["result"]
        return result

    def alerts(self) -> list[dict[str, Any]]:
        """The pending and firing alerts of the rules (``/api/v1/alerts``): ``labels``,
        ``annotations``, ``state``, ``activeAt``, ``value``."""
        alerts: list[dict[str, Any]] = self._api("alerts")["alerts"]
        return alerts

    def targets(self) -> list[dict[str, Any]]:
        """The active scrape targets (``/api/v1/targets``): ``labels``, ``scrapeUrl``,
        ``health`` (``up``, ``down``, ``unknown``), ``lastError``, ..."""
        targets: list[dict[str, Any]] = self._api("targets", state="active")["activeTargets"]
        return targets

    def stop(self, *, timeout: float = 15.0) -> bool:
        """Stop the server (SIGTERM, SIGKILL after ``timeout`` seconds); return whether it
        ran. The work directory (configuration, data, log) stays."""
        try:
            return self.process.stop(timeout=timeout)
        except ProcessError as err:
            raise PrometheusError(str(err)) from err

    def __enter__(self) -> Prometheus:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
