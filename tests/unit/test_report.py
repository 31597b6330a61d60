#!/usr/bin/env python3
"""The report writer: what the guest did and the verdict apart, the summary
in words, kernels and hosts side by side, one self-contained HTML file, and
what it does with results it cannot use."""
import copy
import html
import json
import os
import re
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "run", "lib"))

from vmcelab.report import (OUTCOMES, classify, load, matrix_html, qemu_matrix_html,  # noqa: E402
                            variants_section, outcome, outcome_label, render, side_by_side_text, summary_text,
                            timeline_svg, times_svg)

DATA = os.path.join(os.path.dirname(__file__), "data")
# recorded by `run/campaign --quick` on debian-6.1 (and a case the bench
# could not set up): tests/unit/data/README.md
RECORDED = os.path.join(DATA, "quick-results.jsonl")


def result(page, kind, verdict, ms=120.0, kill="early", inject="host"):
    case = dict(id=f"m/{page}/{kind}/{kill}/{inject}/recovery1/0", page=page, kind=kind, kill=kill,
                inject=inject, recovery=1, burst=1, repeat=False)
    obs = dict(actions={"0x42": ["dirty LRU page", "Recovered"]}, ms_to_action=ms,
               signals=[{"pid": 1, "code": 5, "code_name": "BUS_MCEERR_AO", "addr": "0x1000", "lsb": 12}],
               checks=[], panic=None, trouble=["WARNING: <odd> & \"quoted\""], hardware_corrupted_kb=4,
               guest_alive=True, qemu_alive=True)
    return dict(case=case, verdict=verdict, observed=obs if verdict != "not run" else None,
                reasons=["because <reasons>"], expected={"summary": "dirty LRU page: Recovered"},
                not_run="no hugepages" if verdict == "not run" else None)


RESULTS = [result("anon-dirty", "ao", "pass"), result("anon-dirty", "ar", "fail", 300),
           result("shmem", "ao", "unexpected"), result("ksm", "ao", "not run", None),
           result("anon-dirty", "ao", "pass", kill="late")]
TIMELINE = [dict(vm="g-0", event="boot", start=0.0, end=3.0, boot=1),
            dict(vm="g-0", event="case", start=3.0, end=4.5, case="x", verdict="pass"),
            dict(vm="g-1", event="case", start=1.0, end=9.0, case="y", verdict="fail")]


def text(page):
    """The page's words, as a reader sees them"""
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page)))


def summary_of(page):
    m = re.search(r'<section id="summary">(.*?)</section>', page, re.S)
    return text(m.group(1)) if m else ""


def recorded():
    meta, results, timeline, skipped = load(RECORDED)
    return meta, {r["case"]["id"].split("/")[0]: r for r in results}, timeline, skipped


class Recorded(unittest.TestCase):
    """Real results: a guest that panics, one that recovers, one that killed
    the process, and a case that did not run"""

    def test_outcome_labels(self):
        _, by, _, skipped = recorded()
        self.assertEqual(skipped, [])
        want = {"ksm": "guest panicked", "pagetable": "guest panicked", "recovery-off": "guest panicked",
                "slab": "guest doomed", "late-kill": "process killed (AR)", "consumed": "not run"}
        for name, label in want.items():
            self.assertEqual(outcome_label(by[name]), label, name)
        # one of page-types/* recovered (free, clean page cache), another killed (anon-dirty)
        page_types = [r for r in load(RECORDED)[1] if r["case"]["id"].startswith("page-types/")]
        labels = {r["case"]["page"]: outcome_label(r) for r in page_types}
        self.assertEqual(labels, {"anon-dirty": "process killed (AO)", "pagecache-clean": "recovered",
                                  "free": "recovered"})
        # a panic the guest was expected to have is still a panic, and still a pass
        self.assertEqual(by["ksm"]["verdict"], "pass")

    def test_summary_in_words(self):
        meta, by, timeline, skipped = recorded()
        results = load(RECORDED)[1]
        page = render(meta, results, timeline, skipped)
        s = summary_of(page)
        self.assertIn("Guest kernel debian-6.1 (6.1.0-57-amd64) survives 4 of 8 error kinds", s)
        self.assertIn("it panics on: ksm (ksmd reads the page), pagetable (at process exit), "
                      "anon-dirty AO recovery=0 (memory_failure_recovery=0)", s)
        self.assertIn("it is left to panic on: slab (the kernel still uses the page)", s)
        self.assertIn("1 case did not run: pagecache-dirty AR (the page did not reach the "
                      "pagecache-dirty state", s)
        # each named case links to its row
        for name in ("ksm", "pagetable", "slab", "consumed"):
            anchor = re.search(rf'<a href="#(case-{name}[^"]*)">', page)
            self.assertTrue(anchor, name)
            self.assertIn(f'<tr id="{anchor.group(1)}">', page)

    def test_summary_as_text(self):
        # what run/campaign prints at its end: the same words, no markup
        lines = summary_text(load(RECORDED)[1])
        self.assertEqual(len(lines), 1)
        self.assertTrue(lines[0].startswith("Guest kernel debian-6.1 (6.1.0-57-amd64) survives 4 of 8 error "
                                            "kinds; it panics on: ksm (ksmd reads the page), pagetable"), lines)
        self.assertNotIn("<", lines[0])

    def test_cells_say_what_the_guest_did_and_the_verdict_apart(self):
        meta, by, timeline, _ = recorded()
        html = matrix_html(list(by.values()))
        ksm = re.search(r'<th class="row" title="ksm">ksm</th><td>(.*?)</td>', html).group(1)
        self.assertIn(">guest panicked<", ksm)
        self.assertIn("\u2713 as expected", ksm)
        self.assertIn(OUTCOMES["panicked"][1], ksm)
        self.assertIn(">not run<", html)
        self.assertIn("\u2013 not run", html)
        page = render(meta, list(by.values()), timeline)
        for key, (label, _, _) in OUTCOMES.items():
            if key != "unknown":
                self.assertIn(f">{label}</span>", page, "the legend names every outcome")
        for verdict in ("as expected", "not as expected", "no expectation", "not run"):
            self.assertIn(verdict, page)

    def test_evidence_folded_log_first(self):
        meta, by, timeline, _ = recorded()
        page = render(meta, list(by.values()), timeline)
        row = re.search(r'<tr id="case-ksm[^"]*">(.*?)</tr>', page, re.S).group(1)
        details = row[row.index("<details>"):]
        self.assertTrue(details.startswith("<details><summary>8 kernel log lines"))
        self.assertLess(details.index('<pre class="log">'), details.index("<ul>"))
        self.assertIn("Memory failure: 0x6e07: recovery action for unmapping failed page: Ignored", details)
        self.assertIn("(afterwards, ksm-merge) Fatal machine check", details)

    def test_truncated_last_line(self):
        with open(RECORDED) as f:
            lines = f.readlines()
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "results.jsonl")
            # an interrupted run: the last case record half written
            case = next(line for line in lines if '"type": "case"' in line)
            with open(path, "w") as f:
                f.writelines(lines[:-1])
                f.write(case[:len(case) // 2])
            meta, results, timeline, skipped = load(path)
        # the start record, the cases, not the end record nor the half case
        self.assertEqual(len(results), len(lines) - 2)
        self.assertEqual(timeline, [])
        self.assertEqual(skipped, [f"results.jsonl line {len(lines)}: cut short (an interrupted run): left out"])
        page = render(meta, results, timeline, skipped)
        self.assertIn("Left out or shown as is", page)
        self.assertIn("cut short (an interrupted run)", summary_of(page))
        self.assertIn("No timeline.", page)


class BadInput(unittest.TestCase):
    def test_empty_campaign(self):
        page = render({"name": "empty"}, [], [])
        self.assertTrue(page.rstrip().endswith("</html>"))
        self.assertIn("No case ran", page)
        self.assertIn("0 cases: none", page)

    def test_unknown_outcomes(self):
        odd = result("shmem", "ao", "flaky")
        said = result("anon-dirty", "ao", "pass")
        said["observed"]["actions"] = {"0x42": ["dirty LRU page", "Postponed"]}
        said["observed"]["signals"] = []
        junk = {"verdict": "pass"}  # no case at all
        page = render({"name": "odd"}, [odd, said, junk, "not a record"], [{"vm": "g", "start": "x"}])
        s = summary_of(page)
        self.assertIn("1 case(s) with a verdict this report does not know ('flaky'): shown as such", s)
        self.assertIn("handler said Postponed, an answer this report does not know", s)
        self.assertIn("result 3: no case id: left out", s)
        self.assertIn("result 4: no case id: left out", s)
        self.assertIn("1 timeline entr(y/ies) without a VM, a host name or times: left out", s)
        self.assertIn("verdict &#x27;flaky&#x27;", page)
        self.assertEqual(classify(said), "unknown")

    def test_odd_fields(self):
        """Fields that are not what a campaign writes: the record is left
        out or shown without them, and the report says so"""
        _, results, timeline, _ = load(RECORDED)
        bad = copy.deepcopy(results[:3])
        bad[0]["observed"]["signals"] = ["not a signal"]
        bad[1]["expected"] = "a string"
        bad[2]["observed"] = [1, 2]
        bad.append(dict(copy.deepcopy(results[3]), host={"name": "h1"}))
        page = render({}, bad, timeline + [{"vm": "g", "start": 1, "end": 2, "case": ["x"]}])
        s = summary_of(page)
        self.assertIn(f"{bad[0]['case']['id']}: a record this report cannot read (AttributeError", s)
        self.assertIn(f"{bad[1]['case']['id']}: a record this report cannot read (AttributeError", s)
        self.assertIn(f"{bad[2]['case']['id']}: its evidence is not a record: shown without it", s)
        self.assertIn(f"{bad[3]['case']['id']}: its host is not a name: shown without one", s)
        self.assertIn("1 timeline entr(y/ies) without a VM, a host name or times: left out", s)
        self.assertIn(f'<tr id="case-{bad[2]["case"]["id"].split("/")[0]}', page)


def on_host(r, host, **obs):
    r = copy.deepcopy(r)
    r["host"] = host
    r["observed"] = dict(r["observed"] or {}, **obs) if obs or r["observed"] else None
    return r


class Hosts(unittest.TestCase):
    """Cases spread over hosts, one case on two of them, a host lost"""

    def setUp(self):
        _, by, _, _ = recorded()
        ksm, pc, late, nr = by["ksm"], by["page-types"], by["late-kill"], by["consumed"]
        self.results = [on_host(ksm, "h1"), on_host(pc, "h2"), on_host(late, "h1"),
                        # the same case on h2: its QEMU went away
                        on_host(late, "h2", qemu_alive=False),
                        dict(on_host(nr, "h3"), not_run="host lost: ssh: connection refused",
                             reasons=["host lost: ssh: connection refused"])]
        t = 100.0
        self.timeline = [dict(vm="small-0", host="h1", event="boot", start=t, end=t + 3, boot=1),
                         dict(vm="small-0", host="h1", event="case", start=t + 3, end=t + 4,
                              case=ksm["case"]["id"], verdict="pass"),
                         dict(vm="small-0", host="h2", event="boot", start=t, end=t + 5, boot=1)]
        self.meta = {"name": "spread", "hosts": [{"name": "h1", "target": "ssh://root@10.0.0.1", "lost": None},
                                                 {"name": "h2", "target": "ssh://root@10.0.0.2", "lost": None},
                                                 {"name": "h3", "target": "ssh://root@10.0.0.3",
                                                  "lost": "ssh: connection refused"}]}

    def test_host_column_side_by_side_and_lanes(self):
        page = render(self.meta, self.results, self.timeline)
        self.assertIn("<th>host</th>", page)
        self.assertIn("h3 (ssh://root@10.0.0.3) <b>lost: ssh: connection refused</b>", page)
        side = variants_section(self.results)
        self.assertIn("<th>h1</th><th>h2</th>", side)
        self.assertEqual(side.count("<li>"), 1, "one case ran on two hosts, and it differs")
        self.assertIn("h1: <i>process killed (AR)</i>", side)
        self.assertIn("h2: <i>QEMU died</i>", side)
        s = summary_of(page)
        self.assertIn("QEMU dies on: anon-dirty AO late on h2 (QEMU exited)", s)
        self.assertIn("did not run: pagecache-dirty AR on h3 (host lost: ssh: connection refused)", s)
        svg = timeline_svg(self.timeline, self.results)
        ET.fromstring(svg)
        self.assertIn(">host h1<", svg)
        self.assertIn(">host h2<", svg)
        self.assertLess(svg.index(">host h1<"), svg.index(">host h2<"))
        # the case on two hosts: two rows, two anchors
        late = [m for m in re.findall(r'<tr id="(case-late-kill[^"]*)">', page)]
        self.assertEqual(len(set(late)), 2)

    def test_spread_without_replicas_is_no_comparison(self):
        spread = [r for r in self.results if not (r["host"] == "h2" and r["case"]["page"] == "anon-dirty")]
        self.assertEqual(variants_section(spread), "")
        self.assertIn("<th>host</th>", render({}, spread, []))

    def test_without_hosts(self):
        page = render({}, RESULTS, TIMELINE)
        self.assertNotIn("<th>host</th>", page)
        self.assertNotIn(">host ", timeline_svg(TIMELINE))


class Report(unittest.TestCase):
    def test_svgs_are_well_formed(self):
        for svg in (times_svg(RESULTS), timeline_svg(TIMELINE)):
            root = ET.fromstring(svg)
            self.assertTrue(root.tag.endswith("svg"))
            self.assertIn("viewBox", svg)  # scales to the page

    def test_matrix(self):
        html = matrix_html(RESULTS)
        # page types are rows, injections columns
        self.assertIn('<th class="row" title="anon-dirty">anon-dirty</th>', html)
        self.assertIn(">AO late<", html)
        self.assertIn("\u2717 not as expected", html)
        self.assertIn("? unexpected extras", html)
        # many injections: the columns wrap into more tables, none too wide
        many = [result("anon-dirty", "ao", "pass", inject=f"guest-x{i}") for i in range(20)]
        wide = matrix_html(many)
        self.assertEqual(wide.count("<table"), 3)
        self.assertEqual(max(t.count("<th title=") for t in wide.split("<table")[1:]), 7)

    def test_whole_report(self):
        page = render({"name": "t & <x>", "seed": 1, "time": 0}, RESULTS, TIMELINE)
        self.assertTrue(page.startswith("<!DOCTYPE html>"))
        self.assertIn("t &amp; &lt;x&gt;", page)
        self.assertNotIn("<odd>", page)  # escaped
        for r in RESULTS:
            self.assertIn(r["case"]["id"].replace("/", "/<wbr>"), page)
        self.assertEqual(page.count("<svg"), 2)
        # self-contained: nothing fetched from elsewhere, links only within
        self.assertNotIn("src=", page)
        self.assertEqual(re.findall(r'href="[^#]', page), [])
        self.assertNotIn("@import", page)
        # printed: every <details> open, colours kept, labels carry the meaning
        self.assertIn("@media print", page)
        self.assertIn("details::details-content", page)
        self.assertIn('d.open = true', page)

    def test_one_kernel_no_comparison(self):
        self.assertEqual(variants_section(RESULTS), "")

    def test_kernels_side_by_side(self):
        def on(kernel, action, codes, crash=None, nearest=False):
            r = result("ksm", "ao", "pass")
            r["case"].update(kernel=kernel, key=r["case"]["id"], id=r["case"]["id"] + "@" + kernel)
            r["observed"]["actions"] = {"0x2baf": list(action)}
            r["observed"]["signals"] = [{"pid": p, "code_name": c} for p, c in codes]
            r["observed"]["aftermath"] = {"how": "ksm-merge", "crash": crash}
            r["observed"]["trouble"] = []
            r["expected"] = {"summary": "-", "nearest": nearest, "table": "debian-6.12"}
            return r
        same = [on(k, ("dirty LRU page", "Recovered"), [(1, "BUS_MCEERR_AO")]) for k in ("a", "b")]
        results = [
            on("debian-6.1", ("unmapping failed page", "Ignored"), [], crash="Fatal machine check"),
            on("vmce-6.1", ("dirty LRU page", "Recovered"), [(170, "BUS_MCEERR_AO")]),
            # addresses differ from run to run, not between kernels
            on("debian-6.12", ("dirty LRU page", "Recovered"), [(171, "BUS_MCEERR_AO")],
               crash="BUG: unable to handle page fault for address: ffff888002baf000"),
            on("/boot/vmlinuz-6.11", ("dirty LRU page", "Recovered"), [(2, "BUS_MCEERR_AO")],
               crash="BUG: unable to handle page fault for address: ffff888002ba3000", nearest=True),
        ]
        html = variants_section(results)
        for k in ("debian-6.1", "vmce-6.1", "debian-6.12", "/boot/vmlinuz-6.11 (judged as debian-6.12)"):
            self.assertIn(f"<th>{k}</th>", html)
        self.assertIn("&asymp;", html)
        self.assertEqual(html.count("<li>"), 1, "one case, and it differs")
        self.assertEqual(outcome(results[2]), outcome(results[3]))
        self.assertIn("unmapping failed page: Ignored · no signal · then Fatal machine check", html)
        self.assertIn("vmce-6.1: <i>process killed (AO)</i>", html)
        self.assertIn("debian-6.1: <i>guest panicked</i>", html)
        self.assertIn("nothing: every case came out the same", variants_section(same))
        page = render({"name": "k"}, results, [])
        self.assertIn("Side by side: debian-6.1, vmce-6.1", page)
        # one sentence per kernel
        s = summary_of(page)
        self.assertIn("Guest kernel vmce-6.1 survives 1 of 1 error kind: every one.", s)
        self.assertIn("Guest kernel debian-6.1 survives 0 of 1 error kind; it panics on: ksm "
                      "(ksmd reads the page).", s)

    def test_empty_times(self):
        self.assertIn("No case", times_svg([result("ksm", "ao", "not run", None)]))

    def test_recorded_data_is_json_lines(self):
        with open(RECORDED) as f:
            for line in f:
                json.loads(line)


RELEASES = {"debian-7.2": "7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3)",
            "debian-10.0": "10.0.2 (Debian 1:10.0.2+ds-2+deb13u1~bpo12+1)",
            "vmce-10.0": "10.0.13 (Debian 1:10.0.13+ds-0+deb13u1)"}


def under(qemu, r, kernel=None, forwarder=None, **obs):
    """@r as run under QEMU @qemu (and on @kernel), as a campaign with more
    than one QEMU records it"""
    r = copy.deepcopy(r)
    case = r["case"]
    case["key"] = case.get("key") or case["id"].split("@")[0]
    if kernel:
        case.update(kernel=kernel, kernel_info={"name": kernel, "release": f"{kernel}.0-release"})
    if forwarder:
        case["forwarder"] = forwarder
        case["key"] = case["key"].replace("/0", ":by-qemu/0")
    case.update(qemu=qemu, qemu_info={"name": qemu, "release": RELEASES.get(qemu, "8.2.2"), "table": qemu
                                      if qemu in RELEASES else "debian-7.2",
                                      "nearest": None if qemu in RELEASES else "debian-7.2"})
    case["id"] = f"{case['key']}@{case.get('kernel') or 'debian-6.1'}@qemu={qemu}"
    if obs:
        r["observed"] = dict(r["observed"] or {}, **obs)
    return r


class Qemus(unittest.TestCase):
    """The same cases under several QEMUs: Debian's 7.2 and 10.0 die of a
    host error they handle themselves under TCG, vmce's 10.0 forwards it"""

    def setUp(self):
        _, by, _, _ = recorded()
        self.pc = next(r for r in load(RECORDED)[1] if r["case"]["id"].startswith("page-types/anon-dirty/"))
        self.ksm = by["ksm"]
        died = dict(qemu_alive=False, guest_alive=False, actions={}, signals=[], trouble=[],
                    ms_to_action=None, panic=None,
                    qemu_exit={"how": "killed by signal 6 (SIGABRT)", "status": -6,
                               "said": "qemu-system-x86_64: ../../util/qemu-thread-posix.c:87: "
                                       "qemu_mutex_lock_impl: Assertion `mutex->initialized' failed."})
        self.results = []
        for q in ("debian-7.2", "debian-10.0", "vmce-10.0"):
            self.results.append(under(q, self.pc))  # forwarded by vmced: the same everywhere
            self.results.append(under(q, self.ksm))
            by_qemu = under(q, self.pc, forwarder="qemu", **(died if q != "vmce-10.0" else {}))
            by_qemu["expected"] = dict(by_qemu["expected"] or {}, qemu="dies" if q != "vmce-10.0" else "forwards",
                                       qemu_table=q)
            self.results.append(by_qemu)
        self.meta = {"name": "qemus", "qemus": [{"name": q, "release": RELEASES[q], "table": q, "nearest": None}
                                                for q in ("debian-7.2", "debian-10.0", "vmce-10.0")]}

    def test_a_sentence_per_qemu(self):
        page = render(self.meta, self.results, [])
        s = summary_of(page)
        for q in ("debian-7.2", "debian-10.0"):
            self.assertIn(f"Guest kernel debian-6.1 (6.1.0-57-amd64) under QEMU {q} ({RELEASES[q]}) survives "
                          "1 of 3 error kinds; it panics on: ksm (ksmd reads the page); QEMU dies on: "
                          "anon-dirty AO by QEMU (QEMU killed by signal 6 (SIGABRT)).", s)
        self.assertIn("Guest kernel debian-6.1 (6.1.0-57-amd64) under QEMU vmce-10.0 (10.0.13 (Debian "
                      "1:10.0.13+ds-0+deb13u1)) survives 2 of 3 error kinds; it panics on: ksm", s)
        self.assertEqual(len(summary_text(self.results)), 3)
        # the run names every QEMU with its release
        meta = re.search(r'<p class="meta">(.*?)</p>', page).group(1)
        self.assertIn(html.escape(f"QEMU debian-7.2 ({RELEASES['debian-7.2']}), debian-10.0 "
                                  f"({RELEASES['debian-10.0']}), vmce-10.0 ({RELEASES['vmce-10.0']})"), meta)
        # and without the meta (a results file rendered again), from the records
        self.assertIn("debian-10.0 (10.0.2 (Debian", re.search(r'<p class="meta">(.*?)</p>',
                                                               render({}, self.results, [])).group(1))

    def test_page_type_by_qemu(self):
        m = qemu_matrix_html(self.results)
        self.assertIn("page \\ QEMU", m)
        for q in ("debian-7.2", "debian-10.0", "vmce-10.0"):
            self.assertIn(f">QEMU {q}</th>", m)
        row = re.search(r'<th class="row" title="anon-dirty">anon-dirty</th>(.*?)</tr>', m).group(1)
        cells = re.findall(r"<td>(.*?)</td>", row)
        self.assertEqual(len(cells), 3)
        self.assertIn(">QEMU died</span>", cells[0])
        self.assertIn(">process killed (AO)</span>", cells[0])
        self.assertNotIn("QEMU died", cells[2])
        self.assertIn(">process killed (AO) \u00d72</span>", cells[2])
        self.assertIn("\u2713 2", cells[2])
        self.assertEqual(qemu_matrix_html(RESULTS), "", "one QEMU: no such matrix")
        # the cells link to their cases
        for anchor in re.findall(r'href="#([^"]+)"', m):
            self.assertIn(f'<tr id="{anchor}">', render(self.meta, self.results, []))

    def test_side_by_side_and_what_differs(self):
        side = variants_section(self.results)
        self.assertIn("<th>QEMU debian-7.2</th><th>QEMU debian-10.0</th><th>QEMU vmce-10.0</th>", side)
        self.assertIn("on each of the QEMUs", side)
        differs = re.findall(r"<li>(.*?)</li>", side)
        self.assertEqual(len(differs), 1, "only the case QEMU handled itself differs")
        self.assertIn(":by-qemu", differs[0])
        self.assertIn("QEMU debian-7.2: <i>QEMU died</i> (no recovery action · no signal · QEMU killed by signal 6 "
                      "(SIGABRT): qemu-system-x86_64: ../../util/qemu-thread-posix.c:87: qemu_mutex_lock_impl: "
                      "Assertion `mutex-&gt;initialized&#x27; failed.)", differs[0])
        self.assertIn("QEMU vmce-10.0: <i>process killed (AO)</i>", differs[0])
        # the evidence says how QEMU ended
        page = render(self.meta, self.results, [])
        self.assertIn("QEMU killed by signal 6 (SIGABRT); its last word: qemu-system-x86_64:", page)

    def test_kernels_and_qemus_vary(self):
        rs = [under(q, self.pc, kernel=k) for k in ("debian-6.1", "vmce-6.1") for q in ("debian-7.2", "debian-10.0")]
        s = summary_of(render({}, rs, []))
        self.assertIn("Guest kernel vmce-6.1 (vmce-6.1.0-release) under QEMU debian-10.0 (10.0.2 (Debian", s)
        self.assertEqual(len(summary_text(rs)), 4, "a sentence per (kernel, QEMU)")
        side = variants_section(rs)
        self.assertIn("<th>vmce-6.1 · QEMU debian-10.0</th>", side)
        self.assertIn("guest kernels and QEMUs", side)
        m = qemu_matrix_html(rs)
        self.assertIn(">debian-6.1 · QEMU debian-7.2</th>", m)

    def test_timeline_lanes_tell_the_qemus_apart(self):
        lanes = [dict(vm=f"small-vmce-6.1-{q}-0", event="boot", start=0.0, end=3.0, boot=1)
                 for q in ("debian-7.2", "debian-10.0")]
        svg = timeline_svg(lanes)
        labels = re.findall(r'text-anchor="end">([^<]*)<title>', svg)
        self.assertEqual(len(set(labels)), 2, labels)
        self.assertTrue(all(label.endswith(("debian-7.2-0", "debian-10.0-0")) for label in labels), labels)

    def test_a_qemu_by_path(self):
        path = "/home/dev/qemu/build/qemu-system-x86_64"
        r = under(path, self.pc, forwarder="qemu")
        r["expected"] = dict(r["expected"], qemu="dies", qemu_table="debian-7.2", qemu_nearest=True)
        rs = [under("debian-7.2", self.pc, forwarder="qemu"), r]
        side = variants_section(rs)
        self.assertIn(f"<th>QEMU {path} (QEMU as debian-7.2)</th>", side)
        self.assertIn("&asymp;", side)
        self.assertIn(f"under QEMU {path} (as debian-7.2) (8.2.2)", summary_of(render({}, rs, [])))


class Images(unittest.TestCase):
    """An image is named as the whole guest, with its kernel; a kernel
    without the handler is said plainly: every error resets the VM"""

    def rec(self, kind, release, reset, missing=None):
        r = result("anon-dirty", kind, "pass")
        r["case"].update(kernel="debian-12-cloud", kernel_info={
            "kind": "image", "name": "debian-12-cloud", "release": release, "handler_missing": missing})
        if reset:
            r["observed"].update(reset="a new boot on its console", guest_alive=False, signals=[])
        return r

    def test_every_error_resets_the_vm(self):
        missing = ["CONFIG_MEMORY_FAILURE", "CONFIG_X86_MCE"]
        rs = [self.rec(k, "6.1.0-50-cloud-amd64", True, missing) for k in ("ao", "ar")]
        self.assertEqual(classify(rs[0]), "reset")
        said = summary_of(render({}, rs, []))
        self.assertIn("Image debian-12-cloud (6.1.0-50-cloud-amd64) survives 0 of 2 error kinds: every "
                      "error resets the VM (its kernel has no handler: no CONFIG_MEMORY_FAILURE, no "
                      "CONFIG_X86_MCE).", said)

    def test_some_reset(self):
        rs = [self.rec("ao", "6.1.0-50-amd64", False), self.rec("ar", "6.1.0-50-amd64", True)]
        said = summary_of(render({}, rs, []))
        self.assertIn("survives 1 of 2 error kinds; the VM resets on: anon-dirty AR", said)


class Arches(unittest.TestCase):
    """An amd64 and an arm64 guest over the same cases: one row each, a
    column per architecture; a refused error is said to be one"""

    def on(self, arch, kernel, **obs):
        r = result("anon-dirty", "ar", "pass")
        r["case"].update(arch=arch, kernel=kernel, key=r["case"]["id"], id=r["case"]["id"] + "@" + kernel)
        r["observed"].update(trouble=[], **obs)
        return r

    def test_a_column_per_arch_and_what_differs(self):
        refused = {"result": "refused", "path": "refused", "detail": "refused: no x-vmce-inject-sea"}
        results = [self.on("amd64", "debian-6.1"),
                   self.on("arm64", "debian-6.1-arm64", actions={}, signals=[], guest_alive=False,
                           injected=[refused], qemu_status="paused")]
        self.assertEqual(classify(results[1]), "refused")
        html = variants_section(results)
        self.assertIn("<th>amd64: debian-6.1</th>", html)
        self.assertIn("<th>arm64: debian-6.1-arm64</th>", html)
        self.assertIn("arm64: debian-6.1-arm64: <i>refused by vmced</i>", html)
        lines = side_by_side_text(results)
        self.assertEqual(lines[0], "Side by side (amd64: debian-6.1 | arm64: debian-6.1-arm64): 1 case(s) on each")
        self.assertEqual(lines[1], "  differs: m/anon-dirty/ar/early/host/recovery1/0")
        self.assertIn("arm64: debian-6.1-arm64: refused by vmced", lines[3])
        s = summary_of(render({"name": "a"}, results, []))
        self.assertIn("vmced cannot tell it (its QEMU has no way to) of: anon-dirty AR", s)
        told = [self.on("amd64", "debian-6.1"), self.on("arm64", "debian-6.1-arm64")]
        self.assertEqual(side_by_side_text(told)[1], "  every case came out the same on each")
        self.assertEqual(side_by_side_text(told[:1]), [], "one arch: nothing to put side by side")


if __name__ == "__main__":
    unittest.main(testRunner=unittest.TextTestRunner(stream=sys.stdout, verbosity=2))
