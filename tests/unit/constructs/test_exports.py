"""Every public construct (and its props) is exported from an index: the package's, or
the one of its family (queues, monitoring, samples), as kubetrain.constructs says."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from dataclasses import is_dataclass

import constructs

import kubetrain.constructs as package

FAMILIES = ("queues", "monitoring", "samples")
#: Bases and machinery, not constructs a stack makes: the runtime constructs' and the
#: samples' bases, the job constructs' shared props, and the ApiObject the constructs emit.
NOT_EXPORTED = ("RuntimeConstruct", "SampleProps", "JobMetaProps", "JobProps", "HeldApiObject")


def _public_classes() -> dict[str, tuple[str, type]]:
    found: dict[str, tuple[str, type]] = {}
    for info in pkgutil.walk_packages(package.__path__, prefix=f"{package.__name__}."):
        module = importlib.import_module(info.name)
        for name, value in inspect.getmembers(module, inspect.isclass):
            if name.startswith("_") or value.__module__ != module.__name__:
                continue
            is_construct = issubclass(value, constructs.Construct)
            is_props = is_dataclass(value) and name.endswith("Props")
            if is_construct or is_props:
                found[name] = (module.__name__, value)
    return found


def _index_of(module: str) -> str:
    rest = module.removeprefix(f"{package.__name__}.")
    family = rest.split(".")[0]
    return f"{package.__name__}.{family}" if family in FAMILIES else package.__name__


def test_every_public_construct_and_props_is_exported_from_its_index() -> None:
    classes = _public_classes()
    for name in NOT_EXPORTED:
        assert classes.pop(name, None) is not None, f"{name} is gone: drop it from NOT_EXPORTED"
    assert len(classes) > 30, sorted(classes)
    missing = []
    for name, (module, value) in sorted(classes.items()):
        index = importlib.import_module(_index_of(module))
        if getattr(index, name, None) is not value or name not in index.__all__:
            missing.append(f"{name} ({module}) not in {index.__name__}.__all__")
    assert missing == []


def test_the_package_index_names_only_what_it_imports_and_each_once() -> None:
    assert [name for name in package.__all__ if not hasattr(package, name)] == []
    assert len(set(package.__all__)) == len(package.__all__)
