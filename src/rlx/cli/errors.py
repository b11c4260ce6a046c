"""The command line's errors: one-line user errors, usage errors, and a missing optional package named
with the extra that installs it (``rlx: error: <feature> needs <package>: pip install "rlx[<extra>]"``)."""

from __future__ import annotations

from typing import Any

from rlx.ir.errors import RlxError


class CliError(RlxError):
    """A user mistake the command line reports in one line."""


#: optional top-level modules -> (the package to install, the rlx extra that installs it)
OPTIONAL_PACKAGES: dict[str, tuple[str, str]] = {
    "onnx": ("onnx", "onnx"), "onnxruntime": ("onnxruntime", "onnx"), "torch": ("torch", "torch"),
    "jax": ("jax", "jax"), "jaxlib": ("jax", "jax"), "rich": ("rich", "viz"), "matplotlib": ("matplotlib", "viz"),
    "safetensors": ("safetensors", "safetensors"), "gguf": ("gguf", "gguf"), "openvino": ("openvino", "openvino"),
}


class MissingDependency(CliError):
    """An optional package a feature needs is not installed (``feature`` / ``package`` / ``extra``)."""

    def __init__(self, feature: str, module: str):
        package, extra = OPTIONAL_PACKAGES.get(module.split(".")[0], (module.split(".")[0], "all"))
        self.feature, self.package, self.extra = feature, package, extra
        super().__init__(f'{feature} needs {package}: pip install "rlx[{extra}]"')


def require(module: str, feature: str) -> Any:
    """Import ``module`` for ``feature``, or raise :class:`MissingDependency`."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        missing = (getattr(exc, "name", None) or module).split(".")[0]
        if missing not in OPTIONAL_PACKAGES and missing != module.split(".")[0]:
            raise
        raise MissingDependency(feature, missing) from None


class UsageError(Exception):
    """A malformed command line (exit status 2, like argparse's own errors)."""


def prefixed(exc: BaseException, path: str) -> BaseException:
    """``exc`` itself (class, attributes, chain kept) with its message prefixed by ``path``."""
    text = str(exc)
    if exc.args and isinstance(exc.args[0], str) and not text.startswith(path):
        exc.args = (f"{path}: {exc.args[0]}", *exc.args[1:])
    return exc
