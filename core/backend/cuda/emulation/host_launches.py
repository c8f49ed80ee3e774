"""Rewrites the CUDA backend for the host emulation (cuda_runtime_api.h beside this file):
every `kernel<<<grid, block, shmem, stream>>>(args);` becomes
`{ ::emu::device_args("kernel", args); ::emu::launch(grid, block, shmem, stream, [&] { kernel(args); }); }`
(device_args aborts when an argument is a host pointer).
Usage: host_launches.py cuda_backend.cu OUT.cpp"""
import re
import sys

src = open(sys.argv[1]).read()
out, n = re.subn(r"([\w:]+)<<<(.*?)>>>\((.*?)\);", r'{ ::emu::device_args("\1", \3); ::emu::launch(\2, [&] { \1(\3); }); }', src, flags=re.S)
if n == 0 or "<<<" in out:
    sys.exit(f"host_launches.py: {n} launches rewritten, {out.count('<<<')} left in {sys.argv[1]}")
open(sys.argv[2], "w").write(f"// Generated from {sys.argv[1]} by host_launches.py: do not edit.\n" + out)
