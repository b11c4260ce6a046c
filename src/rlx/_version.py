"""The package version, in a leaf module so that any layer may read it (``rlx.__version__``)."""

__version__ = "0.1.0"
