"""DataLoader settings over a synthetic image dataset decoded and transformed per sample.

The dataset holds JPEG-encoded images (made once from seeded noise); each item is decoded with
torchvision.io.decode_jpeg and transformed (RandomResizedCrop, RandomHorizontalFlip,
ToDtype, Normalize), as a real image pipeline does. The consumer is a training step of the
zoo's AlexNet, so the loader competes with real compute for the same cores.

`run_epochs` reports throughput (samples/s) and compute efficiency per epoch:
compute / (compute + waiting for data); 1.0 means the model never waited for the loader.
Epochs are timed by harness.measure.timing (one sample per epoch), after at least one warm-up
epoch; with persistent_workers=False the measured epochs pay worker start-up each time, which is
exactly what persistent_workers saves.

Workers vs none and persistent vs fresh workers are pairs (harness.measure.workloads.pairs), but
their timed callables are lambdas made in the suite's own track_ method, which no declaration
reaches: the second loader `build_loader` makes declares the check for the row running
(answers.declare_for_row). What must agree is compared bit for bit: the labels of every batch of
an epoch in order (a label is its sample's index mod NUM_CLASSES), each batch's image shape and
dtype, and the sampler's indices. The pixels are not: each worker seeds its own augmentation
(RandomResizedCrop, flip) by design (docs/answers.md#what-each-pair-compares).
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
import warnings
import weakref

import torch

from harness.core import sizes as core_sizes
from harness.core.env import seed_everything, synchronize
from harness.measure import answers
from harness.measure.answers import EXACT
from harness.measure.workloads import NotApplicable, full_mode, model_config, pairs, to_device

NUM_CLASSES = 10


@contextlib.contextmanager
def _quiet_io():
    """torchvision 0.29 deprecates its image codecs (in favour of TorchCodec) on every call."""
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message="The image decoding and encoding", category=DeprecationWarning
        )
        yield


class SyntheticJpegDataset(torch.utils.data.Dataset):
    def __init__(self, length: int, image: int, distinct: int = 16, seed: int = 0):
        from torchvision.io import encode_jpeg
        from torchvision.transforms import v2

        gen = torch.Generator().manual_seed(seed)
        src = int(image * 1.25)
        with _quiet_io():
            self.encoded = [
                encode_jpeg(
                    torch.randint(0, 256, (3, src, src), dtype=torch.uint8, generator=gen),
                    quality=90,
                )
                for _ in range(distinct)
            ]
        self.length = length
        self.transform = v2.Compose(
            [
                v2.RandomResizedCrop(image, antialias=True),
                v2.RandomHorizontalFlip(),
                v2.ToDtype(torch.float32, scale=True),
                v2.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
            ]
        )

    def __len__(self):
        return self.length

    def __getitem__(self, i):
        from torchvision.io import decode_jpeg

        with _quiet_io():
            img = decode_jpeg(self.encoded[i % len(self.encoded)])
        return self.transform(img), i % NUM_CLASSES


@dataclasses.dataclass
class EpochStats:
    samples_per_s: list[float]
    efficiency: list[float]


def check(
    num_workers: int, pin_memory: bool, persistent_workers: bool, device: torch.device
) -> None:
    if pin_memory and device.type != "cuda":
        raise NotApplicable(
            "pin_memory needs CUDA (pinned host memory only speeds up copies to a GPU); "
            f"this machine runs on {device.type}"
        )
    if persistent_workers and num_workers == 0:
        raise NotApplicable("persistent_workers needs num_workers > 0")


def sizes(device: torch.device | str, full: bool | None = None) -> dict:
    """Dataset length, image side and timed epochs for a loader feeding `device`; `full` None:
    the run's mode (HARNESS_FULL)."""
    return core_sizes.dataloader(full_mode() if full is None else full, device)


def build_loader(
    num_workers: int,
    pin_memory: bool,
    batch_size: int,
    persistent_workers: bool,
    device: torch.device,
):
    check(num_workers, pin_memory, persistent_workers, device)
    s = sizes(device)
    ds = SyntheticJpegDataset(s["length"], s["image"])
    loader = torch.utils.data.DataLoader(
        ds,
        batch_size=batch_size,
        num_workers=num_workers,
        pin_memory=pin_memory,
        persistent_workers=persistent_workers,
        shuffle=False,
        drop_last=False,
    )
    variant = "none" if num_workers == 0 else ("persistent" if persistent_workers else "fresh")
    return pairs.offer(loader, "dataloader", (pin_memory, batch_size, str(device)), variant)


def epoch_facts(loader) -> answers.Results:
    """What two loaders over one dataset must agree on for an epoch: every batch's labels in
    order, each batch's image shape and dtype, and the sampler's indices (not the pixels: the
    augmentation is random, seeded per worker)."""
    labels, shapes, dtypes = [], [], set()
    for images, batch_labels in loader:
        labels.append(batch_labels)
        shapes.append(torch.tensor(images.shape))
        dtypes.add(str(images.dtype))
    indices = [i for batch in loader.batch_sampler for i in batch]
    return answers.Results(
        labels=torch.cat(labels) if labels else torch.zeros(0, dtype=torch.int64),
        shapes=torch.stack(shapes) if shapes else torch.zeros(0, 4, dtype=torch.int64),
        dtype=", ".join(sorted(dtypes)),
        indices=torch.tensor(indices, dtype=torch.int64),
    )


_ROWS = {
    ("fresh", "none"): "dataloader.WorkersOverNoWorkers.track_workers_over_no_workers",
    ("persistent", "none"): "dataloader.WorkersOverNoWorkers.track_workers_over_no_workers",
    ("persistent", "fresh"): (
        "dataloader.PersistentOverFreshWorkers.track_persistent_over_fresh_workers"
    ),
}


def _pair_maker(row: str):
    def make(new_loader, ref_loader, key) -> None:
        answers.declare_for_row(
            answers.Pair(pairs.what(row), rule=EXACT), _epoch_of(new_loader), _epoch_of(ref_loader)
        )

    return make


def _epoch_of(loader):
    """`epoch_facts` of `loader`, held weakly: the benchmark's teardown dropping the loader ends
    its persistent workers (the check keeps no loader alive)."""
    ref = weakref.ref(loader)

    def facts():
        live = ref()
        if live is None:
            raise RuntimeError("the loader this check reads was dropped before the check ran")
        return epoch_facts(live)

    return facts


pairs.family("dataloader", {variants: _pair_maker(row) for variants, row in _ROWS.items()})


def build_step(device: torch.device):
    from harness.core.zoo import get_model

    spec, cfg = get_model("alexnet"), model_config("alexnet", device)
    seed_everything()
    model = spec.build_fn({**cfg, "num_classes": NUM_CLASSES}).to(device).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step(images, labels):
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(images), labels)
        loss.backward()
        opt.step()
        return loss

    return step


def epoch(loader, step, device: torch.device) -> tuple[int, float]:
    """One pass over the loader, a training step per batch: (samples, seconds spent computing).
    The rest of the epoch's time was spent waiting for data."""
    non_blocking = bool(loader.pin_memory)
    computing = 0.0
    n = 0
    for images, labels in loader:
        t_got = time.perf_counter()
        images = to_device(images, device, non_blocking)
        labels = to_device(labels, device, non_blocking)
        step(images, labels)
        synchronize(device)
        computing += time.perf_counter() - t_got
        n += len(labels)
    return n, computing


def run_epochs(
    loader, step, device: torch.device, epochs: int | None = None, warmup_epochs: int = 1
) -> EpochStats:
    """`warmup_epochs` (>= 1) + `epochs` passes, each epoch one sample of harness.measure.timing."""
    from harness.measure import timing

    epochs = sizes(device)["epochs"] if epochs is None else epochs
    times, returned = timing.measure_returning(
        lambda: epoch(loader, step, device),
        device,
        warmup=max(warmup_epochs, 1),
        samples=epochs,
        budget_s=float("inf"),
    )
    return EpochStats(
        [n / t for t, (n, _) in zip(times, returned)],
        [min(c / t, 1.0) for t, (_, c) in zip(times, returned)],
    )
