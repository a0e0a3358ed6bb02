# SPDX-License-Identifier: BSD-3-Clause
"""--scrub-during: a patrol read (nbdstripe scrub) kept running on the
volume for the whole of each measured run of the plugin, through the
control socket the plugin opens beside its status file (status=), with the
request `nbdstripe scrub` makes: {"op": "scrub", "rate": BYTES}."""

import json
import socket
import threading
import time

from .util import BenchError

# include/scrub.h SCRUB_DEFAULT_RATE: what `nbdstripe scrub` asks for
# without --rate.
SCRUB_DEFAULT_RATE = 256 * 1024 * 1024
POLL_S = 0.25


def ctl_ask(path, req):
    """One request on a control socket, one JSON answer."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    try:
        s.connect(path)
        s.sendall((json.dumps(req) + "\n").encode())
        buf = b""
        while True:
            d = s.recv(65536)
            if not d:
                break
            buf += d
    finally:
        s.close()
    return json.loads(buf.decode())


def status(path):
    ans = ctl_ask(path, {"op": "status"})
    if not ans.get("ok"):
        raise BenchError("control socket %s: %s" % (path, ans.get("error")))
    return ans.get("status") or ans


def scrub_status(path):
    return status(path).get("scrub")


def health_params(path):
    """The volume's health settings (drive_interval: the drive poller's
    period, seconds)."""
    return status(path).get("health") or {}


class ScrubDuring:
    """A scrub from start() to stop(): started, started again each time it
    ends (a small volume is read in less than a run), cancelled at stop().
    stop() returns what it did: the rate asked for, scrubs started, bytes
    read by them (between two, at most a poll without one)."""

    def __init__(self, ctl_path, rate=SCRUB_DEFAULT_RATE):
        self.ctl = ctl_path
        self.rate = rate
        self.started = 0
        self.bytes_read = 0
        self.error = None
        self.stop_ev = threading.Event()
        self.thread = None

    def _start_one(self):
        ans = ctl_ask(self.ctl, {"op": "scrub", "rate": self.rate})
        if not ans.get("ok"):
            raise BenchError("scrub did not start: %s" % ans.get("error"))
        self.started += 1

    def _loop(self):
        try:
            while not self.stop_ev.wait(POLL_S):
                s = scrub_status(self.ctl) or {}
                if s.get("state") != "running":
                    self.bytes_read += s.get("bytes_read", 0)
                    if s.get("state") != "done":
                        raise BenchError("the scrub ended %s: %s" % (s.get("state"), s.get("error")))
                    self._start_one()
        except (OSError, ValueError, BenchError) as e:
            self.error = str(e)

    def start(self):
        self._start_one()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def stop(self):
        self.stop_ev.set()
        self.thread.join()
        if self.error:
            raise BenchError("--scrub-during: %s" % self.error)
        if (scrub_status(self.ctl) or {}).get("state") == "running":
            ctl_ask(self.ctl, {"op": "scrub_cancel"})
        deadline = time.monotonic() + 30
        while True:
            s = scrub_status(self.ctl) or {}
            if s.get("state") != "running":
                break
            if time.monotonic() > deadline:
                raise BenchError("--scrub-during: the scrub was not cancelled within 30 s")
            time.sleep(0.05)
        self.bytes_read += s.get("bytes_read", 0)
        return {"rate_limit": self.rate, "scrubs_started": self.started,
                "bytes_read": self.bytes_read}
