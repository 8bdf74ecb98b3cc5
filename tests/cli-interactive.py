#!/usr/bin/env python3
"""Runs redis-cli in interactive mode on a pseudo-terminal, types each
command given, and prints everything the terminal showed (escape sequences
removed). Interactive redis-cli first asks the server for COMMAND DOCS and
shows argument hints while typing; tests/redis-cli.sh checks both.

Nothing waits a fixed time: after starting, and after each command, the
script reads until redis-cli shows its prompt again (after a command, once
the line has been entered, so the reply is on the screen), and at the end
until redis-cli exits. A generous cap per step only bounds a failure; the
output is printed either way and the caller checks it.

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

CAP = 30.0  # seconds per step; reached only when something is broken

ESCAPE = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")
PROMPT = re.compile(rb"127\.0\.0\.1:[0-9]+> $")


def clean(b):
    return ESCAPE.sub(b"", b).replace(b"\r", b"")


def read_until(fd, done):
    """Reads from fd until done(bytes read so far) is true, EOF, or CAP."""
    out = b""
    end = time.monotonic() + CAP
    while not done(out) and time.monotonic() < end:
        ready, _, _ = select.select([fd], [], [], 0.05)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    return out


def at_prompt(out):
    return PROMPT.search(clean(out)) is not None


def replied(out):
    # The line was entered (a newline after the typed command) and the
    # prompt is back: the reply is in between.
    text = clean(out)
    return b"\n" in text and PROMPT.search(text) is not None


def main():
    port, commands = sys.argv[1], sys.argv[2:]
    pid, fd = pty.fork()
    if pid == 0:
        # The window size is set before redis-cli starts: without one,
        # linenoise asks the terminal for the cursor position (ESC [6n) and
        # reads the answer from its input, where it would take the first
        # characters typed for it.
        fcntl.ioctl(pty.STDOUT_FILENO, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 200, 0, 0))
        os.execvp("redis-cli", ["redis-cli", "-p", port])
    out = read_until(fd, at_prompt)
    for cmd in commands:
        os.write(fd, cmd.encode() + b"\r")
        out += read_until(fd, replied)
    os.write(fd, b"exit\r")
    out += read_until(fd, lambda _: False)  # until EOF: redis-cli has exited
    os.waitpid(pid, 0)
    text = ESCAPE.sub(b"", out).decode(errors="replace")
    sys.stdout.write(text.replace("\r", ""))


if __name__ == "__main__":
    main()
