"""Credentials, loaded only the way the official ``kubernetes`` client loads them, and the
auth headers it would send (see :mod:`kubetrain.controller.kube`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kubernetes import client, config


def credential_loader(
    kubeconfig: str | None = None, context: str | None = None
) -> Callable[[], client.Configuration]:
    """A function that loads credentials the way the official client does (see
    ``KubeApi.connect``); called again after a 401."""

    def load() -> client.Configuration:
        configuration = client.Configuration()
        if kubeconfig or context:
            config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=kubeconfig, context=context, client_configuration=configuration
            )
            return configuration
        try:
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        except config.ConfigException as in_cluster:
            try:
                config.load_kube_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
            except config.ConfigException as from_file:
                raise config.ConfigException(
                    f"no credentials: not in a cluster ({in_cluster}) and no usable "
                    f"kubeconfig ({from_file}); pass --kubeconfig or set $KUBECONFIG"
                ) from from_file
        return configuration

    return load


def auth_headers(configuration: client.Configuration) -> dict[str, str]:
    """The auth headers the official client would send for ``configuration``.

    ``auth_settings()`` reads the bearer token wherever the loaders stored it
    (``api_key["BearerToken"]`` in client 37, ``api_key["authorization"]`` before) and
    runs ``refresh_api_key_hook`` first, which re-reads a rotated token file or renews an
    exec plugin's expired token. Client certificates are not headers: the connection
    pool presents them.
    """
    headers: dict[str, str] = {}
    settings: Mapping[str, Any] = dict(configuration.auth_settings())
    for setting in settings.values():
        value = setting.get("value")
        if setting.get("in") == "header" and value:
            headers[str(setting.get("key")).title()] = str(value)
    return headers
