"""Drivers for Kubeflow's Python SDKs, run by the SDK virtualenv's interpreter (they
import only the SDKs and the standard library): the tests call them through
:func:`tests.integration.sdk.run_sdk` and read the JSON they print."""
