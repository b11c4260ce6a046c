"""``.pt2`` archives: benign ones from torch.export.save still convert; hostile ones are refused
with a FormatError naming the member, before anything in them runs (each case in a limited child)."""

from __future__ import annotations

import builtins
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import rlx
from security import pt2_build as b
from security.isolate import run_cases, run_command

torch = pytest.importorskip("torch")

CHILDREN = os.path.join(os.path.dirname(__file__), "children.py")
TORCH_MEMORY = 12 << 30


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(2, 3, 3, padding=1)
        self.lin = torch.nn.Linear(3 * 4 * 4, 5)
        self.register_buffer("shift", torch.arange(5, dtype=torch.float32))
        self.scale = torch.tensor([0.5, 2.0, 1.0, -1.0, 3.0])  # a tensor constant

    def forward(self, x):
        h = torch.relu(self.conv(x)).reshape(x.shape[0], -1)
        return self.lin(h) * self.scale + self.shift


class Halves(torch.nn.Module):
    """A derived dim (2n): the archive holds symbolic expressions and guards_code."""

    def forward(self, x):
        n = x.shape[0]
        return x.reshape(n * 2, -1)[: n // 2 + 1].flatten()


def test_benign_archive_with_derived_dims_and_guards(tmp_path):
    x = torch.randn(6, 4)
    ep = torch.export.export(Halves(), (x,), dynamic_shapes=({0: torch.export.Dim("n", min=2, max=100) * 2},))
    path = str(tmp_path / "halves.pt2")
    torch.export.save(ep, path)
    doc = json.loads(b.members(path)["models/model.json"])
    assert doc["guards_code"] and "Symbol(" in json.dumps(doc)  # the checks below see both kinds
    module = rlx.torch.load_program(path).module()  # (torch cannot re-decompose a loaded derived dim)
    for xi in (x, torch.randn(10, 4)):
        np.testing.assert_array_equal(module(xi).numpy(), Halves()(xi).numpy())


@pytest.fixture(scope="module")
def benign(tmp_path_factory):
    torch.manual_seed(0)
    net = Net().eval()
    x = torch.randn(3, 2, 4, 4)
    batch = torch.export.Dim("batch", min=1, max=64)
    ep = torch.export.export(net, (x,), dynamic_shapes=({0: batch},))
    path = str(tmp_path_factory.mktemp("pt2") / "net.pt2")
    torch.export.save(ep, path)
    return path, net, x


def test_benign_archive_converts_and_matches_torch(benign):
    path, net, x = benign
    ep = rlx.torch.load_program(path)
    g, params = rlx.torch.import_program(ep)
    x5 = torch.randn(5, 2, 4, 4)  # another batch size: the dynamic dim survived
    (name,) = g.inputs()
    with torch.no_grad():
        for xi in (x, x5):
            (got,) = rlx.run(g, {name: xi.numpy()}, params)
            np.testing.assert_allclose(got, net(xi).numpy(), rtol=1e-5, atol=1e-5)


def test_benign_archive_with_pickled_tensor_weights(tmp_path):
    """torch.save-pickled weights / constants (use_pickle) with only tensor globals load fine."""
    lin = torch.nn.Linear(3, 2).eval()
    ep = torch.export.export(lin, (torch.randn(4, 3),))
    src = str(tmp_path / "lin.pt2")
    torch.export.save(ep, src)
    weights = b.members(src)
    cfg = json.loads(weights["data/weights/model_weights_config.json"])
    for fqn, entry in cfg["config"].items():
        entry["use_pickle"] = True
        tensor = torch.nn.Parameter(dict(lin.named_parameters())[fqn].detach().clone())
        buf = __import__("io").BytesIO()
        torch.save(tensor, buf)
        weights["data/weights/" + entry["path_name"]] = buf.getvalue()
    weights["data/weights/model_weights_config.json"] = json.dumps(cfg).encode()
    dst = b.write(str(tmp_path / "pickled.pt2"), weights, root=weights[""].decode())
    g, params = rlx.torch.import_program(rlx.torch.load_program(dst))
    x = torch.randn(4, 3)
    (got,) = rlx.run(g, {next(iter(g.inputs())): x.numpy()}, params)
    with torch.no_grad():
        np.testing.assert_allclose(got, lin(x).numpy(), rtol=1e-6, atol=1e-6)


# ------------------------------------------------------------------------------ hostile archives


def _hostile(benign_path: str, folder, marker: str) -> dict[str, tuple[str, list[str]]]:
    """label -> (file, fragments the FormatError must name); each payload would touch ``marker``."""
    cmd = f"touch {marker}"
    py = f"__import__('pathlib').Path({marker!r}).touch()"
    cases: dict[str, tuple[str, list[str]]] = {}

    def add(label, change, fragments, **kw):
        cases[label] = (b.rewrite(benign_path, str(folder / f"{label}.pt2"), change, **kw), fragments)

    def weight_pickle(data):
        def change(e):
            b.edit_json(e, "data/weights/model_weights_config.json", lambda d: d["config"]["conv.weight"].update(use_pickle=True))
            name = json.loads(e["data/weights/model_weights_config.json"])["config"]["conv.weight"]["path_name"]
            e["data/weights/" + name] = data
        return change

    def const_pickle(data):
        def change(e):
            b.edit_json(e, "data/constants/model_constants_config.json", lambda d: d["config"]["scale"].update(use_pickle=True))
            e["data/constants/" + json.loads(e["data/constants/model_constants_config.json"])["config"]["scale"]["path_name"]] = data
        return change

    def sample(data):
        return lambda e: e.update({"data/sample_inputs/model.pt": data})

    # --- pickles (class: code in a pickle)
    add("weight_os_system", weight_pickle(b.torch_save_with(b.payload(os.system, cmd))), ["weight_", "system"])
    add("weight_eval", weight_pickle(b.torch_save_with(b.payload(builtins.eval, py))), [".eval"])
    add("weight_subprocess", weight_pickle(b.torch_save_with(b.payload(subprocess.call, ["touch", marker]))), [".call"])
    add("weight_stack_global_dotted", weight_pickle(b.torch_save_with(b.stack_global_call("torch.serialization", "os.system", cmd))),
        ["torch.serialization.os.system"])
    add("weight_stack_global_memo", weight_pickle(b.torch_save_with(b.stack_global_call("os", "system", cmd, memo=True))), ["os.system"])
    add("weight_torch_lookalike", weight_pickle(b.torch_save_with(b.payload(__import__("torch")._utils._import_dotted_name, "os"))),
        ["torch._utils._import_dotted_name"])
    add("weight_raw_pickle", weight_pickle(b.payload(os.system, cmd)), ["not a zip"])
    add("weight_torchscript_zip", weight_pickle(b.torch_save_with(b.payload(os.system, cmd), {"constants.pkl": b"\x80\x02N."})),
        ["constants.pkl"])
    add("sample_inputs_eval", sample(b.torch_save_with(b.payload(builtins.eval, py, protocol=4))), ["sample_inputs", ".eval"])
    add("sample_inputs_raw", sample(b.payload(os.system, cmd)), ["sample_inputs", "not a zip"])
    add("constant_os_system", const_pickle(b.torch_save_with(b.payload(os.system, cmd))), ["tensor_", "system"])

    def opaque(e):
        b.edit_json(e, "data/constants/model_constants_config.json",
                    lambda d: d["config"]["scale"].update(path_name="opaque_obj_0", use_pickle=True))
        e["data/constants/opaque_obj_0"] = b.payload(os.system, cmd)
    add("constant_opaque_object", opaque, ["opaque_obj_0"])

    # --- the program JSON (class: code in the program)
    def expr(text):
        def change(e):
            raw = e["models/model.json"].decode()
            e["models/model.json"] = raw.replace("Symbol('s", text + " or Symbol('s", 1).encode()
        return change
    add("expr_import", expr(py), ["symbolic expression", "__import__"])
    add("expr_no_quotes", expr("eval(chr(49))"), ["symbolic expression", "eval"])
    add("expr_string_arg", expr("Max('1+1', 2)"), ["symbolic expression", "constant"])
    # --- the program JSON (class: unbounded evaluation before torch sees it)
    add("expr_power_tower", expr("9**9**9**9 + s0"), ["symbolic expression", "power"])
    add("expr_power_call_tower", expr("Pow(9, Pow(9, Pow(9, 9))) + s0"), ["symbolic expression", "power"])
    add("expr_power_nested_base", expr("((s0**64)**64)**64"), ["symbolic expression", "power of a power"])
    add("expr_symbolic_exponent", expr("2**s0"), ["symbolic expression", "exponent"])
    add("expr_huge_exponent", expr("s0**1000000000"), ["symbolic expression", "exponent"])
    add("expr_shift", expr("LShift(1, 1000000000)"), ["symbolic expression", "exponent"])
    add("expr_huge_literal", expr("9" * 4000 + " * s0"), ["symbolic expression", "literal"])
    binomials = "*".join(f"(s{i % 10}+s{(i + 1) % 10})" for i in range(24))
    add("expr_mod_expansion", expr(f"Mod({binomials}, 7)"), ["symbolic expression", "terms"])  # sympy expands it
    add("expr_mod_power_of_sum", expr("PythonMod((s0+s1+s2+s3)**64, 7)"), ["symbolic expression", "terms"])
    many = ",".join(f"s{i % 10}*{i}+{i}" for i in range(1200))  # sympy compares every pair: minutes
    add("expr_max_many_args", expr(f"Max({many})"), ["symbolic expression", "arguments"])

    def target(t):
        def change(e):
            b.edit_json(e, "models/model.json", lambda d: d["graph_module"]["graph"]["nodes"][0].update(target=t))
        return change
    add("target_os_system", target("torch.serialization.os.system"), ["node target", "os.system"])
    add("target_dunder", target("torch.ops.aten.__class__.__init__"), ["node target"])
    add("target_load_library", target("torch.ops.load_library"), ["node target"])
    def guards(code):
        return lambda e: b.edit_json(e, "models/model.json", lambda d: d.update(guards_code=["L['x'].size()[0] <= 64", code]))
    add("guards_code_import", guards(py), ["guards_code", "refused"])
    add("guards_code_no_dots", guards("eval(chr(49)) <= 1"), ["guards_code", "refused"])
    add("guards_code_attribute", guards("L['x'].__class__.__init__.__globals__ == 1"), ["guards_code", "__globals__"])
    add("guards_power_tower", guards("L['x'].size()[0] <= 9**9**9**9"), ["guards_code", "power"])
    add("json_deep", lambda e: e.update({"models/model.json": b"[" * 200_000 + b"]" * 200_000}), ["nested too deeply"])

    # --- the zip (class: structure)
    add("member_traversal", lambda e: e.update({"../../evil": b"x"}), ["not a plain relative path"])
    add("member_absolute", lambda e: e.update({"/etc/evil": b"x"}), ["not a plain relative path"], raw=frozenset({"/etc/evil"}))
    add("member_outside_root", lambda e: e.update({"other/models/x.json": b"{}"}), ["outside the archive's root"],
        raw=frozenset({"other/models/x.json"}))
    add("aotinductor_code", lambda e: e.update({"data/aotinductor/model/model.so": b"\x7fELF"}),
        ["aotinductor", "not part of an exported program"])
    add("legacy_format", lambda e: e.update({"version": b"8.20", "serialized_exported_program.json": b"{}"}), ["version"])
    add("zip_bomb_deflated", lambda e: e.update({"extra/bomb": bytes(64 << 20)}), ["compressed"], compress=frozenset({"extra/bomb"}))

    def huge_zeros(e):
        def edit(d):
            d["config"]["conv.weight"]["tensor_meta"]["sizes"] = [{"as_int": n} for n in (1 << 20, 1 << 20, 1 << 10, 1)]
        b.edit_json(e, "data/weights/model_weights_config.json", edit)
        e["data/weights/" + json.loads(e["data/weights/model_weights_config.json"])["config"]["conv.weight"]["path_name"]] = b""
    add("declared_huge_tensor", huge_zeros, ["exceeds max_tensor_bytes"])

    def oversized_view(e):
        b.edit_json(e, "data/weights/model_weights_config.json",
                    lambda d: d["config"]["conv.weight"]["tensor_meta"]["sizes"].__setitem__(0, {"as_int": 10_000}))
    add("declared_beyond_storage", oversized_view, ["needing", "stored tensor"])
    return cases


def _overlapping(benign_path: str, folder) -> str:
    path = b.rewrite(benign_path, str(folder / "overlap.pt2"), lambda e: None)
    b.patch_central_size(path, "models/model.json", 0xFFFFFF00)
    return path


def test_hostile_archives_are_refused_before_anything_runs(benign, tmp_path):
    marker = str(tmp_path / "PWNED")
    cases = _hostile(benign[0], tmp_path, marker)
    cases["central_directory_sizes"] = (_overlapping(benign[0], tmp_path), ["bytes"])
    fifo = str(tmp_path / "fifo.pt2")
    os.mkfifo(fifo)
    cases["fifo"] = (fifo, ["not a regular file"])
    cases["directory"] = (str(tmp_path), ["not a regular file"])
    labels = list(cases)
    outcomes = run_cases(CHILDREN, "rlx_load_program", [[cases[k][0]] for k in labels], wall=60)
    wrong = [(label, out) for label, out in zip(labels, outcomes)
             if not (out.exited and out.is_a("FormatError") and all(f in out.message for f in cases[label][1]))]
    assert not wrong, wrong
    assert not os.path.exists(marker), "a payload ran"


def test_limits_are_the_callers(benign, tmp_path):
    outcomes = run_cases(CHILDREN, "rlx_load_program", [[benign[0], {"max_items": 5}], [benign[0], {"max_total_bytes": 1000}],
                                                        [benign[0], {"max_document_bytes": 100}]])
    expect = ["max_items=5", "max_total_bytes=1000", "max_document_bytes=100"]
    for out, frag in zip(outcomes, expect):
        assert out.exited and out.is_a("FormatError") and frag in out.message, out


@pytest.mark.parametrize("label", ["weight_os_system", pytest.param("sample_inputs_eval", marks=pytest.mark.slow),
                                   pytest.param("expr_import", marks=pytest.mark.slow)])
def test_the_payloads_are_live_under_plain_torch_load(benign, tmp_path, label):
    """The same files do run code through torch.export.load: the refusals above are what stops them."""
    marker = str(tmp_path / "PWNED")
    path, _ = _hostile(benign[0], tmp_path, marker)[label]
    (out,) = run_cases(CHILDREN, "torch_export_load", [[path]], memory=TORCH_MEMORY)
    assert out.exited, out.how
    assert os.path.exists(marker), (label, out)


def test_cli_refuses_hostile_archives_in_one_line(benign, tmp_path):
    marker = str(tmp_path / "PWNED")
    cases = _hostile(benign[0], tmp_path, marker)
    env = {"PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    out = str(tmp_path / "o.rlx")
    for label, command in (("weight_os_system", ["inspect"]), ("sample_inputs_eval", ["convert", "-o", out]), ("expr_import", ["run"])):
        path = cases[label][0]
        res = run_command([sys.executable, "-m", "rlx.cli", command[0], path, *command[1:]], env=env, wall=120)
        lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
        assert res.returncode == 1, (label, command, res.returncode, res.stderr)
        assert len(lines) == 1 and lines[0].startswith("rlx: error: ") and os.path.basename(path) in lines[0], (label, res.stderr)
    assert not os.path.exists(marker) and not os.path.exists(out)
