"""Minimal TAP producer for the end-to-end tests (meson reads TAP)."""
import sys
import traceback


class Tap:
    def __init__(self):
        self.n = 0
        self.failed = 0

    def _emit(self, line):
        print(line, flush=True)

    def diag(self, text):
        for line in str(text).splitlines() or [""]:
            self._emit(f"# {line}")

    def ok(self, cond, desc, diag=None):
        self.n += 1
        if cond:
            self._emit(f"ok {self.n} - {desc}")
        else:
            self.failed += 1
            self._emit(f"not ok {self.n} - {desc}")
            if diag is not None:
                self.diag(diag)
        return bool(cond)

    def eq(self, got, want, desc):
        return self.ok(got == want, desc, diag=f"got {got!r}, want {want!r}")

    def skip(self, desc, reason):
        self.n += 1
        self._emit(f"ok {self.n} - {desc} # SKIP {reason}")

    def case(self, desc, func, *args):
        """Runs func(*args); an exception is a failure of that case."""
        try:
            func(*args)
        except Exception:
            self.ok(False, desc, diag=traceback.format_exc())

    def done(self):
        self._emit(f"1..{self.n}")
        sys.exit(1 if self.failed else 0)

    def bail(self, reason):
        # TAP reads nothing after the bail-out line: the details come first
        lines = str(reason).splitlines() or [""]
        for line in lines[1:]:
            self._emit(f"# {line}")
        self._emit(f"Bail out! {lines[0]}")
        sys.exit(1)
