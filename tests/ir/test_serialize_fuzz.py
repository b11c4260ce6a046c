"""Fuzzing the loaders: mutated documents and payload files raise only FormatError / VerifyError,
each in under a second, without allocating memory for declared shapes.

``RLX_FUZZ_CASES`` sets the number of random cases (default 200; a profile run uses 2000+):
``RLX_FUZZ_CASES=2000 pytest tests/ir/test_serialize_fuzz.py``.
"""

from __future__ import annotations

import json
import os
import random
import time
import tracemalloc

import pytest
import serialize_samples as samples

import rlx

N_CASES = int(os.environ.get("RLX_FUZZ_CASES", "200"))
TIME_LIMIT_S = 1.0
DEEP = "[" * 100_000 + "]" * 100_000
HUGE_STRING = "x" * 10_000_000
WRONG_TYPES = [None, True, False, "x", "", 1.5, -1, 0, [], {}, [1, 2], {"a": 1}, "NaN", [[[]]], {"float": "NaN"}]
INTS = [-1, -(2**63) - 1, 0, 1, 2, 3, 7, 10**12, 2**63, 2**64, -(10**12), 10**400]


@pytest.fixture(scope="module")
def seeds():
    samples.probe_op()
    g = rlx.Graph("attn")
    x = g.input("x", (2, 4, "seq", 8), "bf16")
    w = g.param("w", (8, 8), "bf16")
    y = g.softmax(g.matmul(x, w), axis=-1)
    g.set_outputs([g.reduce(y, op="sum", axes=[1], keep_dim=True)])
    docs = [rlx.to_json(d) for d in (samples.mlp(), samples.nested(3), samples.chain(40), g)]
    yield [json.loads(t) for t in docs]
    samples.remove_probe_op()


def walk(node, path=()):
    """Every (container, key) slot in a JSON tree."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield node, k, (*path, k)
            yield from walk(v, (*path, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield node, i, (*path, i)
            yield from walk(v, (*path, i))


def mutate(doc: dict, rnd: random.Random) -> tuple[str, str]:
    """Apply one or more random mutations; return (document text, description)."""
    what = []
    special = None
    for _ in range(rnd.choice((1, 1, 1, 2, 3))):
        slots = list(walk(doc))
        parent, key, path = rnd.choice(slots)
        value = parent[key]
        kind = rnd.choice(("delete", "duplicate", "retarget", "wrong_type", "dims", "ids", "op", "string", "deep", "swap"))
        if kind == "delete":
            del parent[key]
        elif kind == "duplicate":
            if isinstance(parent, list):
                parent.insert(key, json.loads(json.dumps(value)))
            else:
                parent[f"{key}_dup" if rnd.random() < 0.5 else rnd.choice(["name", "id", "op", "attrs", "payload", "extra"])] = value
        elif kind == "retarget":
            if isinstance(value, int) and not isinstance(value, bool):
                parent[key] = rnd.choice(INTS)
            else:
                other_parent, other_key, _ = rnd.choice(slots)
                parent[key] = json.loads(json.dumps(other_parent[other_key]))
        elif kind == "wrong_type":
            parent[key] = rnd.choice(WRONG_TYPES)
        elif kind == "dims":
            shapes = [(p, k) for p, k, pa in slots if pa and pa[-1] == "shape" and isinstance(p[k], list)]
            if shapes:
                p, k = rnd.choice(shapes)
                p[k] = [10**12] * rnd.randint(1, 4) if rnd.random() < 0.7 else [10**12, "n", 2**62]
        elif kind == "ids":
            refs = [(p, k) for p, k, pa in slots if pa and pa[-1] in ("inputs", "outputs") and isinstance(p[k], list)]
            if refs:
                p, k = rnd.choice(refs)
                p[k] = [rnd.choice([-1, -5, 10 ** 6, 2 ** 63, len(p[k]) + 1, 999]), *p[k][1:]]
            else:
                parent[key] = -1
        elif kind == "op":
            ops = [(p, k) for p, k, pa in slots if pa and pa[-1] == "op"]
            if ops:
                p, k = rnd.choice(ops)
                p[k] = rnd.choice(["no_such_op", "__import__", "eval", "", "constant", "input", "matmul", samples.PROBE])
        elif kind == "string":
            parent[key] = "@@HUGE@@"
            special = "huge"
        elif kind == "deep":
            parent[key] = "@@DEEP@@"
            special = "deep"
        else:  # swap two sibling values
            if isinstance(parent, dict) and len(parent) > 1:
                k2 = rnd.choice(list(parent))
                parent[key], parent[k2] = parent[k2], parent[key]
        what.append(f"{kind}@{'/'.join(map(str, path))[:80]}")
    text = json.dumps(doc)
    if special == "huge":
        text = text.replace('"@@HUGE@@"', json.dumps(HUGE_STRING), 1)
    elif special == "deep":
        text = text.replace('"@@DEEP@@"', DEEP, 1)
    if rnd.random() < 0.15:
        cut = rnd.randrange(len(text))
        text = text[:cut]
        what.append(f"truncate@{cut}")
    return text, " ".join(what)


def check_one(load, describe):
    """Run ``load``; return a failure message or None."""
    tracemalloc.start()
    t0 = time.process_time()  # CPU time: what a hostile file costs, whatever else loads the machine
    try:
        load()
    except (rlx.FormatError, rlx.VerifyError):
        pass
    except Exception as exc:
        tracemalloc.stop()
        return f"{describe}: {type(exc).__name__}: {str(exc)[:300]}"
    elapsed = time.process_time() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    if elapsed > TIME_LIMIT_S:
        return f"{describe}: took {elapsed:.2f}s"
    if peak > 200 * 2**20:
        return f"{describe}: peak allocation {peak / 2**20:.0f} MiB"
    return None


def test_fuzz_documents(seeds):
    rnd = random.Random(20251129)
    failures = []
    for i in range(N_CASES):
        doc = json.loads(json.dumps(rnd.choice(seeds)))
        text, what = mutate(doc, rnd)
        failure = check_one(lambda t=text: rlx.from_json(t), f"case {i} ({what})")
        if failure:
            failures.append(failure)
    assert not failures, f"{len(failures)} of {N_CASES} cases failed:\n" + "\n".join(failures[:15])


def test_fuzz_saved_files(tmp_path, seeds):
    """Mutate the JSON and the safetensors sidecar of a saved file; rlx.load must stay safe."""
    path = tmp_path / "m.rlx"
    side = tmp_path / "m.rlx.safetensors"
    rlx.save(samples.mlp(), path, samples.mlp_params())
    good_json, good_side = path.read_bytes(), side.read_bytes()
    rnd = random.Random(7)
    failures = []
    for i in range(max(N_CASES // 4, 50)):
        js, sd, what = good_json, bytearray(good_side), []
        if rnd.random() < 0.5:
            text, desc = mutate(json.loads(good_json), rnd)
            js = text.encode()
            what.append(desc)
        for _ in range(rnd.randint(0 if what else 1, 3)):
            choice = rnd.choice(("flip", "truncate", "header_len", "header_text", "extend"))
            if choice == "flip" and sd:
                sd[rnd.randrange(len(sd))] ^= 1 << rnd.randrange(8)
            elif choice == "truncate":
                sd = sd[: rnd.randrange(len(sd) + 1)]
            elif choice == "header_len":
                sd[:8] = rnd.choice([2**63, 2**40, 0, 7, len(sd)]).to_bytes(8, "little")
            elif choice == "header_text":
                n = int.from_bytes(good_side[:8], "little")
                header = json.loads(good_side[8 : 8 + n])
                name = rnd.choice(sorted(k for k in header if k != "__metadata__"))
                field = rnd.choice(("dtype", "shape", "data_offsets"))
                header[name][field] = rnd.choice([[10**12, 10**12], "F64", [0, 10**15], [-8, 8], None, [2**62]])
                raw = json.dumps(header).encode()
                sd = bytearray(len(raw).to_bytes(8, "little") + raw + good_side[8 + n :])
            else:
                sd += b"\0" * rnd.randint(1, 64)
            what.append(choice)
        path.write_bytes(js)
        side.write_bytes(bytes(sd))
        failure = check_one(lambda: rlx.load(path), f"file case {i} ({' '.join(what)})")
        if failure:
            failures.append(failure)
    assert not failures, "\n".join(failures[:15])


def test_named_hostile_inputs(seeds):
    base = json.dumps(seeds[2])
    hostile = [
        DEEP,
        '{"format":"rlx-ir","version":1,"level":"mir","kind":"graph","name":' + json.dumps(HUGE_STRING)
        + ',"nodes":[],"outputs":[],"stage":"mir"}',
        '{"format":"rlx-ir","version":1,"level":"mir","kind":"graph","name":"g","stage":"mir","outputs":[0],"nodes":'
        '[{"id":0,"op":"constant","inputs":[],"shape":[1000000000000],"dtype":"f32",'
        '"attrs":{"value":{"dtype":"f32","shape":[1000000000000],"data":"AAAA"}}}]}',
        '{"format":"rlx-ir","version":1,"level":"mir","kind":"graph","name":"g","stage":"mir","outputs":[0],"nodes":'
        '[{"id":0,"op":"param","inputs":[],"shape":[1000000,1000000],"dtype":"f32",'
        '"attrs":{"name":"w","shape":[1000000,1000000],"dtype":"f32"}}]}',
        '{"format":"rlx-ir","version":1,"level":"mir","kind":"graph","name":"g","stage":"mir","outputs":[0],"nodes":'
        '[{"id":0,"op":"input","inputs":[],"shape":["n","n"],"dtype":"f32","attrs":{"name":"x","shape":['
        + "9" * 5000 + ',1],"dtype":"f32"}}]}',
        base.replace(f'"version": {rlx.ir.serialize.VERSION}', '"version": 99'),
        base[: len(base) // 2],
        base.replace('"stage": "mir"', '"stage": ' + DEEP, 1),
        "{" + '"a":' * 1 + "1" * 10**6 + "}",
    ]
    failures = [f for i, text in enumerate(hostile) if (f := check_one(lambda t=text: rlx.from_json(t), f"hostile {i}"))]
    assert not failures, "\n".join(failures)
    with pytest.raises(rlx.FormatError, match="newer than this rlx"):
        rlx.from_json(hostile[5])
