"""DataLoader settings: num_workers x pin_memory x batch size x persistent_workers over a
synthetic JPEG dataset decoded and transformed with torchvision, feeding AlexNet training steps.
Reports samples/s and compute efficiency = compute / (compute + waiting for data), and the
paired row the gate judges: epoch time with N workers over epoch time with none, both loaders
feeding the same model in the same rounds."""

from harness.measure import timing
from harness.measure.threads import fix_threads
from harness.measure.workloads import dataloader as wl
from harness.measure.workloads import device, full_mode, grid


def setup(*params):
    """asv runs a module-level setup before every benchmark's own: the run's fixed thread count."""
    fix_threads()


class LoadSyntheticImages:
    params = (grid([0, 2], [0, 1, 2, 4, 8]), [False, True], grid([16], [32, 128]), [False, True])
    param_names = ["num_workers", "pin_memory", "batch_size", "persistent_workers"]
    timeout = 600

    def setup(self, num_workers, pin_memory, batch_size, persistent_workers):
        self.dev = device()
        self.loader = wl.build_loader(
            num_workers, pin_memory, batch_size, persistent_workers, self.dev
        )
        self.step = wl.build_step(self.dev)

    def teardown(self, *params):
        # asv calls teardown after a skipped (n/a) setup too
        self.__dict__.pop("loader", None)  # shuts persistent workers down

    def track_samples_per_second(self, *params):
        return {
            "samples": wl.run_epochs(self.loader, self.step, self.dev).samples_per_s,
            "number": 1,
        }

    track_samples_per_second.unit = "samples/s"

    def track_compute_efficiency(self, *params):
        return {"samples": wl.run_epochs(self.loader, self.step, self.dev).efficiency, "number": 1}

    track_compute_efficiency.unit = "efficiency"


class WorkersOverNoWorkers:
    """Per round, an epoch's time with N loader workers over an epoch with none (same pin_memory
    and batch size; the 0-worker side is never persistent). Lower is better."""

    params = (grid([2], [1, 2, 4, 8]), [False, True], grid([16], [32, 128]), [False, True])
    param_names = ["num_workers", "pin_memory", "batch_size", "persistent_workers"]
    timeout = 600
    rounds = 5  # more than run_epochs' epochs: a paired row needs a few ratios to be tested

    def setup(self, num_workers, pin_memory, batch_size, persistent_workers):
        self.dev = device()
        self.workers = wl.build_loader(
            num_workers, pin_memory, batch_size, persistent_workers, self.dev
        )
        self.none = wl.build_loader(0, pin_memory, batch_size, False, self.dev)
        self.step = wl.build_step(self.dev)

    def teardown(self, *params):
        self.__dict__.pop("workers", None)

    def track_workers_over_no_workers(self, *params):
        ratios = timing.measure_paired(
            lambda: wl.epoch(self.workers, self.step, self.dev),
            lambda: wl.epoch(self.none, self.step, self.dev),
            self.dev,
            warmup=1,
            samples=10 if full_mode() else self.rounds,
            budget_s=float("inf"),
            clock="wall",
        )  # workers: other processes
        return timing.asv_samples(ratios)

    track_workers_over_no_workers.unit = "ratio"


class PersistentOverFreshWorkers:
    """Per round, an epoch with persistent_workers=True over an epoch whose loader starts its N
    workers afresh (persistent_workers=False), same workers, pin_memory and batch size, feeding
    the same model. Lower is better."""

    params = (grid([2], [2, 4]), [False, True], grid([16], [32, 128]))
    param_names = ["num_workers", "pin_memory", "batch_size"]
    timeout = 600
    rounds = 5

    def setup(self, num_workers, pin_memory, batch_size):
        self.dev = device()
        self.persistent = wl.build_loader(num_workers, pin_memory, batch_size, True, self.dev)
        self.fresh = wl.build_loader(num_workers, pin_memory, batch_size, False, self.dev)
        self.step = wl.build_step(self.dev)

    def teardown(self, *params):
        self.__dict__.pop("persistent", None)  # shuts the persistent workers down

    def track_persistent_over_fresh_workers(self, *params):
        ratios = timing.measure_paired(
            lambda: wl.epoch(self.persistent, self.step, self.dev),
            lambda: wl.epoch(self.fresh, self.step, self.dev),
            self.dev,
            warmup=1,
            samples=10 if full_mode() else self.rounds,
            budget_s=float("inf"),
            clock="wall",
        )  # workers: other processes
        return timing.asv_samples(ratios)

    track_persistent_over_fresh_workers.unit = "ratio"
