"""The IR core: dtypes, shapes, the op registry, graphs, verification and the text form."""
