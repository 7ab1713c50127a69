#!/usr/bin/python3
"""The CLI restarts itself once with glibc's huge-page tunable (src/cli/huge_pages.h): the running
process's environment carries glibc.malloc.hugetlb=1; a value the user set is kept, and
MMINFER_HUGE_PAGES=0 leaves the environment alone. Observed through /proc/PID/environ of
`mminfer serve` on an empty repository. (glibc rewrites a list of several tunables in that
memory as it reads them, so the case of a list is not observable there.)

  huge_pages_restart.py MMINFER
"""
import os
import subprocess
import sys
import tempfile
import time


def environ_of_server(mminfer, repo, extra_env):
    env = {k: v for k, v in os.environ.items() if k not in ("GLIBC_TUNABLES", "MMINFER_HUGE_PAGES")}
    env.update(extra_env)
    p = subprocess.Popen([mminfer, "serve", "--repository", repo, "--port", "0"], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.time() + 60
        for line in p.stdout:
            if "listening on" in line:
                break
            if time.time() > deadline:
                sys.exit("server did not start")
        else:
            sys.exit(f"server exited with {p.wait()} before listening")
        with open(f"/proc/{p.pid}/environ", "rb") as f:
            pairs = [e.split(b"=", 1) for e in f.read().split(b"\0") if b"=" in e]
        return {k.decode(): v.decode() for k, v in pairs}
    finally:
        p.terminate()
        p.wait(timeout=30)


def main():
    mminfer = sys.argv[1]
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            offered = "[never]" not in f.read()
    except OSError:
        offered = False
    failures = []

    def expect(what, got, want):
        if got != want:
            failures.append(f"{what}: GLIBC_TUNABLES is {got!r}, expected {want!r}")

    with tempfile.TemporaryDirectory() as repo:
        on = "glibc.malloc.hugetlb=1" if offered else None
        expect("default", environ_of_server(mminfer, repo, {}).get("GLIBC_TUNABLES"), on)
        expect("the user's own value",
               environ_of_server(mminfer, repo, {"GLIBC_TUNABLES": "glibc.malloc.hugetlb=0"}).get("GLIBC_TUNABLES"),
               "glibc.malloc.hugetlb=0")
        expect("MMINFER_HUGE_PAGES=0",
               environ_of_server(mminfer, repo, {"MMINFER_HUGE_PAGES": "0"}).get("GLIBC_TUNABLES"), None)
    for f in failures:
        print("FAIL", f)
    if failures:
        sys.exit(1)
    print("huge-page restart: 3 cases pass" + ("" if offered else " (transparent huge pages off here: no restart)"))


if __name__ == "__main__":
    main()
