"""Trains a golden kit's configuration in plain PyTorch (single process, DDP over gloo, or
a tensor-parallel MLP simulated in one process), writes the results golden verify reads
and judges them with ptsuite_golden.verify.

  python3 train.py KIT OUT [--variant single|ddp|tp2] [--dtype float64|float32]
                           [--init kit|regen] [--bug none|ddp-sum|tp-offset]

Exit status: 0 the kit's rule passes, 1 it fails (the report names the first failing step
and tensor), 2 bad input.
"""
import argparse
import datetime
import gc
import json
import os
import socket
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from safetensors.numpy import save_file
from torch.nn.parallel import DistributedDataParallel as DDP

import ptsuite_golden as pg
from models import loss_fn, make_model

DTYPES = {"float64": torch.float64, "float32": torch.float32}


def make_optimizer(kit, params):
    """The kit's optimizer in PyTorch's spelling (MANIFEST.md: SGD heavy ball without
    dampening or Nesterov, L2 decay into the gradient; AdamW with decoupled decay)."""
    o = kit.optimizer
    if o["kind"] == "sgd":
        return torch.optim.SGD(params, lr=o["lr"], momentum=o["momentum"], dampening=0, nesterov=False,
                               weight_decay=o["weight_decay"])
    if o["kind"] == "adamw":
        return torch.optim.AdamW(params, lr=o["lr"], betas=(o["beta1"], o["beta2"]), eps=o["eps"],
                                 weight_decay=o["weight_decay"])
    raise ValueError(f"optimizer {o['kind']}")


def sum_not_average_hook(state, bucket):
    """Planted bug (a): DDP's all-reduce of gradients without the 1/world average."""
    fut = dist.all_reduce(bucket.buffer(), async_op=True).get_future()
    return fut.then(lambda f: f.value()[0])


def train(kit_dir, a, rank=0, world=1, port=None):
    """Runs every step; returns (losses, params by saved step, step-0 grads) on rank 0."""
    torch.set_num_threads(1)
    kit = pg.load_kit(kit_dir)
    dtype = DTYPES[a.dtype]
    if world > 1:
        # A collective that waits over a minute (a peer died) raises instead of hanging.
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=60))
    model = make_model(kit.architecture, "tp2" if a.variant == "tp2" else "plain", offset_bug=a.bug == "tp-offset")
    model = model.to(dtype)
    init = kit.init_params() if a.init == "kit" else pg.init_params(kit)
    model.load_canonical(kit, init)
    net = model
    if world > 1:
        net = DDP(model)
        if a.bug == "ddp-sum":
            net.register_comm_hook(None, sum_not_average_hook)
    opt = make_optimizer(kit, model.parameters())
    B = kit.global_batch
    assert B % world == 0, f"global batch {B} does not split over {world} ranks"
    rows = slice(rank * B // world, (rank + 1) * B // world)  # this rank's samples of the global batch
    losses, params, grads = [], {}, None
    for step in range(kit.steps):
        batch = kit.batch(step) if a.init == "kit" else pg.batch(kit, step)
        inputs = torch.from_numpy(batch["x"]).to(dtype) if "x" in batch else torch.from_numpy(batch["tokens"])
        labels = torch.from_numpy(batch["labels"])
        opt.zero_grad(set_to_none=True)
        logits = net(inputs[rows])
        loss = loss_fn(logits, labels[rows])
        loss.backward()
        # The reported loss: the local mean in double (as ptsuite's float32 run accumulates
        # its loss), averaged over ranks: every rank holds B / world samples.
        with torch.no_grad():
            reported = loss_fn(logits.double(), labels[rows]).reshape(1)
            if world > 1:
                dist.all_reduce(reported)
                reported /= world
        losses.append(float(reported))
        if step == 0:
            grads = model.canonical(kit, grads=True)
        opt.step()
        if step in kit.saved_steps:
            params.update({f"step.{step}.{n}": v for n, v in model.canonical(kit).items()})
    if world > 1:
        # The DDP reducer (and a Python comm hook's futures) go before the process group:
        # torch 1.13 can spin at exit in a rank whose reducer outlives it.
        del net, opt
        gc.collect()
        dist.barrier()
        dist.destroy_process_group()
    return losses, params, grads


def _ddp_worker(rank, world, port, kit_dir, a, out):
    losses, params, grads = train(kit_dir, a, rank, world, port)
    if rank == 0:
        write_results(out, losses, params, grads)


def spawn_ddp(kit_dir, a, out, world, deadline_s=180):
    """mp.spawn with a deadline: the ranks are terminated and TimeoutError raised when they
    have not all finished within deadline_s (a hung rendezvous must not hang CI)."""
    ctx = mp.start_processes(_ddp_worker, args=(world, free_port(), kit_dir, a, out), nprocs=world, join=False,
                             start_method="spawn")
    t0 = time.time()
    while not ctx.join(timeout=2):
        if time.time() - t0 > deadline_s:
            for p in ctx.processes:
                if p.is_alive():
                    p.terminate()
            raise TimeoutError(f"DDP ranks still running after {deadline_s} s; terminated "
                               f"(exit codes {[p.exitcode for p in ctx.processes]})")


def write_results(out, losses, params, grads):
    os.makedirs(out, exist_ok=True)
    pg.write_losses_csv(os.path.join(out, "losses.csv"), losses)
    save_file({n: np.ascontiguousarray(v) for n, v in params.items()}, os.path.join(out, "params.safetensors"))
    save_file({n: np.ascontiguousarray(v) for n, v in grads.items()}, os.path.join(out, "grads.safetensors"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(kit_dir, out, variant="single", dtype="float64", init="kit", bug="none", world=2):
    """Trains one variant into `out` (losses.csv, params.safetensors, grads.safetensors,
    report.json, report.txt) and returns ptsuite_golden's Report."""
    if (bug == "ddp-sum" and variant != "ddp") or (bug == "tp-offset" and variant != "tp2"):
        raise ValueError(f"bug {bug} belongs to variant {'ddp' if bug == 'ddp-sum' else 'tp2'}")
    a = argparse.Namespace(variant=variant, dtype=dtype, init=init, bug=bug)
    t0 = time.time()
    pg.load_kit(kit_dir)  # a bad kit fails here, before any process starts
    if variant == "ddp":
        spawn_ddp(kit_dir, a, out, world)
    else:
        write_results(out, *train(kit_dir, a))
    seconds = time.time() - t0
    # The worked example of ptsuite_golden.verify: the files golden verify reads in, a report out.
    report = pg.verify(kit_dir, losses=os.path.join(out, "losses.csv"),
                       params=os.path.join(out, "params.safetensors"),
                       grads=os.path.join(out, "grads.safetensors"))
    report.seconds = seconds
    d = report.to_dict()
    d.update(seconds=seconds, max_loss_value=report.max_loss_value, variant=variant, dtype=dtype, init=init, bug=bug)
    with open(os.path.join(out, "report.json"), "w") as f:
        json.dump(d, f, indent=1)
    with open(os.path.join(out, "report.txt"), "w") as f:
        f.write(report.text(show=5))
    return report


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kit")
    ap.add_argument("out")
    ap.add_argument("--variant", default="single", choices=["single", "ddp", "tp2"])
    ap.add_argument("--dtype", default="float64", choices=list(DTYPES))
    ap.add_argument("--init", default="kit", choices=["kit", "regen"],
                    help="initial parameters and batches from the kit's files or regenerated by ptsuite_golden")
    ap.add_argument("--bug", default="none", choices=["none", "ddp-sum", "tp-offset"])
    ap.add_argument("--world", type=int, default=2, help="DDP processes")
    a = ap.parse_args()
    try:
        report = run(a.kit, a.out, a.variant, a.dtype, a.init, a.bug, a.world)
    except (pg.KitError, pg.ResultsError, ValueError) as e:
        print(f"train.py: {e}", file=sys.stderr)
        return 2
    print(report.text(show=5), end="")
    return report.exit_code


if __name__ == "__main__":
    sys.exit(main())
