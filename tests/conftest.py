import os
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))  # the course's scripts are importable in tests
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # reference models are built from configs: never download

# Tiny tensors run fastest on one intra-op thread; with two on a busy 2-core machine every op waits
# for the other thread (measured: hundreds of times slower). Notebook kernels get OMP_NUM_THREADS=1
# from the Makefile.
torch.set_num_threads(1)


def run_all_repeatedly(nb, workdir: Path, runs: int = 2):
    """Execute every cell of ``nb`` ``runs`` times in one kernel ("Run All", as a reader presses it
    again); yields the run number after each pass, with ``nb``'s outputs from that pass. A cell error
    raises ``nbclient.exceptions.CellExecutionError``."""
    import nbclient

    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(workdir)}})
    with client.setup_kernel():
        for run in range(1, runs + 1):
            for index, cell in enumerate(nb.cells):
                client.execute_cell(cell, index)
            yield run
