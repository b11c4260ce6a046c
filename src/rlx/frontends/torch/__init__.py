"""The torch.export reader (public as :mod:`rlx.torch`): :mod:`.importer` (ATen → MIR, with the
``convert_*`` modules registering the larger converter families) and :mod:`.pt2_archive` (the
``.pt2`` checker: nothing in an archive runs)."""
