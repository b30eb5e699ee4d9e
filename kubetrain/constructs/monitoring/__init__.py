"""Monitoring for the kubetrain operator: alert rules, a Grafana dashboard, and the
construct that ships them with a ServiceMonitor."""

from kubetrain.constructs.monitoring.alerts import AlertThresholds
from kubetrain.constructs.monitoring.construct import (
    MonitoringProps,
    OperatorMonitoring,
    dashboard_file,
    rules_file,
    scrape_job,
)

__all__ = [
    "AlertThresholds",
    "MonitoringProps",
    "OperatorMonitoring",
    "dashboard_file",
    "rules_file",
    "scrape_job",
]
