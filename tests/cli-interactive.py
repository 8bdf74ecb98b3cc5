#!/usr/bin/env python3
"""Runs redis-cli in interactive mode on a pseudo-terminal, types each
command given, and prints everything the terminal showed (escape sequences
removed). Interactive redis-cli first asks the server for COMMAND DOCS and
shows argument hints while typing; tests/redis-cli.sh checks both.

Usage: cli-interactive.py PORT COMMAND...
"""
import fcntl
import os
import pty
import re
import select
import struct
import sys
import termios
import time


def drain(fd, seconds):
    out = b""
    end = time.time() + seconds
    while time.time() < end:
        ready, _, _ = select.select([fd], [], [], 0.05)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
    return out


def main():
    port, commands = sys.argv[1], sys.argv[2:]
    pid, fd = pty.fork()
    if pid == 0:
        os.execvp("redis-cli", ["redis-cli", "-p", port])
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 200, 0, 0))
    out = drain(fd, 1.0)
    for cmd in commands:
        os.write(fd, cmd.encode() + b"\r")
        out += drain(fd, 1.0)
    os.write(fd, b"exit\r")
    out += drain(fd, 0.5)
    os.waitpid(pid, 0)
    text = re.sub(rb"\x1b\[[0-9;?]*[A-Za-z]", b"", out).decode(errors="replace")
    sys.stdout.write(text.replace("\r", ""))


if __name__ == "__main__":
    main()
