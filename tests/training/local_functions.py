"""Functions that ``kubetrain.local.train`` runs in the tests (tests/training/
test_local_train.py, and tests/sdk/local_train.py in the SDK's virtualenv). Only a
function's source travels to the ranks, as with the Kubeflow SDK, so each imports what it
uses inside itself; this module imports nothing at all, so the SDK's virtualenv can load it.
"""


def ddp_train(out_dir: str, steps: int = 8) -> None:
    import hashlib
    import json
    import os

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    # Every rank starts from other weights and sees other data: only DDP (the broadcast
    # at wrap time and the gradient all-reduce) can make them end equal.
    torch.manual_seed(1000 + rank)
    model = DistributedDataParallel(
        torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Linear(16, 2))
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        x, y = torch.randn(32, 8), torch.randn(32, 2)
        optimizer.zero_grad()
        # Tensor.backward is unannotated in torch; without torch installed (make lint on
        # the bare venv) torch is Any, and the ignore is unused: both are accepted.
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()  # type: ignore[no-untyped-call, unused-ignore]
        optimizer.step()
    blob = b"".join(p.detach().numpy().tobytes() for p in model.parameters())
    report = {
        "world_size": dist.get_world_size(),
        "node_rank": int(os.environ["GROUP_RANK"]),
        "local_rank": int(os.environ["LOCAL_RANK"]),
        "digest": hashlib.sha256(blob).hexdigest(),
    }
    with open(os.path.join(out_dir, f"rank-{rank}.json"), "w") as handle:
        json.dump(report, handle)
    dist.barrier()  # nobody tears down while a peer still flushes its last collective
    dist.destroy_process_group()


def shell_text() -> None:
    print("home=$HOME tick=`whoami` sub=$(id -u) backslash=\\n")


def keywords_only(*, lr: float, name: str, sizes: list[int]) -> None:
    print(f"lr={lr!r} name={name!r} sizes={sizes!r}")


def report_environment(label: str) -> None:
    import json
    import os
    import sys

    keys = ["GREETING", "KUBETRAIN_TEST_INHERITED", "PET_NNODES", "PET_NPROC_PER_NODE", "RANK"]
    print(label, json.dumps({**{k: os.environ.get(k) for k in keys}, "python": sys.executable}))


def fail_on_rank(bad_rank: int, code: int, pid_dir: str) -> None:
    import os
    import sys
    import time

    rank = int(os.environ["RANK"])
    with open(os.path.join(pid_dir, f"rank-{rank}"), "w") as handle:
        handle.write(str(os.getpid()))
    print(f"rank {rank} started")
    if rank == bad_rank:
        while len(os.listdir(pid_dir)) < int(os.environ["WORLD_SIZE"]):
            time.sleep(0.1)
        print(f"rank {rank} gives up", file=sys.stderr)
        sys.exit(code)
    time.sleep(300)


def raises() -> None:
    raise ValueError("the data set is empty")
