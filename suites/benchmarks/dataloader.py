"""DataLoader settings: num_workers x pin_memory x batch size x persistent_workers over a
synthetic JPEG dataset decoded and transformed with torchvision, feeding AlexNet training steps.
Reports samples/s and compute efficiency = compute / (compute + waiting for data)."""

from harness.measure.workloads import dataloader as wl
from harness.measure.workloads import device, grid


class LoadSyntheticImages:
    params = (grid([0, 2], [0, 1, 2, 4, 8]), [False, True], grid([16], [32, 128]), [False, True])
    param_names = ["num_workers", "pin_memory", "batch_size", "persistent_workers"]
    timeout = 600

    def setup(self, num_workers, pin_memory, batch_size, persistent_workers):
        self.dev = device()
        self.loader = wl.build_loader(num_workers, pin_memory, batch_size, persistent_workers, self.dev)
        self.step = wl.build_step(self.dev)

    def teardown(self, *params):
        # asv calls teardown after a skipped (n/a) setup too
        self.__dict__.pop("loader", None)  # shuts persistent workers down

    def track_samples_per_second(self, *params):
        return {"samples": wl.run_epochs(self.loader, self.step, self.dev).samples_per_s, "number": 1}
    track_samples_per_second.unit = "samples/s"

    def track_compute_efficiency(self, *params):
        return {"samples": wl.run_epochs(self.loader, self.step, self.dev).efficiency, "number": 1}
    track_compute_efficiency.unit = "efficiency"
