"""A small, real GPU training workload with known incidents, for a real capture.

Phases (all times are logged to ground-truth.json as UTC epoch seconds):

1. ``train``: matmul-heavy training steps on data already on the GPU (GPU busy).
2. ``checkpoint``: every ``--ckpt-every`` seconds a synchronous checkpoint: the model
   and optimizer state are copied to host memory and written with ``torch.save`` to
   local disk, then fsync'd. The GPU idles while the host writes (the classic stall).
3. ``loader``: a phase where batches are produced on the CPU by a slow, single-threaded
   "data loader" (numpy work per batch), so the GPU is starved by the CPU.

Run: ``python3 workload.py --seconds 150 --out /tmp/ckpt --truth ground-truth.json``.
Needs PyTorch with CUDA; this is not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np
import torch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=150)
    ap.add_argument("--ckpt-every", type=float, default=35)
    ap.add_argument(
        "--loader-at", type=float, default=95, help="start of the CPU-bound loader phase (s)"
    )
    ap.add_argument("--loader-for", type=float, default=25)
    ap.add_argument("--width", type=int, default=8192)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--out", default="/tmp/hindsight-ckpt")
    ap.add_argument("--truth", default="ground-truth.json")
    args = ap.parse_args()

    dev = torch.device("cuda")
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        *[torch.nn.Linear(args.width, args.width, dtype=torch.bfloat16) for _ in range(args.layers)]
    ).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x_gpu = torch.randn(4096, args.width, device=dev, dtype=torch.bfloat16)
    os.makedirs(args.out, exist_ok=True)
    events: list[dict[str, object]] = []
    t0 = time.time()
    next_ckpt = t0 + args.ckpt_every
    loader_start, loader_end = t0 + args.loader_at, t0 + args.loader_at + args.loader_for
    steps = 0
    rng = np.random.default_rng(0)

    def step(x: torch.Tensor) -> None:
        opt.zero_grad(set_to_none=True)
        loss = model(x).float().pow(2).mean()
        loss.backward()
        opt.step()

    while (now := time.time()) < t0 + args.seconds:
        if now >= next_ckpt:
            torch.cuda.synchronize()
            start = time.time()
            state = {
                "model": {k: v.detach().to("cpu") for k, v in model.state_dict().items()},
                "opt": opt.state_dict(),
                "step": steps,
            }
            path = os.path.join(args.out, "ckpt.pt")
            with open(path, "wb") as f:
                torch.save(state, f)
                f.flush()
                os.fsync(f.fileno())
            size = os.path.getsize(path)
            del state
            os.remove(path)
            end = time.time()
            events.append({"kind": "checkpoint_stall", "start": start, "end": end, "bytes": size})
            print(f"checkpoint {size / 1e9:.2f} GB in {end - start:.1f} s", flush=True)
            next_ckpt = time.time() + args.ckpt_every
        elif loader_start <= now < loader_end:
            # CPU-bound loader: heavy numpy work per batch on one thread, small batch.
            a = rng.standard_normal((1024, 2048), dtype=np.float32)
            for _ in range(6):
                a = np.tanh(a @ rng.standard_normal((2048, 2048), dtype=np.float32) / 45.0)
            batch = torch.from_numpy(np.resize(a, (512, args.width))).to(dev, dtype=torch.bfloat16)
            step(batch)
            torch.cuda.synchronize()
        else:
            step(x_gpu)
            if steps % 10 == 0:
                torch.cuda.synchronize()
        steps += 1
    torch.cuda.synchronize()
    events.append(
        {
            "kind": "gpu_starvation",
            "cause": "cpu_data_loader",
            "start": loader_start,
            "end": loader_end,
        }
    )
    truth = {
        "workload": "samples/gpu-capture/workload.py",
        "args": vars(args),
        "t0": t0,
        "end": time.time(),
        "steps": steps,
        "events": events,
    }
    with open(args.truth, "w") as f:
        json.dump(truth, f, indent=2)
    print(json.dumps(truth, indent=2))


if __name__ == "__main__":
    main()
