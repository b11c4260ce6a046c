"""The ONNX format facts (rlx.ir.onnx_format) against the onnx package itself: the element-type
numbers and names of ``TensorProto``, the NumPy dtype onnx pairs with each number, and the first
opset whose ``Cast`` takes each newer type (``SINCE_OPSET``)."""

from __future__ import annotations

import numpy as np
import pytest

from rlx.ir.dtype import DType
from rlx.ir.errors import FormatError, RlxError
from rlx.ir.onnx_format import (
    ONNX_TO_RLX,
    ONNX_TYPE_NAMES,
    RLX_TO_ONNX,
    SINCE_OPSET,
    OnnxError,
    OnnxFormatError,
    OnnxLimitError,
    OnnxUnsupported,
    UnsupportedOpsError,
    onnx_dtype,
    rlx_dtype,
)

onnx = pytest.importorskip("onnx")


@pytest.mark.parametrize("number", sorted(ONNX_TYPE_NAMES))
def test_type_names_are_tensorproto_names(number):
    assert ONNX_TYPE_NAMES[number] == onnx.TensorProto.DataType.Name(number)


@pytest.mark.parametrize("number", sorted(ONNX_TO_RLX), ids=lambda n: ONNX_TYPE_NAMES[n])
def test_each_number_maps_to_the_numpy_dtype_onnx_uses(number):
    theirs = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(number))
    assert np.dtype(ONNX_TO_RLX[number].numpy) == theirs
    assert rlx_dtype(number) is ONNX_TO_RLX[number]
    assert onnx_dtype(ONNX_TO_RLX[number]) == number == RLX_TO_ONNX[ONNX_TO_RLX[number]]


def _cast_types(opset: int) -> set[str]:
    schema = onnx.defs.get_schema("Cast", opset)
    return {t for c in schema.type_constraints for t in c.allowed_type_strs}


@pytest.mark.parametrize("dtype", sorted(SINCE_OPSET, key=str), ids=str)
def test_since_opset_is_the_first_cast_taking_the_type(dtype):
    spelled = f"tensor({ONNX_TYPE_NAMES[RLX_TO_ONNX[dtype]].lower()})"
    since = SINCE_OPSET[dtype]
    assert spelled in _cast_types(since)
    assert spelled not in _cast_types(since - 1)


def test_unknown_types_raise_typed_errors_naming_the_type():
    with pytest.raises(OnnxUnsupported, match=r"node 'n': element type STRING"):
        rlx_dtype(onnx.TensorProto.STRING, "node 'n': ")
    with pytest.raises(OnnxUnsupported, match="element type 999"):
        rlx_dtype(999)
    for unmapped in [d for d in DType if d not in RLX_TO_ONNX][:1]:
        with pytest.raises(OnnxUnsupported, match=f"rlx dtype {unmapped}"):
            onnx_dtype(unmapped)


def test_error_hierarchy():
    assert issubclass(OnnxError, RlxError)
    assert issubclass(OnnxFormatError, FormatError) and issubclass(OnnxLimitError, OnnxFormatError)
    err = UnsupportedOpsError({"Foo": 2, "Bar": 1})
    assert isinstance(err, OnnxUnsupported) and err.counts == {"Foo": 2, "Bar": 1}
    assert "3 nodes" in str(err) and "Bar x1, Foo x2" in str(err)
