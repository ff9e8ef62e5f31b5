#!/usr/bin/env python3
"""PyTorch peer for bench/resilience: plain DistributedDataParallel (gloo) under srun, the same
CIFAR ResNet-20 on random 16x16 images, batch 8 per rank, one thread; srun's variables give the
rank (SLURM_PROCID, SLURM_NTASKS), MASTER_ADDR and MASTER_PORT the store. Rank 0 prints
"step N" after every step. There is no recovery to measure: when a node is lost the survivors
wait in the collective until torch's timeout (30 min by default) or until Slurm ends the job.
"""
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                                "python"))
from reference_models import build  # noqa: E402

torch.set_num_threads(1)
rank, world = int(os.environ["SLURM_PROCID"]), int(os.environ["SLURM_NTASKS"])
dist.init_process_group("gloo", rank=rank, world_size=world)
torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(build("resnet20", 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
g = torch.Generator().manual_seed(rank)
for step in range(1, int(os.environ.get("PEER_STEPS", "100000")) + 1):
    x = torch.randn(8, 3, 16, 16, generator=g)
    y = torch.randint(0, 10, (8,), generator=g)
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()
    if rank == 0:
        print(f"step {step} {time.time():.3f}", flush=True)
