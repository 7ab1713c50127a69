"""What the command-line checks of tests/generate share: one ok/FAIL line per check and a summary
that becomes the exit status."""


class Checks:
    def __init__(self):
        self.failures = []

    def __call__(self, ok, what):
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            self.failures.append(what)

    def summary(self):
        print(f"{len(self.failures)} failures")
        return 1 if self.failures else 0
