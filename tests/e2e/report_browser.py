#!/usr/bin/env python3
"""A campaign report as a browser draws it: Debian's chromium, headless, at
1280 px. A copy of the report gets a small script that measures the page
(with every <details> folded, then unfolded) and writes what it found into
the page, which chromium prints (--dump-dom). The report itself has no such
script.

e2e-campaign checks the quick campaign's report this way. Run alone (the
report-browser test), it renders the results recorded in tests/unit/data/
and a made-up worst case (three kernels, two QEMUs, two hosts, many
injections, long names, QEMU dying) and checks those; exit 77 (a skip) without chromium.

  python3 report_browser.py [REPORT.html]   the measurements as JSON
"""
import copy
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "run", "lib"))

from tap import Tap  # noqa: E402
from vmcelab import report as vmce_report  # noqa: E402

WIDTH = 1280

# how wide the page's content is, and any element past the window's right
# edge that nothing clips (an ellipsis clips; a scroll bar inside counts)
PROBE = r"""<script>
addEventListener("load", function () {
  function measure() {
    var de = document.documentElement, w = de.clientWidth, over = [];
    document.querySelectorAll("body *").forEach(function (el) {
      var r = el.getBoundingClientRect();
      if (r.width === 0 && r.height === 0) return;
      var cs = getComputedStyle(el);
      if ((cs.overflowX === "auto" || cs.overflowX === "scroll") && el.scrollWidth > el.clientWidth + 1)
        over.push("scrolls inside: " + el.tagName + " " + el.scrollWidth + " > " + el.clientWidth);
      if (r.right <= w + 0.5 && r.left >= -0.5) return;
      for (var a = el.parentElement; a && a !== document.body; a = a.parentElement) {
        var ox = getComputedStyle(a).overflowX;
        if (ox !== "visible" && a.getBoundingClientRect().right <= w + 0.5) return;
      }
      over.push(el.tagName + (el.id ? "#" + el.id : "") + " " + Math.round(r.left) + ".." +
                Math.round(r.right) + ": " + (el.textContent || "").slice(0, 60));
    });
    return {width: w, scrollWidth: Math.max(de.scrollWidth, document.body.scrollWidth),
            over: over.slice(0, 20)};
  }
  var folded = measure();
  document.querySelectorAll("details").forEach(function (d) { d.open = true; });
  var unfolded = measure();
  var s = document.getElementById("summary");
  var out = document.createElement("pre");
  out.id = "vmce-probe";
  out.textContent = JSON.stringify({folded: folded, unfolded: unfolded,
                                    details: document.querySelectorAll("details").length,
                                    summary: s ? s.innerText : null});
  document.body.appendChild(out);
});
</script>"""


def chromium():
    return shutil.which("chromium") or shutil.which("chromium-browser")


def measure(report, width=WIDTH, timeout=120):
    """What chromium found in @report, as a dict; RuntimeError when it says
    nothing usable"""
    with tempfile.TemporaryDirectory(prefix="vmce-report-") as tmp:
        with open(report) as f:
            page = f.read()
        copy_ = os.path.join(tmp, "report.html")
        with open(copy_, "w") as f:
            f.write(page.replace("</body>", PROBE + "\n</body>", 1))
        res = subprocess.run(
            [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             f"--window-size={width},1000", f"--user-data-dir={os.path.join(tmp, 'profile')}",
             "--virtual-time-budget=5000", "--dump-dom", "file://" + copy_],
            capture_output=True, text=True, timeout=timeout)
        m = re.search(r'<pre id="vmce-probe">(.*?)</pre>', res.stdout, re.S)
        if not m:
            raise RuntimeError(f"chromium exit {res.returncode}, no measurements: {res.stderr[-1500:]}")
        return json.loads(html.unescape(m.group(1)))


def printed_pages(report, timeout=120):
    """How many pages chromium prints @report on"""
    with tempfile.TemporaryDirectory(prefix="vmce-report-") as tmp:
        pdf = os.path.join(tmp, "report.pdf")
        subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-pdf-header-footer",
                        f"--user-data-dir={os.path.join(tmp, 'profile')}", f"--print-to-pdf={pdf}",
                        "file://" + os.path.abspath(report)], capture_output=True, timeout=timeout)
        with open(pdf, "rb") as f:
            return len(re.findall(rb"/Type\s*/Page\b", f.read()))


def went_down(results):
    """The page types whose guest went down, from the evidence (not from
    the report's own reading of it): a panic, a crash afterwards, a kernel
    page left poisoned in use, the guest or QEMU gone"""
    pages = set()
    for r in results:
        obs = r.get("observed") or {}
        after = obs.get("aftermath") or {}
        if obs.get("panic") or after.get("crash") or after.get("how") == "in-use" \
                or obs.get("guest_alive") is False or obs.get("qemu_alive") is False:
            pages.add(r["case"]["page"])
    return sorted(pages)


def check(tap, report, results, what="the report"):
    """@report at 1280 px: nothing wider than the page, folded or unfolded;
    its summary names every page type whose guest went down in @results"""
    try:
        seen = measure(report)
    except (RuntimeError, OSError, subprocess.TimeoutExpired, ValueError) as e:
        tap.ok(False, f"{what} in headless chromium", diag=str(e))
        return
    for state in ("folded", "unfolded"):
        m = seen[state]
        tap.ok(m["scrollWidth"] <= m["width"] and not m["over"],
               f"{what} at {WIDTH} px, evidence {state}: nothing wider than the page "
               f"({m['scrollWidth']} px for {m['width']})", diag="\n".join(m["over"]))
    down = went_down(results)
    summary = seen.get("summary") or ""
    missing = [p for p in down if not re.search(rf"(?<![\w-]){re.escape(p)}(?![\w-])", summary)]
    tap.ok(down and "panics on" in summary and not missing,
           f"{what}: the summary names the page types whose guest went down ({', '.join(down)})",
           diag=f"missing {missing} in: {summary}")
    tap.ok(seen.get("details", 0) >= sum(1 for _ in results), f"{what}: each case's evidence is folded",
           diag=f"{seen.get('details')} <details> for {len(results)} cases")
    # printed, the evidence is there: as many pages as with every <details> open
    with tempfile.TemporaryDirectory(prefix="vmce-report-") as tmp:
        unfolded = os.path.join(tmp, "unfolded.html")
        with open(report) as f, open(unfolded, "w") as out:
            out.write(f.read().replace("<details>", "<details open>"))
        try:
            pages, want = printed_pages(report), printed_pages(unfolded)
        except (OSError, subprocess.TimeoutExpired) as e:
            pages, want = None, str(e)
    tap.ok(pages and pages == want, f"{what}: printed with its evidence unfolded ({pages} pages)",
           diag=f"{pages} pages printed, {want} with every <details> open")


# a QEMU of one's own, by a long path, judged as the nearest known one
LONG_QEMU = "/home/developer/src/qemu-with-a-long-branch-name/build-debug/qemu-system-x86_64"


def worst_case(results):
    """@results on three kernels under two QEMUs (one by a long path) and
    on two hosts, with many injections, long names, and QEMU dying of the
    errors it handles itself: the widest report the matrices and tables
    must still fit"""
    out = []
    for i, r in enumerate(results):
        for kernel in ("debian-6.1", "vmce-6.1", "/boot/vmlinuz-6.12.0-a-very-long-kernel-name-indeed"):
            for qemu in ("debian-10.0", LONG_QEMU):
                for host in ("h1", "host-with-a-rather-long-name.example.org"):
                    x = copy.deepcopy(r)
                    case = x["case"]
                    case["inject"] = f"guest-injection-number-{i}-with-a-long-name"
                    case["key"] = case["id"].split("@")[0] + "/" + "long" * 10
                    case["kernel"] = kernel
                    case["qemu"] = qemu
                    case["qemu_info"] = {"name": qemu, "release": "10.0.2 (Debian 1:10.0.2+ds-2+deb13u1~bpo12+1)",
                                         "table": "debian-10.0",
                                         "nearest": "debian-10.0" if qemu == LONG_QEMU else None}
                    if i % 3 == 0 and x.get("observed"):
                        # left to QEMU, which died of it
                        case["forwarder"] = "qemu"
                        case["key"] += ":by-qemu"
                        x["observed"] = dict(x["observed"], qemu_alive=False, guest_alive=False, qemu_exit={
                            "how": "killed by signal 6 (SIGABRT)", "status": -6,
                            "said": "qemu-system-x86_64: ../../util/qemu-thread-posix.c:87: qemu_mutex_lock_impl: "
                                    "Assertion `mutex->initialized' failed."})
                        x["expected"] = dict(x.get("expected") or {}, qemu="dies", qemu_table="debian-10.0",
                                             qemu_nearest=qemu == LONG_QEMU)
                    case["id"] = f"{case['key']}@{kernel}@qemu={qemu}"
                    x["host"] = host
                    out.append(x)
    return out


def main():
    if len(sys.argv) > 1:
        print(json.dumps(measure(sys.argv[1]), indent=1))
        return
    if not chromium():
        print("report-browser: skipped: no chromium (Debian's `chromium`; run/install-deps installs it)")
        sys.exit(77)
    tap = Tap()
    meta, results, timeline, skipped = vmce_report.load(
        os.path.join(HERE, "..", "unit", "data", "quick-results.jsonl"))
    with tempfile.TemporaryDirectory(prefix="vmce-report-") as tmp:
        path = os.path.join(tmp, "report.html")
        for what, rs, tl in (("the recorded quick results' report", results, timeline),
                             ("a report of three kernels under two QEMUs on two hosts",
                              worst_case(results), [])):
            with open(path, "w") as f:
                f.write(vmce_report.render(meta, rs, tl, skipped))
            check(tap, path, rs, what)
    tap.done()


if __name__ == "__main__":
    main()
