"""Upstream rlx-ir's serde JSON: :mod:`.reader` (``rlx.from_upstream_json``) and :mod:`.writer`
(``rlx.to_upstream_json``)."""
