"""The torch.export reader (public as :mod:`rlx.torch`): :mod:`.importer` (export, decompose, walk the
graph signature), :mod:`.context` (errors, the converter registry, the conversion context), the
``convert_*`` modules (ATen → MIR converters by family, registering into the registry on import) and
:mod:`.pt2_archive` (the ``.pt2`` checker: nothing in an archive runs)."""
