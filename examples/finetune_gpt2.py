"""Train a small GPT-2 (random init) on a toy task with rlx, and with torch for comparison.

The task: sequences that count up from a random start (mod the vocabulary); the model learns
to predict the next number. Both runs start from the same weights and see the same batches;
the two loss curves are drawn on one plot.

    python examples/finetune_gpt2.py --steps 300 --backend torch --plot curves.png

Needs torch, transformers, matplotlib (and jax for ``--backend jax``).
"""

from __future__ import annotations

import argparse
import copy
import time

import numpy as np


def build_model(vocab: int, seq: int, width: int, layers: int):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    class WithLoss(torch.nn.Module):
        """The language-model loss as the module's output (what rlx.compile_training trains)."""

        def __init__(self, lm):
            super().__init__()
            self.lm = lm

        def forward(self, ids):
            return self.lm(input_ids=ids, labels=ids).loss

    cfg = GPT2Config(vocab_size=vocab, n_positions=seq, n_embd=width, n_layer=layers, n_head=4,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)
    return WithLoss(GPT2LMHeadModel(cfg)).train()


def batches(steps: int, batch: int, seq: int, vocab: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [((rng.integers(0, vocab, (batch, 1)) + np.arange(seq)) % vocab).astype(np.int64) for _ in range(steps)]


def progress(iterable, total: int, desc: str):
    try:
        from tqdm import tqdm
    except ImportError:  # a plain counter without tqdm
        def plain():
            for i, item in enumerate(iterable):
                if i % max(total // 10, 1) == 0:
                    print(f"{desc}: step {i}/{total}", flush=True)
                yield item
        return plain()
    return tqdm(iterable, total=total, desc=desc)


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--backend", default="numpy", choices=["numpy", "jax", "torch"])
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=16)
    p.add_argument("--vocab", type=int, default=64)
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--plot", help="write the two loss curves to this image file (png, svg, pdf ...)")
    args = p.parse_args(argv)

    import torch

    import rlx

    torch.manual_seed(0)
    model = build_model(args.vocab, args.seq, args.width, args.layers)
    data = batches(args.steps, args.batch, args.seq, args.vocab)
    schedule = rlx.train.WarmupCosine(warmup=min(args.warmup, args.steps), total=args.steps, start_factor=0.1)

    # rlx: import the module with its loss, compile the training step, train
    t0 = time.perf_counter()
    graph, params = rlx.torch.import_module(copy.deepcopy(model), (torch.from_numpy(data[0]),))
    trainer = rlx.compile_training(graph, optimizer="adamw", lr=args.lr, params=params, backend=args.backend,
                                   schedule=schedule, clip_grad_norm=1.0)
    t1 = time.perf_counter()
    name = next(iter(graph.inputs()))
    rlx_losses = [trainer.step({name: ids}) for ids in progress(data, args.steps, f"rlx ({args.backend})")]
    t2 = time.perf_counter()

    # torch, same weights, batches, optimizer, schedule and clipping
    ref = copy.deepcopy(model)
    opt = torch.optim.AdamW(ref.parameters(), lr=args.lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule)
    torch_losses = []
    for ids in progress(data, args.steps, "torch"):
        opt.zero_grad()
        loss = ref(torch.from_numpy(ids))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(ref.parameters(), 1.0)
        opt.step()
        sched.step()
        torch_losses.append(loss.item())
    t3 = time.perf_counter()

    gap = max(abs(a - b) / abs(b) for a, b in zip(rlx_losses, torch_losses))
    print(f"rlx {args.backend}: compile {t1 - t0:.1f} s, {args.steps / (t2 - t1):.1f} steps/s; "
          f"torch eager: {args.steps / (t3 - t2):.1f} steps/s")
    print(f"loss {rlx_losses[0]:.3f} -> {rlx_losses[-1]:.4f} (torch {torch_losses[-1]:.4f}); "
          f"largest relative gap between the curves {gap:.1e}")
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 4))
        ax.plot(torch_losses, label="torch", linewidth=3, alpha=0.5)
        ax.plot(rlx_losses, label=f"rlx ({args.backend})", linewidth=1)
        ax.set_xlabel("step")
        ax.set_ylabel("LM loss")
        ax.set_yscale("log")
        ax.set_title("GPT-2 (random init) learning to count")
        ax.legend()
        fig.tight_layout()
        fig.savefig(args.plot)
        print(f"wrote {args.plot}")
    return {"rlx": rlx_losses, "torch": torch_losses}


if __name__ == "__main__":
    main()
