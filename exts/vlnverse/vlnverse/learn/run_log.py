"""The training log: ``train_log.csv`` rows and TensorBoard scalars (``tb/``) of a run folder."""
from __future__ import annotations

import csv
import time
import warnings
from pathlib import Path
from typing import Any, Callable

LOG_COLUMNS = ("time", "phase", "round", "epoch", "batch", "global_step", "loss", "accuracy", "samples_per_s",
               "beta", "collected_steps", "aggregated_steps", "env_steps_per_s", "val_split", "val_SR", "val_SPL",
               "val_nDTW", "val_NE", "val_OSR", "world_size", "effective_batch", "lr")


class RunLogger:
    """Appends rows to ``train_log.csv`` and scalars to TensorBoard (when installed)."""

    def __init__(self, out: Path, report: Callable[[str], None] = print):
        self.path = out / "train_log.csv"
        # a run stopped between opening the log and its first row leaves an empty file: a new log
        new = not self.path.is_file() or self.path.stat().st_size == 0
        columns = LOG_COLUMNS if new else (self.path.read_text(encoding="utf-8").splitlines()[:1] or [""])[0].split(",")
        self._fh = open(self.path, "a", newline="", encoding="utf-8")
        self._csv = csv.DictWriter(self._fh, fieldnames=[c for c in columns if c] or LOG_COLUMNS, extrasaction="ignore")
        if new:
            self._csv.writeheader()
        try:
            from torch.utils.tensorboard import SummaryWriter

            self.tb = SummaryWriter(str(out / "tb"))
        except (ImportError, ModuleNotFoundError):
            self.tb = None
            warnings.warn("tensorboard is not installed: logging to train_log.csv only (pip install tensorboard)",
                          RuntimeWarning, stacklevel=2)

    def log(self, global_step: int, **values: Any) -> None:
        """One CSV row; numeric values also go to TensorBoard under ``<phase>/<name>``."""
        row = {"time": round(time.time(), 3), "global_step": global_step, **values}
        self._csv.writerow({k: (round(v, 6) if isinstance(v, float) else v) for k, v in row.items()})
        self._fh.flush()
        if self.tb is not None:
            phase = values.get("phase", "train")
            for k, v in values.items():
                if isinstance(v, (int, float)) and not isinstance(v, bool) and k not in ("round", "epoch", "batch"):
                    self.tb.add_scalar(f"{phase}/{k}", v, global_step)
            self.tb.flush()

    def close(self) -> None:
        """Close the files."""
        self._fh.close()
        if self.tb is not None:
            self.tb.close()
