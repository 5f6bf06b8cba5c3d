#!/usr/bin/env bash
# On the lent GPU machine: forge top's GPU figures through NVML (libnvidia-ml.so.1, opened at
# run time) while it generates on WebGPU. The machine has no tmux, so Python's pty module is
# the terminal; the screen text (escape sequences removed) is printed for a person to read.
#   tools/device/top_nvml.sh            (after tools/device/bundle.sh; about 1 minute)
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/tools/device/env.sh"
# ncurses needs a terminfo entry; bundle.sh carries xterm-256color's.
export TERMINFO="$bin/terminfo" TERM=xterm-256color LANG=C.UTF-8
python3 - "$bin/forge" "$root/models" <<'PY'
import os, pty, re, select, sys, time
forge, models = sys.argv[1], sys.argv[2]
pid, fd = pty.fork()
if pid == 0:
    os.environ["COLUMNS"], os.environ["LINES"] = "140", "40"
    os.execv(forge, [forge, "top", "--path", models, "--backend", "webgpu", "--max-tokens", "3000"])
import fcntl, struct, termios
fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 140, 0, 0))
out = b""
def pump(seconds):
    global out
    end = time.time() + seconds
    while time.time() < end:
        r, _, _ = select.select([fd], [], [], 0.1)
        if r:
            try: out += os.read(fd, 65536)
            except OSError: return
pump(4); os.write(fd, b"\n"); pump(20); os.write(fd, b"q"); pump(3)
os.waitpid(pid, 0)
text = re.sub(rb"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][0-9A-Za-z]|\x1b[=>]", b" ", out).decode("utf-8", "replace")
for key in ("GPU", "tok/s", "device "):
    hits = [m.group(0) for m in re.finditer(re.escape(key) + r".{0,70}", text)]
    print(f"== last '{key}' on screen:", hits[-1] if hits else "(none)")
PY
