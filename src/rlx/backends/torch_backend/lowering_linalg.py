"""torch lowerings of the factorization family (rlx.ops.linalg_decomp) and the complex parts
(rlx.ops.complex_parts): each op is the ``torch.linalg`` routine computing it (LAPACK / MAGMA / cuSOLVER,
so factors, pivots and Householder vectors follow the same LAPACK conventions as the reference).

Differences from the NumPy reference, by design: eigen- / singular vectors may differ by a sign per vector
(another LAPACK build; the decompositions they form are the same). A matrix the routine cannot factor
raises RlxError, as the reference does (torch's LinAlgError is translated).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from rlx.ir.errors import RlxError

Lowering = Callable[[list[Any], Any, Any], Any]
LOWERINGS: dict[str, Lowering] = {}


def register(lowering: Callable[[str], Callable[[Lowering], Lowering]]) -> None:
    """Add these lowerings to the torch table (called by :mod:`.lowering`, which owns it: no import cycle)."""
    for name, fn in LOWERINGS.items():
        lowering(name)(fn)


def _checked(name: str, fn: Lowering) -> None:
    def lower(args, attrs, out):
        try:
            return fn(args, attrs, out)
        except torch.linalg.LinAlgError as exc:
            raise RlxError(f"{name}: {str(exc).splitlines()[0]}") from None

    LOWERINGS[name] = lower


_checked("matrix_inverse", lambda args, attrs, out: torch.linalg.inv(args[0]))
_checked("det", lambda args, attrs, out: torch.linalg.det(args[0]))
_checked("slogdet", lambda args, attrs, out: tuple(torch.linalg.slogdet(args[0])))
_checked("cholesky", lambda args, attrs, out: torch.linalg.cholesky(args[0], upper=False).mT if attrs["upper"]
         else torch.linalg.cholesky(args[0]))
_checked("eigh", lambda args, attrs, out: torch.linalg.eigvalsh(args[0], UPLO="L" if attrs["lower"] else "U")
         if attrs["output"] == "values" else tuple(torch.linalg.eigh(args[0], UPLO="L" if attrs["lower"] else "U")))
_checked("eig", lambda args, attrs, out: torch.linalg.eigvals(args[0]) if attrs["output"] == "values"
         else tuple(torch.linalg.eig(args[0])))
_checked("svd", lambda args, attrs, out: torch.linalg.svdvals(args[0]) if attrs["output"] == "values"
         else tuple(torch.linalg.svd(args[0], full_matrices=attrs["full_matrices"])))
_checked("qr", lambda args, attrs, out: tuple(torch.linalg.qr(args[0], mode=attrs["mode"])))
_checked("geqrf", lambda args, attrs, out: tuple(torch.geqrf(args[0])))
_checked("householder_product", lambda args, attrs, out: torch.linalg.householder_product(*args))
_checked("ormqr", lambda args, attrs, out: torch.ormqr(args[0], args[1], args[2], left=attrs["left"], transpose=attrs["transpose"]))
_checked("lu_factor", lambda args, attrs, out: tuple(torch.linalg.lu_factor(args[0])))
_checked("lu_unpack", lambda args, attrs, out: tuple(torch.lu_unpack(args[0], args[1].to(torch.int32))))
_checked("lu_solve", lambda args, attrs, out: torch.linalg.lu_solve(args[0], args[1].to(torch.int32), args[2],
                                                                     left=attrs["left"], adjoint=attrs["adjoint"]))
_checked("solve_triangular", lambda args, attrs, out: torch.linalg.solve_triangular(
    *args, upper=attrs["upper"], left=attrs["left"], unitriangular=attrs["unitriangular"]))
_checked("ldl_factor", lambda args, attrs, out: tuple(torch.linalg.ldl_factor(args[0])))
_checked("ldl_solve", lambda args, attrs, out: torch.linalg.ldl_solve(args[0], args[1].to(torch.int32), args[2]))
_checked("matrix_exp", lambda args, attrs, out: torch.linalg.matrix_exp(args[0]))
_checked("complex", lambda args, attrs, out: torch.complex(*torch.broadcast_tensors(*args)))
_checked("view_as_real", lambda args, attrs, out: torch.view_as_real(args[0].resolve_conj()).clone())
_checked("view_as_complex", lambda args, attrs, out: torch.view_as_complex(args[0].contiguous()).clone())
