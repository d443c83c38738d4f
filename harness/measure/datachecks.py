"""Silent-bug checks on a data pipeline: a Dataset with its transforms (`harness check --dataset`).

- Augmentation varies across epochs and across DataLoader workers. Since torch 1.9 every worker
  reseeds torch, `random` and the global NumPy generator, so the bugs left are a generator object
  made in `Dataset.__init__` (copied, state and all, into every worker and every epoch's fresh
  workers) and a fixed seed set inside `__getitem__` (every call draws the same augmentation).
  The check draws item 0 repeatedly in this process and in two forked workers over two epochs;
  the cause is named from the seeding calls seen during `__getitem__`, the global generators it
  reset, or the generator objects the dataset holds.
- Output shape is constant over inputs of different aspect ratios: the dataset's `transform` is
  fed 64x96, 96x64 and 80x80 images (catches `Resize(224)`, which keeps aspect ratio, where
  `Resize((224, 224))` was meant); a loader with its own collate_fn may keep aspect ratio on
  purpose.
- The loader's pin_memory / num_workers settings are recorded.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import random
import sys

import torch

from harness.core.env import seed_everything
from harness.measure.checks import FAIL, INFO, NA, PASS, Finding, same_outputs

PROBE_SIZES = ((64, 96), (96, 64), (80, 80))  # (height, width): tall, wide, square
# Draws of item 0: in this process under different seeds, and per worker per epoch. A pipeline
# whose only randomness is a coin flip repeats 8 draws by chance 1 time in 128.
DRAWS, WORKER_DRAWS = 4, 8


_TORCH_DIR = os.path.dirname(torch.__file__)


def _numpy():
    try:
        import numpy

        return numpy
    except ImportError:
        return None


# ---- what __getitem__ does to random state ------------------------------------------------


class SeedCalls(contextlib.AbstractContextManager):
    """Records seeding calls with a fixed seed made while it is active, with the caller's file
    and line: torch.manual_seed, random.seed, random.Random(seed), numpy.random.seed,
    numpy.random.default_rng(seed), torch.Generator.manual_seed."""

    def __init__(self):
        self.calls: list[str] = []
        self._undo: list = []

    @staticmethod
    def _where(frame) -> str:
        if frame is None:
            return "?"
        path = frame.f_code.co_filename
        rel = os.path.relpath(path) if os.path.isabs(path) else path
        return f"{path if rel.startswith('..') else rel}:{frame.f_lineno}"

    def _wrap(self, owner, attr: str, label: str):
        original = getattr(owner, attr)
        calls = self.calls

        def wrapper(*args, **kwargs):
            seed = args[0] if args else next(iter(kwargs.values()), None)
            if seed is not None:
                calls.append(f"{label}({seed!r}) at {self._where(sys._getframe(1))}")
            return original(*args, **kwargs)

        setattr(owner, attr, wrapper)
        self._undo.append((owner, attr, original))

    def __enter__(self):
        self._wrap(torch, "manual_seed", "torch.manual_seed")
        self._wrap(torch.random, "manual_seed", "torch.manual_seed")
        self._wrap(random, "seed", "random.seed")
        np = _numpy()
        if np is not None:
            self._wrap(np.random, "seed", "numpy.random.seed")
            self._wrap(np.random, "default_rng", "numpy.random.default_rng")
        calls, where = self.calls, self._where

        class Random(random.Random):  # random.Random(seed) made inside __getitem__
            def __init__(self, x=None):
                if x is not None:
                    calls.append(f"random.Random({x!r}) at {where(sys._getframe(1))}")
                super().__init__(x)

        self._undo.append((random, "Random", random.Random))
        random.Random = Random

        def profile(frame, event, arg):  # a C method: only the profiler sees it
            if (
                event == "c_call"
                and getattr(arg, "__qualname__", "") == "Generator.manual_seed"
                and not frame.f_code.co_filename.startswith(_TORCH_DIR)
            ):  # torch.manual_seed's own
                calls.append(f"torch.Generator.manual_seed at {where(frame)}")

        self._old_profile = sys.getprofile()
        sys.setprofile(profile)
        return self

    def __exit__(self, *exc):
        sys.setprofile(self._old_profile)
        for owner, attr, original in reversed(self._undo):
            setattr(owner, attr, original)
        return False


def _global_states() -> dict[str, bytes]:
    states = {
        "torch": torch.get_rng_state().numpy().tobytes(),
        "random": repr(random.getstate()).encode(),
    }
    np = _numpy()
    if np is not None:
        kind, keys, pos, *_ = np.random.get_state()
        states["numpy"] = keys.tobytes() + str(pos).encode()
    return states


def _generators(obj, path: str = "self", depth: int = 4, seen: set | None = None) -> list[str]:
    """Attribute paths of generator objects the dataset holds (made in __init__, so copied
    into every worker with the same state)."""
    seen = set() if seen is None else seen
    if id(obj) in seen or depth < 0:
        return []
    seen.add(id(obj))
    np = _numpy()
    kinds = (random.Random, torch.Generator) + (
        (np.random.Generator, np.random.RandomState) if np else ()
    )
    if isinstance(obj, kinds):
        return [f"{path} ({type(obj).__module__}.{type(obj).__qualname__})"]
    if (
        isinstance(obj, (str, bytes, int, float, bool, type(None), torch.Tensor, type))
        or callable(obj)
        and not hasattr(obj, "__dict__")
    ):
        return []
    found = []
    if isinstance(obj, dict):
        items = [(f"{path}[{k!r}]", v) for k, v in obj.items()]
    elif isinstance(obj, (list, tuple)):
        items = [(f"{path}[{i}]", v) for i, v in enumerate(obj)]
    elif hasattr(obj, "__dict__") and not isinstance(obj, type(sys)):
        items = [(f"{path}.{k}", v) for k, v in vars(obj).items() if k != "_modules"]
        if isinstance(obj, torch.nn.Module):
            items += [(f"{path}.{k}", v) for k, v in obj._modules.items()]
    else:
        return []
    for sub_path, value in items:
        found += _generators(value, sub_path, depth - 1, seen)
    return found


# ---- augmentation across epochs and workers -------------------------------------------------


def augmentation(dataset, label: str) -> list[Finding]:
    epochs, workers = "augmentation across epochs", "augmentation across workers"
    if isinstance(dataset, torch.utils.data.IterableDataset) or not hasattr(dataset, "__getitem__"):
        why = "an IterableDataset has no item to draw twice"
        return [Finding(epochs, NA, why), Finding(workers, NA, why)]
    draws, calls, consumed, after = [], [], [], []
    for seed in range(1, DRAWS + 1):
        seed_everything(seed)
        before = _global_states()
        with SeedCalls() as seeds:
            draws.append(dataset[0])
        after.append(_global_states())
        calls += seeds.calls
        consumed += [k for k in before if before[k] != after[-1][k]]
    frozen = all(same_outputs(draws[0], d, exact=True) for d in draws[1:])
    # a generator left in the same state after draws that began from different seeds was reset
    reset = [k for k in after[0] if all(a[k] == after[0][k] for a in after[1:])]
    calls = list(dict.fromkeys(calls))
    if frozen and (calls or reset):
        cause = (
            "__getitem__ sets a fixed seed: " + "; ".join(calls)
            if calls
            else f"__getitem__ resets the global {', '.join(reset)} generator to a fixed state"
        )
        reason = (
            f"{label}[0] gives the same output on every call, under {DRAWS} different global "
            f"seeds: its augmentation is frozen. {cause}"
        )
        fix = (
            "remove the seeding from __getitem__; for reproducible runs seed once at start "
            "(torch's DataLoader then seeds every worker from it)"
        )
        details = {"seed_calls": calls, "generators_reset": reset}
        return [
            Finding(epochs, FAIL, reason, fix, details),
            Finding(workers, FAIL, reason, fix, details),
        ]
    if frozen and not consumed:
        why = (
            f"{label}[0] is the same on every call and draws nothing from torch, random or numpy: "
            "the pipeline has no random augmentation (if it should, look for a generator "
            "seeded inside __getitem__)"
        )
        return [Finding(epochs, NA, why), Finding(workers, NA, why)]

    context = "fork" if "fork" in multiprocessing.get_all_start_methods() else None
    loader = torch.utils.data.DataLoader(
        dataset,
        sampler=[0] * (2 * WORKER_DRAWS),
        batch_size=None,
        num_workers=2,
        multiprocessing_context=context,
        persistent_workers=False,
    )
    seed_everything(0)
    first = list(loader)  # worker 0 draws the even positions, worker 1 the odd ones
    second = list(loader)  # fresh workers, a new base seed
    same_epochs = same_outputs(first[0::2], second[0::2], exact=True)
    same_workers = same_outputs(first[0::2], first[1::2], exact=True)
    held = _generators(dataset)
    cause = (
        "Likely cause: the dataset holds " + ", ".join(held) + ", made in __init__ and copied "
        "with the same state into every worker (and into each epoch's fresh workers)"
        if held
        else "No generator object was found on the dataset; look for random state "
        "captured before the workers start"
    )
    fix = (
        "draw from torch's generator or np.random (reseeded per worker), or create the generator "
        "per worker in worker_init_fn from torch.utils.data.get_worker_info().seed"
    )
    details = {
        "generators": held,
        "draws": f"item 0, {WORKER_DRAWS} times in each of 2 workers (fork), 2 epochs",
    }
    found = []
    if same_epochs:
        found.append(
            Finding(
                epochs,
                FAIL,
                f"{label}[0] draws the same augmentation in every epoch "
                f"(fresh workers each epoch). {cause}",
                fix,
                details,
            )
        )
    else:
        found.append(Finding(epochs, PASS, f"{label}[0] gets a different augmentation each epoch"))
    if same_workers:
        found.append(
            Finding(
                workers,
                FAIL,
                f"two DataLoader workers draw the same augmentation for {label}[0]. {cause}",
                fix,
                details,
            )
        )
    else:
        found.append(
            Finding(
                workers, PASS, f"two DataLoader workers draw different augmentations for {label}[0]"
            )
        )
    return found


# ---- output shape over aspect ratios --------------------------------------------------------


def _shape(output):
    from torch.utils._pytree import tree_leaves

    shapes = []
    for leaf in tree_leaves(output):
        if isinstance(leaf, torch.Tensor):
            shapes.append(tuple(leaf.shape))
        elif hasattr(leaf, "size") and hasattr(leaf, "mode"):  # a PIL image: (width, height)
            shapes.append(("PIL", *leaf.size))
    return shapes


def _transforms(t):
    yield t
    for inner in getattr(t, "transforms", None) or []:
        yield from _transforms(inner)


def _aspect_keepers(transform) -> list[str]:
    """Resize-like transforms given one int: they scale the shorter side and keep aspect ratio."""
    found = []
    for t in _transforms(transform):
        size = getattr(t, "size", None)
        if type(t).__name__ == "Resize" and (
            isinstance(size, int) or (isinstance(size, (list, tuple)) and len(size) == 1)
        ):
            found.append(
                f"{type(t).__module__}.Resize(size={size if isinstance(size, int) else size[0]})"
            )
    return found


def _probe(transform, height: int, width: int):
    gen = torch.Generator().manual_seed(height * 1000 + width)
    image = torch.randint(0, 256, (3, height, width), dtype=torch.uint8, generator=gen)
    try:
        return transform(image)
    except Exception:  # a v1 pipeline wants a PIL image (ToTensor)
        from PIL import Image

        return transform(Image.fromarray(image.permute(1, 2, 0).numpy()))


def shapes(dataset, loader, label: str) -> Finding:
    name = "shape over aspect ratios"
    transform = getattr(dataset, "transform", None) or getattr(dataset, "transforms", None)
    collate = getattr(loader, "collate_fn", None)
    custom_collate = collate is not None and getattr(collate, "__name__", "") != "default_collate"
    if transform is None or not callable(transform):
        items = (
            [_shape(dataset[i]) for i in range(min(len(dataset), 8))]
            if hasattr(dataset, "__len__")
            else []
        )
        distinct = list(dict.fromkeys(map(str, items)))
        if len(distinct) > 1:
            return Finding(
                name,
                FAIL,
                f"{label}'s first {len(items)} items have different shapes: {', '.join(distinct)}",
                "resize to a fixed (height, width)",
            )
        return Finding(
            name,
            NA,
            f"{label} has no `transform` attribute to feed images of other aspect "
            f"ratios; its first {len(items)} items all have shape "
            f"{distinct[0] if distinct else '?'}",
        )
    seed_everything(0)
    got = {f"{h}x{w}": _shape(_probe(transform, h, w)) for h, w in PROBE_SIZES}
    seen = ", ".join(f"{k} -> {v[0] if len(v) == 1 else v}" for k, v in got.items())
    if len({str(v) for v in got.values()}) == 1:
        return Finding(
            name,
            PASS,
            f"the transform gives one shape for inputs of three aspect ratios "
            f"(height x width {seen})",
            details={"shapes": got},
        )
    keepers = _aspect_keepers(transform)
    cause = (
        f"{' and '.join(keepers)} with one int scales the shorter side and keeps the aspect ratio"
        if keepers
        else "a transform keeps the input's aspect ratio"
    )
    if custom_collate:
        return Finding(
            name,
            PASS,
            f"the pipeline keeps aspect ratio ({seen}; {cause}); the loader's "
            f"collate_fn {collate.__name__} takes variable sizes",
            details={"shapes": got},
        )
    return Finding(
        name,
        FAIL,
        f"output shape follows the input's aspect ratio ({seen}): {cause}. "
        "Batches of mixed images fail in default_collate, or train on "
        "distorted crops",
        "Resize((H, W)) for a fixed shape, or Resize(S) followed "
        "by CenterCrop(S); keep aspect ratio only with a collate_fn that pads",
        {"shapes": got, "transforms": keepers},
    )


# ---- loader settings ------------------------------------------------------------------------


def settings(loader) -> Finding:
    name = "loader settings"
    if loader is None:
        return Finding(
            name,
            INFO,
            "a Dataset was given, no DataLoader: no settings to record (the "
            "worker check used num_workers=2, fork, pin_memory=False)",
            details={"num_workers": None, "pin_memory": None},
        )
    found = {
        "num_workers": loader.num_workers,
        "pin_memory": loader.pin_memory,
        "persistent_workers": loader.persistent_workers,
        "batch_size": loader.batch_size,
        "collate_fn": getattr(loader.collate_fn, "__name__", str(loader.collate_fn)),
    }
    notes = []
    if loader.pin_memory and not torch.cuda.is_available():
        notes.append("pin_memory=True without CUDA pins for nothing")
    if loader.num_workers > (os.cpu_count() or 1):
        notes.append(f"num_workers={loader.num_workers} exceeds the {os.cpu_count()} CPUs")
    text = ", ".join(f"{k}={v}" for k, v in found.items())
    return Finding(name, INFO, text + (f" ({'; '.join(notes)})" if notes else ""), details=found)


def check_dataset(obj, label: str) -> list[Finding]:
    """Every data check on a Dataset, or on a DataLoader (its dataset and its settings)."""
    loader = obj if isinstance(obj, torch.utils.data.DataLoader) else None
    dataset = loader.dataset if loader is not None else obj
    return [*augmentation(dataset, label), shapes(dataset, loader, label), settings(loader)]


def own_loader():
    """The harness's synthetic image pipeline as the dataloader suite builds it (quick sizes,
    2 workers; pinned memory where there is a GPU to copy to)."""
    from harness.measure.workloads import dataloader

    cuda = torch.cuda.is_available()
    return dataloader.build_loader(
        num_workers=2,
        pin_memory=cuda,
        batch_size=16,
        persistent_workers=False,
        device=torch.device("cuda" if cuda else "cpu"),
    )
