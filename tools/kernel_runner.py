"""Drive a Jupyter kernel cell by cell with blocking ``zmq`` polls (the tests and the margin study use it).

nbclient polls with ``zmq.asyncio``; now and then it missed a message it had already been sent and sat out
its whole per-cell timeout (a 600 s stall in about one of 52 notebook runs), then carried on as if nothing
had happened. A blocking ``socket.poll`` asks ZeroMQ directly and never stalled.
"""
from __future__ import annotations

import re
import time
from pathlib import Path


class CellError(Exception):
    """A cell raised: the message holds the cell's source and the kernel's traceback."""


def run_all_repeatedly(nb, workdir: Path, runs: int = 2, cell_timeout: float = 300, allow_errors: bool = False):
    """Execute every code cell of ``nb`` ``runs`` times in one kernel ("Run All", as a reader presses it
    again); yields the run number after each pass, with ``nb``'s outputs from that pass. A cell error
    raises ``CellError`` (with ``allow_errors``: the cell keeps no outputs and the next one runs), a cell
    running past ``cell_timeout`` seconds ``TimeoutError``."""
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="python3", cwd=str(workdir),
                              extra_arguments=["--HistoryManager.hist_file=:memory:"])
    try:
        for run in range(1, runs + 1):
            for cell in nb.cells:
                if cell.cell_type != "code":
                    continue
                try:
                    cell.outputs = execute_cell(kc, cell.source, cell_timeout)
                except CellError:
                    if not allow_errors:
                        raise
                    cell.outputs = []
            yield run
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def execute_cell(kc, source: str, timeout: float) -> list:
    """Run ``source`` in the kernel; its outputs as notebook output nodes (what nbclient would store)."""
    from queue import Empty

    from nbformat.v4 import output_from_msg

    msg_id = kc.execute(source, store_history=False)
    deadline = time.monotonic() + timeout
    outputs, error = [], None
    shown: dict[str, list] = {}  # display_id -> the outputs it names (a progress line, updated in place)
    while True:
        try:
            msg = kc.iopub_channel.get_msg(timeout=max(0.0, deadline - time.monotonic()))
        except Empty:
            raise TimeoutError(f"cell ran longer than {timeout} s:\n{source}") from None
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind, content = msg["msg_type"], msg["content"]
        if kind == "status" and content["execution_state"] == "idle":
            break
        if kind == "clear_output":
            outputs.clear()
        elif kind == "error":
            traceback = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(content["traceback"]))  # no colour codes
            error = f"{content['ename']}: {content['evalue']}\n{traceback}"
        elif kind == "update_display_data":  # as Jupyter and nbclient do: replace the data, add nothing
            for output in shown.get((content.get("transient") or {}).get("display_id"), []):
                output.data, output.metadata = content["data"], content["metadata"]
        elif kind in ("stream", "display_data", "execute_result"):
            outputs.append(output_from_msg(msg))
            display_id = (content.get("transient") or {}).get("display_id")
            if display_id:
                shown.setdefault(display_id, []).append(outputs[-1])
    while kc.shell_channel.get_msg(timeout=timeout)["parent_header"].get("msg_id") != msg_id:
        pass  # the execute reply (its content repeats what iopub said)
    if error is not None:
        raise CellError(f"{source}\n---\n{error}")
    return outputs
