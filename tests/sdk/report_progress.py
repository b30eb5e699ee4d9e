"""Report progress as a training function does, with the Kubeflow SDK's own
``update_trainjob_status``, from the environment a trainer pod has
(``KUBEFLOW_TRAINER_SERVER_URL``, ``..._CA_CERT``, ``..._TOKEN``).

``python -m tests.sdk.report_progress <percent> <eta seconds> <name=value>...`` prints
``{"sent": true|false, "log": [...]}`` (the SDK's own log lines say why it was not sent).
"""

from __future__ import annotations

import json
import logging
import sys

from kubeflow.trainer.backends.kubernetes.utils import update_trainjob_status


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def main(argv: list[str]) -> int:
    lines = _Lines()
    logging.getLogger("kubeflow").addHandler(lines)
    logging.getLogger("kubeflow").setLevel(logging.DEBUG)
    metrics = dict(item.split("=", 1) for item in argv[2:])
    sent = update_trainjob_status(int(argv[0]), int(argv[1]), metrics or None)
    print(json.dumps({"sent": sent, "log": lines.lines}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
