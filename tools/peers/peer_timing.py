"""Timing and the thread pools for torch_peer.py: CUDA events (L2 flushed before each iteration)
or wall and thread CPU time, torch.profiler's kernel count, and what every pool PyTorch's CPU
work can use ended up with, read back from the libraries."""

import ctypes
import os
import statistics
import time

from peer_setup import PINNED_THREADS, torch


# ---- Timing ------------------------------------------------------------------------------------

class Timer:
    def __init__(self, device):
        self.device = device
        self.flush = None
        if device.type == "cuda":
            # Twice the L2 size, zeroed before each iteration so no input stays cached.
            l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 64 << 20)
            self.flush = torch.empty(2 * max(l2, 1 << 20), dtype=torch.uint8, device=device)

    def one(self, step):
        """(wall or CUDA-event ms, CPU ms of this thread or None) for one iteration."""
        if self.device.type == "cuda":
            self.flush.zero_()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            step()
            end.record()
            end.synchronize()
            return start.elapsed_time(end), None
        begin, begin_cpu = time.perf_counter(), time.thread_time()
        step()
        # thread_time: the CPU this thread used, what Google Benchmark's cpu_time measures (equal
        # to the work done with one intra-op thread, whatever else loads the machine).
        return (time.perf_counter() - begin) * 1000.0, (time.thread_time() - begin_cpu) * 1000.0

    def run(self, step, warmup, min_time_s, min_iters, max_iters):
        for _ in range(warmup):
            step()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        times, cpu_times, begin = [], [], time.perf_counter()
        while len(times) < max_iters and (len(times) < min_iters or time.perf_counter() - begin < min_time_s):
            wall, cpu = self.one(step)
            times.append(wall)
            if cpu is not None:
                cpu_times.append(cpu)
        return times, cpu_times


def summary(times):
    return {"median": statistics.median(times), "mean": statistics.fmean(times), "min": min(times),
            "max": max(times), "stdev": statistics.pstdev(times) if len(times) > 1 else 0.0}


def count_cuda_kernels(step):
    """Kernels and memcpys one iteration launches, from torch.profiler (CUDA only)."""
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    count = 0
    for event in prof.events():
        kind = str(getattr(event, "device_type", ""))
        if "CUDA" in kind and event.name and not event.name.startswith("cudaLaunch"):
            count += 1
    return count


def loaded_openblas():
    """The OpenBLAS library this process loaded (through torch), or None."""
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "libopenblas" in line and line.split()[-1].startswith("/")}
    except OSError:
        return None
    for path in sorted(paths):
        try:
            return ctypes.CDLL(path)
        except OSError:
            continue
    return None


def thread_pools():
    """What each pool PyTorch may use is set to, read back from the libraries."""
    pools = {"pinned": PINNED_THREADS, "intra_op": torch.get_num_threads(),
             "inter_op": torch.get_num_interop_threads(),
             "env": {name: os.environ.get(name) for name in
                     ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                      "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")},
             "openblas_threads": None, "openblas_core": None, "openblas_config": None}
    openblas = loaded_openblas()
    if openblas is not None:
        if hasattr(openblas, "openblas_get_num_threads"):
            pools["openblas_threads"] = int(openblas.openblas_get_num_threads())
        for key, symbol in (("openblas_core", "openblas_get_corename"), ("openblas_config", "openblas_get_config")):
            if hasattr(openblas, symbol):
                getattr(openblas, symbol).restype = ctypes.c_char_p
                pools[key] = getattr(openblas, symbol)().decode(errors="replace")
    return pools
