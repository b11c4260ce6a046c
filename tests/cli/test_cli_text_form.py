"""One text syntax: `inspect --text` prints exactly str(graph), which reads back as an input
file; parse errors name the file; a GraphModule / LirModule saved with rlx.save is read by
every command; -o naming a directory is a clean error."""

from __future__ import annotations

import numpy as np
import pytest

import rlx

from .conftest import assert_one_line_error, hir_module, mlp_graph, reference_output, run_cli


def test_text_form_is_str_of_the_graph_and_reads_back(files, tmp_path):
    res = run_cli("inspect", "--text", files["mlp"])
    assert res.rc == 0, res.err
    assert res.out.rstrip("\n") == str(mlp_graph())
    text = tmp_path / "mlp.txt"
    text.write_text(res.out)
    again = run_cli("inspect", "--text", text)
    assert again.rc == 0 and again.out == res.out
    out = tmp_path / "o.npz"  # the text form has no weights: give them as --param
    ps = []
    for name, arr in files["params"].items():
        np.save(tmp_path / f"{name}.npy", arr)
        ps += ["--param", f"{name}={tmp_path / (name + '.npy')}"]
    assert run_cli("run", text, "-i", f"x={files['x']}", *ps, "-o", out).rc == 0
    with np.load(out) as z:
        np.testing.assert_allclose(z["output_0"], reference_output(files), rtol=1e-5, atol=1e-6)


def test_parse_error_names_the_file(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text('graph @"g" mir {\n  %0 = input {dtype="f32", name="x", shape=[2]} : [2] f32 name="x"\n  %1 = nosuchop(%0)\n')
    res = run_cli("inspect", bad)
    assert_one_line_error(res, "bad.txt", "line 3")


def test_corrupt_rlx_error_names_the_file(tmp_path):
    bad = tmp_path / "broken.rlx"
    bad.write_bytes(b'{"format": "something-else"}')
    assert_one_line_error(run_cli("plan", bad), "broken.rlx", "format")


@pytest.mark.parametrize("save_as", ["module", "lir"])
def test_every_saved_object_is_read(files, tmp_path, save_as):
    m = hir_module()
    obj = m if save_as == "module" else rlx.plan(m.lower_to_mir())
    path = tmp_path / f"{save_as}.rlx"
    rlx.save(obj, path, params=files["params"])
    res = run_cli("inspect", path, env={"RLX_PLAIN": "1"})
    assert res.rc == 0, res.err
    assert ("HIR" if save_as == "module" else "LIR") in res.out
    out = tmp_path / "o.npz"
    assert run_cli("run", path, "-i", f"x={files['x']}", "-o", out).rc == 0
    (want,) = rlx.run(m.lower_to_mir(), {"x": np.load(files["x"])}, files["params"])
    with np.load(out) as z:
        np.testing.assert_allclose(z["output_0"], want, rtol=1e-5, atol=1e-6)
    if save_as == "module":
        opt = tmp_path / "opt.rlx"
        assert run_cli("optimize", path, "-o", opt).rc == 0
        assert rlx.load(opt).stage is rlx.GraphStage.MIR


def test_output_naming_a_directory_is_a_clean_error(files, tmp_path):
    for argv in (("optimize", files["mlp"], "-o", tmp_path), ("plan", files["mlp"], "-o", tmp_path),
                 ("draw", files["mlp"], "-o", tmp_path)):
        res = run_cli(*argv)
        assert_one_line_error(res, str(tmp_path), "is a directory")
        assert ".tmp-" not in res.err
    assert [p.name for p in tmp_path.iterdir()] == []


def test_scalar_param_written_by_commands_loads(tmp_path):
    """The 0-d weight bug: convert / optimize / plan wrote .rlx files that rlx.load refused."""
    g = rlx.Graph("scalar")
    x = g.input("x", (3,))
    g.set_outputs([x * g.param("s", ())])
    src = tmp_path / "s.rlx"
    rlx.save(g, src, params={"s": np.float32(3.0)})
    for cmd in (("optimize", src, "-o", tmp_path / "o.rlx"), ("plan", src, "-o", tmp_path / "p.rlx")):
        res = run_cli(*cmd)
        assert res.rc == 0, res.err
        _, params = rlx.load(cmd[-1], with_params=True)
        assert params["s"].shape == () and params["s"] == np.float32(3.0)
