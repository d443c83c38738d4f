"""Seeds, devices and the environment fingerprint: the one place for all three.

Everything that runs a model (capture, benchmarks, tests) seeds through `seed_everything`
and picks its device through `pick_device`, so that a result can always be traced back to
the settings recorded by `fingerprint`.
"""

from __future__ import annotations

import os
import platform
import random

import torch

DEFAULT_SEED = 0
SETTINGS_PREFIX = "HARNESS" + "_"  # every variable of harness.core.settings starts so


def seed_everything(seed: int = DEFAULT_SEED) -> torch.Generator:
    """Seed Python, torch (CPU and every CUDA device) and numpy if present.

    Returns a fresh CPU generator seeded the same way, for code that wants its own stream
    (example inputs) without disturbing the global one.
    """
    random.seed(seed)
    torch.manual_seed(seed)  # also seeds all CUDA devices
    try:
        import numpy

        numpy.random.seed(seed)
    except ImportError:  # numpy is optional for torch
        pass
    gen = torch.Generator()
    gen.manual_seed(seed)
    return gen


def cuda_available() -> bool:
    return torch.cuda.is_available()


def default_device_name() -> str:
    """$HARNESS_DEVICE, else CUDA where present, else the CPU: the one default."""
    from harness.core import settings

    return settings.DEVICE.get() or ("cuda" if cuda_available() else "cpu")


def pick_device(name: str | None = None) -> torch.device:
    """The device named by the caller, else $HARNESS_DEVICE, else CUDA if present, else CPU."""
    name = name or default_device_name()
    device = torch.device(name)
    if device.type == "cuda" and not cuda_available():
        raise RuntimeError(
            f"device {name!r} was asked for but CUDA is not available on this machine"
        )
    return device


def synchronize(device: torch.device | str) -> None:
    """Wait for queued kernels: the only correct end of a GPU time measurement."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def gpu_name() -> str | None:
    if not cuda_available():
        return None
    return torch.cuda.get_device_name(0)


def _driver_version() -> str | None:
    if not cuda_available():
        return None
    try:  # pynvml ships with the CUDA wheels as nvidia-ml-py; optional
        import pynvml

        pynvml.nvmlInit()
        v = pynvml.nvmlSystemGetDriverVersion()
        return v.decode() if isinstance(v, bytes) else v
    except Exception:
        return None


def _numpy_version() -> str | None:
    try:
        import numpy
    except ImportError:  # numpy is optional for torch
        return None
    return numpy.__version__


def _torchvision_version() -> str | None:
    """torchvision's __version__ read from its version.py: importing torchvision only for it
    took ~10 s of a loaded runner's time after every run."""
    import importlib.util
    import re

    spec = importlib.util.find_spec("torchvision")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], "version.py")
    try:
        with open(path, encoding="utf-8") as f:
            m = re.search(r"^__version__ = ['\"]([^'\"]+)['\"]", f.read(), re.MULTILINE)
    except OSError:
        m = None
    if m:
        return m[1]
    import torchvision

    return torchvision.__version__


def fingerprint(seed: int = DEFAULT_SEED) -> dict:
    """Everything that can change a graph or a timing, as plain JSON-able values."""
    from harness.core import sizes

    cuda = cuda_available()
    fp = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torchvision": _torchvision_version(),
        "numpy": _numpy_version(),
        "cuda_build": torch.version.cuda,
        "cuda_available": cuda,
        "cudnn": torch.backends.cudnn.version() if cuda else None,
        "driver": _driver_version(),
        "gpu": gpu_name(),
        "gpu_memory_gib": round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1)
        if cuda
        else None,
        "gpu_count": torch.cuda.device_count() if cuda else 0,
        **_gpu_identity(cuda),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch_interop_threads": torch.get_num_interop_threads(),
        "os": f"{platform.system()} {platform.release()}",
        "flags": {
            "cudnn.benchmark": torch.backends.cudnn.benchmark,
            "cudnn.deterministic": torch.backends.cudnn.deterministic,
            "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
            "float32_matmul_precision": torch.get_float32_matmul_precision(),
            "cuda.matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        },
        "seed": seed,
        # HARNESS_SIZES (canonical text), None without: runs of other sizes are not comparable
        # silently (listed among the environment differences)
        "sizes": sizes.override_text(),
        "env": {
            k: os.environ[k]
            for k in sorted(os.environ)
            if k.startswith((SETTINGS_PREFIX, "OMP_", "MKL_", "CUDA_VISIBLE"))
        },
    }
    return fp


def _gpu_identity(cuda: bool) -> dict:
    """Which physical card (UUID) and its clock policy (locked, unlocked, unknown), read through
    NVML (harness.core.clocks); what NVML could not tell is said in `gpu_clock_note`."""
    if not cuda:
        return {"gpu_uuid": None, "gpu_clock_policy": None}
    from harness.core import clocks

    reader = clocks.reader_for("cuda")
    ident = reader.identity()
    out = {
        "gpu_uuid": ident.uuid,
        "gpu_clock_policy": ident.clock_policy,
        # a card capped lower, or clocked lower, runs the same code slower: said, not judged
        "gpu_sm_max_mhz": ident.sm_max_mhz,
        "gpu_power_limit_w": ident.power_limit_w,
    }
    if ident.uuid is None:  # torch knows the card's UUID even where NVML is missing
        out["gpu_uuid"] = clocks.torch_uuid(torch.cuda.current_device())
    if not reader.available:
        out["gpu_clock_note"] = reader.why
    return out


def gpu_missing_message() -> str | None:
    """None when a CUDA GPU is usable, else why not (for --require-gpu, exit 4)."""
    if cuda_available():
        return None
    return (
        "no CUDA GPU on this machine (torch.cuda.is_available() is False): this is a "
        "GPU-runner job; run it on a self-hosted GPU runner. Exit 4, not a pass."
    )


def require_gpu() -> str:
    """The GPU's name; raises NoGPU (exit 4) on a machine without one. The one --require-gpu
    check."""
    from harness.core.exits import NoGPU

    why = gpu_missing_message()
    if why:
        raise NoGPU(why)
    return gpu_name()


def machine_name() -> str:
    """Host name plus GPU model: asv's machine record has no GPU field, so the name carries it.
    Always a machine name by harness.core.trust's rule (it names folders in the results and in
    the shared history): any other character becomes '-'."""
    import re

    from harness.core import trust

    host = platform.node().split(".")[0] or "machine"
    gpu = gpu_name()
    suffix = gpu.replace(" ", "-") if gpu else "cpu"
    name = re.sub(r"[^A-Za-z0-9_.-]", "-", f"{host}-{suffix}", flags=re.ASCII)
    name = re.sub(r"\.{2,}", ".", name).lstrip("._-")[: trust.MAX_NAME]
    return name if trust.is_machine(name) else "machine"
