"""The campaign report: one self-contained HTML file, charts as inline SVG.

It answers first what an operator asks: what does this guest kernel survive,
under this QEMU?
  1. a summary in words: how many error kinds the guest survives, and the
     ones it panics on (or QEMU dies on), each linked to its case; a
     sentence per guest kernel and per QEMU
  2. the outcome matrix: page type x injection; each cell says what the
     guest did (its label and colour) and, apart from that, the verdict
     (a mark: as expected or not); with more than one QEMU, also page type
     x QEMU: what the guest did under each
  3. with more than one guest kernel or QEMU, or the same case on more
     than one host: the same cases side by side, and what differs
  4. time from injection to the guest's recovery, per case
  5. the timeline of each guest, grouped per host
  6. every case: what the guest did, expected, the evidence (folded, the
     kernel's log lines first), the verdict

Records it cannot use (a line cut short by an interrupted run, a verdict it
does not know) are left out or shown as they are, and the report says so.

  python3 report.py RESULTS.jsonl [-o report.html]   renders a results file again
"""
import argparse
import html
import json
import math
import os
import re
import sys
import time

# the verdict: was it what the guest kernel is expected to do (a mark on the
# cell, apart from what the guest did)
VERDICTS = {
    "pass": ("as expected", "\u2713", "#2e7d32"),
    "fail": ("not as expected", "\u2717", "#c62828"),
    "unexpected": ("no expectation", "?", "#b25d00"),
    "not run": ("not run", "\u2013", "#757575"),
    # the case asks what the kernel does not have (a sysctl of a later Linux)
    "not applicable": ("not applicable", "\u2205", "#9e9e9e"),
}
ORDER = ("fail", "unexpected", "not run", "not applicable", "pass")
# kept for the charts that still colour by verdict
COLOURS = {v: c for v, (_, _, c) in VERDICTS.items()}

# what the guest did: key -> (label, colour, what it means). Order: worst
# first, as a cell with several cases shows the worst
OUTCOMES = {
    "qemu-died": ("QEMU died", "#212121", "the whole VM went away: QEMU exited"),
    "panicked": ("guest panicked", "#b71c1c",
                 "the guest kernel panicked or oopsed: at once, or when it read the bad page "
                 "again later (ksmd, a process exit)"),
    "reset": ("VM reset", "#4a148c",
              "the guest restarted at once: a machine check into a guest kernel without a "
              "handler (no CR4.MCE) is a triple fault, and the VM resets"),
    "hung": ("guest hung", "#6a1b9a", "the guest stopped answering, without a panic line"),
    "refused": ("refused by vmced", "#37474f",
                "vmced could not tell the guest (an Arm64 guest's QEMU without the command for it) and "
                "journaled the error as refused: the guest was told nothing, and a refused AR leaves the "
                "VM paused"),
    "doomed": ("guest doomed", "#880e4f",
               "the handler left a bad page the kernel itself still uses: its next read panics "
               "the guest (the campaign reboots the guest first)"),
    "killed-ar": ("process killed (AR)", "#0d47a1",
                  "a process touched the bad page and got SIGBUS BUS_MCEERR_AR, which ends it "
                  "unless it handles it; the guest lives on"),
    "killed-ao": ("process killed (AO)", "#1565c0",
                  "the page was taken from the processes that map it and they got SIGBUS "
                  "BUS_MCEERR_AO at once, which ends a process that does not handle it; the "
                  "guest lives on"),
    "dropped": ("page dropped silently", "#8d6e00",
                "a dirty page's data was dropped and nobody was told"),
    "ignored": ("ignored", "#a84300",
                "the handler gave up on the page (\"Ignored\" or \"Failed\") and the guest lived on"),
    "unknown": ("unknown outcome", "#546e7a",
                "the handler's answer is not one this report knows: shown as the log says it"),
    "nothing": ("no handler line", "#546e7a",
                "the guest kernel logged no \"recovery action\" line for the page"),
    "recovered": ("recovered", "#2e7d32",
                  "the handler took the page out of use and nobody lost anything: a free page, "
                  "or a clean one read again from disk when needed"),
    "not-run": ("not run", "#757575", "the case could not be carried out here (the reason is given)"),
    "not-applicable": ("not applicable", "#9e9e9e",
                       "the case asks what this kernel does not have: nothing was run (the reason is given)"),
}
# what an operator counts as the guest surviving the error
FATAL = ("qemu-died", "panicked", "reset", "hung", "refused", "doomed")
# the kernel's oops lines (outcome.OOPS: this file also runs on its own):
# x86's "BUG: unable to handle page fault", arm64's "Internal error: synchronous
# external abort"
OOPS = ("BUG:", "Internal error:")
# why the guest went down, by how the campaign brought the aftermath about
WHY = {"ksm-merge": "ksmd reads the page", "exit": "at process exit",
       "in-use": "the kernel still uses the page"}


def esc(value):
    return html.escape(str(value), quote=True)


def _elide(text, n):
    text = str(text)
    return text if len(text) <= n else text[:n - 1] + "\u2026"


def _elide_middle(text, n):
    """@text in @n characters, its end kept: a VM's name or a case's id ends
    in what tells it from its neighbours (its kernel, its QEMU, its slot)"""
    text = str(text)
    if len(text) <= n:
        return text
    head = (n - 1) // 3
    return text[:head] + "\u2026" + text[len(text) - (n - 1 - head):]


def column_of(case):
    """How a case was injected, as a matrix column"""
    col = str(case.get("kind", "?")).upper()
    inject = case.get("inject", "host")
    if inject != "host":
        col += " " + str(inject).replace("guest-", "guest ")
    if case.get("forwarder") == "qemu":
        col += " by QEMU"
    if case.get("kill", "early") != "early":
        col += f" {case['kill']}"
    if case.get("recovery", 1) == 0:
        col += " recovery=0"
    if (case.get("burst") or 1) > 1:
        col += f" burst {case['burst']}"
    if case.get("repeat"):
        col += " repeat"
    return col


def _signal_code(s):
    name = s.get("code_name") or ""
    if s.get("code") == 4 or name.endswith("_AR"):
        return "AR"
    if s.get("code") == 5 or name.endswith("_AO"):
        return "AO"
    return None


def _crash(obs):
    """The guest kernel's own end: a panic, an oops, or one brought about
    afterwards (ksmd, a process exit)"""
    after = obs.get("aftermath") or {}
    if after.get("crash"):
        return after["crash"]
    if obs.get("panic"):
        return obs["panic"]
    return next((t for t in obs.get("trouble") or [] if str(t).startswith(OOPS)), None)


def classify(r):
    """What the guest did, as a key of OUTCOMES: from the evidence alone,
    not from the verdict"""
    if r.get("verdict") == "not run" or r.get("not_run"):
        return "not-run"
    if r.get("verdict") == "not applicable":
        return "not-applicable"
    obs = r.get("observed") or {}
    if obs.get("qemu_alive") is False:
        return "qemu-died"
    if _crash(obs):
        return "panicked"
    if obs.get("reset"):
        return "reset"
    if any(isinstance(i, dict) and i.get("result") == "refused" for i in obs.get("injected") or []):
        return "refused"
    if obs.get("guest_alive") is False:
        return "hung"
    after = obs.get("aftermath") or {}
    if after.get("how") == "in-use":
        return "doomed"
    codes = {_signal_code(s) for s in obs.get("signals") or [] if isinstance(s, dict)}
    if "AR" in codes:
        return "killed-ar"
    if "AO" in codes:
        return "killed-ao"
    actions = [a for a in (obs.get("actions") or {}).values() if a]
    results = {str(a[1]) for a in actions if len(a) > 1}
    if results & {"Ignored", "Failed"}:
        return "ignored"
    if results - {"Recovered", "Delayed"}:
        return "unknown"
    if not actions:
        return "nothing"
    # a dirty page without a signal: its data is gone and nobody heard
    if any("dirty" in str(a[0]) for a in actions) and not obs.get("checks"):
        return "dropped"
    return "recovered"


def outcome_label(r, key=None):
    key = key or classify(r)
    if key == "unknown":
        obs = r.get("observed") or {}
        said = sorted({str(a[1]) for a in (obs.get("actions") or {}).values() if a and len(a) > 1}
                      - {"Recovered", "Delayed"})
        return "handler said " + ", ".join(said)
    return OUTCOMES[key][0]


def verdict_of(r):
    """(key, label, symbol, colour): a verdict this report does not know is
    shown as written"""
    v = r.get("verdict")
    if v in VERDICTS:
        label, sym, colour = VERDICTS[v]
        if v == "unexpected" and r.get("expected"):
            label = "unexpected extras"
        return v, label, sym, colour
    return "?", f"verdict {v!r}", "?", "#546e7a"


def _case(r):
    return r["case"]


def _key(r):
    case = _case(r)
    return case.get("key") or case["id"]


def _anchor(r):
    host = r.get("host")
    raw = _case(r)["id"] + (f"@@{host}" if host else "")
    return "case-" + re.sub(r"[^A-Za-z0-9_.-]+", "-", raw)


def _short_name(r):
    """A case as the summary names it: its page type, and how it was
    injected when not the plain AO"""
    col = column_of(_case(r))
    page = _case(r).get("page", "?")
    return page if col == "AO" else f"{page} {col}"


def _why_down(r, key):
    case, obs = _case(r), r.get("observed") or {}
    if case.get("recovery", 1) == 0:
        return "memory_failure_recovery=0"
    if case.get("panic_on_unrecoverable"):
        return "panic_on_unrecoverable_memory_failure=1"
    how = (obs.get("aftermath") or {}).get("how")
    if how in WHY:
        return WHY[how]
    if key == "panicked":
        return _elide(_crash(obs), 48)
    if key == "qemu-died":
        return f"QEMU {_qemu_ended(obs)}"
    return None


def _qemu_ended(obs):
    """How QEMU ended, in words ("killed by signal 6 (SIGABRT)"), from the
    evidence; "exited" where the record does not say"""
    ended = obs.get("qemu_exit")
    return str(ended.get("how") or "exited") if isinstance(ended, dict) else "exited"


# -- what went into the report, and what did not ---------------------------

def load(path):
    """(meta, results, timeline, skipped) from a results.jsonl: a line cut
    short (an interrupted run) or not a record is skipped, and said so"""
    meta, results, timeline, skipped = {}, {}, [], []
    with open(path, errors="replace") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                what = "cut short (an interrupted run)" if not line.endswith("\n") else "not JSON"
                skipped.append(f"{os.path.basename(path)} line {n}: {what}: left out")
                continue
            if not isinstance(rec, dict):
                skipped.append(f"{os.path.basename(path)} line {n}: not a record: left out")
                continue
            if rec.get("type") == "start":
                meta.setdefault("name", rec.get("campaign"))
                meta.setdefault("time", rec.get("time"))
                meta.setdefault("seed", rec.get("seed"))
                meta.setdefault("reuse", rec.get("reuse", True))
                if rec.get("qemus"):
                    meta.setdefault("qemus", rec["qemus"])
            elif rec.get("type") == "end":
                timeline += rec.get("timeline") or []
            elif rec.get("type") == "case":
                # a resumed run may record a case again: the last one counts
                case = rec.get("case") if isinstance(rec.get("case"), dict) else {}
                results[(case.get("id"), rec.get("host"), n if not case.get("id") else 0)] = rec
    # a case its host lost, run again on another host on resuming: the
    # later record is the case's, the lost one is history
    ran = {}
    for (cid, host, _), rec in results.items():
        if cid is not None and not str(rec.get("not_run") or "").startswith("host lost: "):
            ran.setdefault(cid, rec.get("end") or 0)
    results = {k: r for k, r in results.items()
               if not (k[0] in ran and str(r.get("not_run") or "").startswith("host lost: ")
                       and (r.get("end") or 0) <= ran[k[0]])}
    return meta, list(results.values()), timeline, skipped


def _usable(results, timeline):
    """The records the report can draw, and what it left out and why"""
    good, skipped, unknown = [], [], {}
    for i, r in enumerate(results or []):
        case = r.get("case") if isinstance(r, dict) else None
        if not isinstance(case, dict) or not case.get("id"):
            skipped.append(f"result {i + 1}: no case id: left out")
            continue
        # a copy: the caller's records stay as they were
        case = {"page": "?", "kind": "?", **case}
        for name in ("id", "page", "key", "kernel", "qemu"):
            if not isinstance(case.get(name), (str, type(None))):
                case[name] = str(case[name])
        r = dict(r, case=case)
        if not isinstance(r.get("verdict"), (str, type(None))):
            r = dict(r, verdict=str(r.get("verdict")))
        if r.get("verdict") not in VERDICTS:
            unknown.setdefault(str(r.get("verdict")), []).append(case["id"])
        if r.get("observed") is not None and not isinstance(r.get("observed"), dict):
            skipped.append(f"{case['id']}: its evidence is not a record: shown without it")
            r = dict(r, observed=None)
        if not isinstance(r.get("host"), (str, type(None))):
            skipped.append(f"{case['id']}: its host is not a name: shown without one")
            r = dict(r, host=None)
        try:
            # every piece a record is drawn in, tried once: a record whose
            # fields are not what a campaign writes is left out, not the report
            case_rows([r], True), matrix_html([r]), summary_section([r], []), times_svg([r])
        except (TypeError, AttributeError, ValueError, KeyError, IndexError) as e:
            skipped.append(f"{case['id']}: a record this report cannot read ({type(e).__name__}: {e}): "
                           "left out")
            continue
        good.append(r)
    for v, ids in unknown.items():
        skipped.append(f"{len(ids)} case(s) with a verdict this report does not know ({v!r}): "
                       f"shown as such: {', '.join(ids[:5])}{' …' if len(ids) > 5 else ''}")
    for r in good:
        if classify(r) == "unknown":
            skipped.append(f"{_case(r)['id']}: {outcome_label(r)}, an answer this report does not "
                           "know: shown as such")
    keep = [e for e in timeline or [] if isinstance(e, dict) and _num(e.get("start")) is not None
            and _num(e.get("end")) is not None and isinstance(e.get("vm"), str) and e["vm"]
            and all(isinstance(e.get(k), (str, type(None))) for k in ("host", "case", "event"))]
    if len(keep) < len(timeline or []):
        skipped.append(f"{len(timeline) - len(keep)} timeline entr(y/ies) without a VM, a host "
                       "name or times: left out")
    return good, keep, skipped


def _num(x):
    return x if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) else None


# -- variants: the same case on other kernels, QEMUs or hosts -------------

def kernels_of(results):
    return list(dict.fromkeys(_case(r).get("kernel") or "?" for r in results))


def qemus_of(results):
    """The QEMUs the cases ran under (None: a record from before QEMUs were
    recorded)"""
    return list(dict.fromkeys(_case(r).get("qemu") for r in results))


def _replicated_hosts(results):
    """Whether some case ran on more than one host: only then is a host a
    variant to compare (spread over hosts, each case ran once)"""
    seen = {}
    for r in results:
        if r.get("host"):
            seen.setdefault(_key(r), set()).add(r["host"])
    return any(len(h) > 1 for h in seen.values())


def arches_of(results):
    """The guests' architectures (amd64 for a record from before arm64)"""
    return list(dict.fromkeys(_case(r).get("arch") or "amd64" for r in results))


def variants_of(results):
    """(variant of a result, the variants in order, their labels): a
    variant is (kernel, QEMU, host), each None where it does not vary; its
    label starts with its guest's architecture where that varies (a
    kernel is one architecture's)"""
    kernels = len(kernels_of(results)) > 1
    qemus = len(qemus_of(results)) > 1
    hosts = _replicated_hosts(results)

    def variant(r):
        return (_case(r).get("kernel") if kernels else None,
                (_case(r).get("qemu") or "?") if qemus else None,
                r.get("host") if hosts else None)
    order = list(dict.fromkeys(variant(r) for r in results))
    labels = {v: _variant_label(v) for v in order}
    if len(arches_of(results)) > 1:
        arch = {variant(r): _case(r).get("arch") or "amd64" for r in results}
        labels = {v: f"{arch[v]}: {label}" for v, label in labels.items()}
    return variant, order, labels


def _variant_label(v):
    """"vmce-6.1 · QEMU vmce-10.0 @ h1": what varies, in words"""
    kernel, qemu, host = v
    label = " · ".join(x for x in (kernel, f"QEMU {qemu}" if qemu else None) if x)
    return f"{label} @ {host}" if label and host else (label or host or "")


def _qemu_info(r):
    info = _case(r).get("qemu_info")
    return info if isinstance(info, dict) else {}


def _qemu_name(info, name):
    """A QEMU as the report names it: a PATH one with the known QEMU it is
    judged as"""
    return f"{name} (as {info['table']})" if info.get("nearest") and info.get("table") else name


def _qemus_line(meta, results):
    """Every QEMU of the run with its release: from the run's meta, else
    from the records"""
    said = []
    for q in meta.get("qemus") or []:
        if isinstance(q, dict) and q.get("name"):
            said.append(f"{_qemu_name(q, q['name'])} ({q.get('release') or '?'})")
    if not said:
        for name in qemus_of(results):
            info = next((_qemu_info(r) for r in results if _case(r).get("qemu") == name), {})
            if name:
                said.append(f"{_qemu_name(info, name)} ({info.get('release') or '?'})")
    if said:
        return f"QEMU {', '.join(said)}"
    return meta.get("qemu")


# -- pieces ----------------------------------------------------------------

def chip(r, tag=None, link=True):
    """A result as the matrix and the tables show it: what the guest did
    (label, colour) and the verdict apart (a mark)"""
    key = classify(r)
    label, colour = outcome_label(r, key), OUTCOMES[key][1]
    _, vlabel, sym, vcolour = verdict_of(r)
    tip = f"{_case(r)['id']}{' on ' + r['host'] if r.get('host') else ''}: {label}; verdict: {vlabel}"
    reasons = "; ".join(str(x) for x in r.get("reasons") or [])
    if reasons:
        tip += f" ({_elide(reasons, 300)})"
    body = (f'<span class="o" style="background:{colour}">{esc(label)}</span>'
            f'<span class="m" style="color:{vcolour};border-color:{vcolour}">{sym} {esc(vlabel)}</span>')
    if tag:
        body = f'<span class="t">{esc(tag)}</span>' + body
    cls = f"chip v-{verdict_of(r)[0].replace(' ', '-').replace('?', 'x')}"
    if link:
        return f'<a class="{cls}" href="#{_anchor(r)}" title="{esc(tip)}">{body}</a>'
    return f'<span class="{cls}" title="{esc(tip)}">{body}</span>'


def legend():
    outs = "".join(f'<li><span class="o" style="background:{c}">{esc(label)}</span> {esc(what)}</li>'
                   for k, (label, c, what) in OUTCOMES.items() if k != "unknown")
    marks = "".join(f'<li><span class="m" style="color:{c};border-color:{c}">{s} {esc(label)}</span> '
                    f'{esc(what)}</li>' for (label, s, c), what in zip(VERDICTS.values(), (
                        "what the guest kernel is expected to do (run/lib/vmcelab/expect.py), it did",
                        "something expected did not happen",
                        "nothing is written down for this case, or something else happened too "
                        "(a BUG or WARNING, an extra signal): \"unexpected extras\"",
                        "the case could not be carried out here")))
    return f"""<div class="legend"><div><b>What the guest did</b> (the cell's label and colour)
<ul>{outs}</ul></div><div><b>Verdict</b> (the mark under it; a dashed border: not as expected)
<ul>{marks}</ul></div></div>"""


def summary_section(results, notes):
    """In words, per guest kernel: what it survives and what it panics on"""
    if not results:
        return '<section id="summary"><h2>Summary</h2><p>No case ran: there is nothing to ' \
               'summarise.</p></section>'
    paras = [f"<p>{s}</p>" for s in _summary_sentences(results)]
    skipped = ""
    if notes:
        skipped = '<div class="skipped"><b>Left out or shown as is:</b><ul>' + \
            "".join(f"<li>{esc(n)}</li>" for n in notes) + "</ul></div>"
    return f'<section id="summary"><h2>Summary</h2>{"".join(paras)}{skipped}</section>'


def summary_text(results):
    """The summary's sentences as plain text, for the end of run/campaign's
    output: what the guest survives, not only whether the harness agreed"""
    return [html.unescape(re.sub(r"<[^>]+>", "", s)) for s in _summary_sentences(results)]


def _subject(v, rs):
    """Whom a summary sentence is about: "guest kernel K (release)", and
    "under QEMU Q (release)" and "on host H" where those vary"""
    kernel = v[0] or next((_case(r).get("kernel") for r in rs if _case(r).get("kernel")), None)
    release = next(((_case(r).get("kernel_info") or {}).get("release") for r in rs
                    if (_case(r).get("kernel_info") or {}).get("release")), None)
    # an image is the whole guest: it is named, with the kernel it boots
    image = any((_case(r).get("kernel_info") or {}).get("kind") == "image" for r in rs)
    who = f"{'image' if image else 'guest kernel'} {kernel}" + \
        (f" ({release})" if release and release != kernel else "") if kernel else "this guest kernel"
    if v[1]:
        info = next((_qemu_info(r) for r in rs if _qemu_info(r)), {})
        who += f" under QEMU {_qemu_name(info, v[1])}" + (f" ({info['release']})" if info.get("release") else "")
    if v[2]:
        who += f" on host {v[2]}"
    return who[0].upper() + who[1:]


def _summary_sentences(results):
    variant, order, labels = variants_of(results)
    paras = []
    for v in order:
        rs = [r for r in results if variant(r) == v]
        cells = {}
        for r in rs:
            cells.setdefault((_case(r).get("page"), column_of(_case(r))), []).append(r)
        ran = {k: c for k, c in cells.items() if any(classify(r) not in ("not-run", "not-applicable")
                                                     for r in c)}
        down = {"panicked": [], "doomed": [], "reset": [], "hung": [], "refused": [], "qemu-died": []}
        for c in ran.values():
            for r in c:
                key = classify(r)
                if key in down:
                    down[key].append(r)
        survived = sum(1 for c in ran.values() if not any(classify(r) in FATAL for r in c))
        s = f"<b>{esc(_subject(v, rs))}</b> survives <b>{survived} of {len(ran)}</b> " \
            f"error kind{'s' if len(ran) != 1 else ''}" if ran else f"<b>{esc(_subject(v, rs))}</b>: no case ran"
        parts = []
        every_reset = ran and len(down["reset"]) == sum(len(c) for c in ran.values())
        if every_reset:
            # said plainly: what an operator must see of a kernel without a handler
            s += ": every error resets the VM" + _no_handler(rs)
            down["reset"] = []
        for key, words in (("panicked", "it panics on"), ("doomed", "it is left to panic on"),
                           ("reset", "the VM resets on"),
                           ("hung", "it stops answering on"),
                           ("refused", "vmced cannot tell it (its QEMU has no way to) of"),
                           ("qemu-died", "QEMU dies on")):
            if down[key]:
                parts.append(f"{words}: " + ", ".join(_named(r, key) for r in down[key]))
        s += ("; " + "; ".join(parts) if parts else "" if every_reset or not ran else ": every one") + "."
        missing = [r for r in rs if classify(r) == "not-run"]
        if missing:
            s += f" {len(missing)} case{'s' if len(missing) != 1 else ''} did not run: " + \
                ", ".join(_named(r, "not-run") for r in missing[:8]) + (" …" if len(missing) > 8 else "") + "."
        counts = {}
        for r in rs:
            counts[verdict_of(r)[1]] = counts.get(verdict_of(r)[1], 0) + 1
        s += " Verdicts: " + ", ".join(f"{n} {esc(label)}" for label, n in counts.items()) + "."
        paras.append(s)
    return paras


def _no_handler(rs):
    """(its kernel has no handler: CONFIG_...), where the record says so"""
    missing = next(((_case(r).get("kernel_info") or {}).get("handler_missing") for r in rs
                    if (_case(r).get("kernel_info") or {}).get("handler_missing")), None)
    return f" (its kernel has no handler: no {', no '.join(missing)})" if missing else ""


def _named(r, key):
    why = _why_down(r, key) if key not in ("not-run", "not-applicable") else \
        _elide(r.get("not_run") or "; ".join(r.get("reasons") or []), 60)
    host = f" on {r['host']}" if r.get("host") else ""
    return f'<a href="#{_anchor(r)}">{esc(_short_name(r))}</a>{esc(host)}' + \
        (f" ({esc(why)})" if why else "")


def matrix_html(results, per_table=8):
    """Page type x injection, as tables that fit the page: more columns
    than per_table wrap into another table"""
    if not results:
        return "<p>No case ran.</p>"
    variant, order, labels = variants_of(results)
    rows = sorted({_case(r)["page"] for r in results}, key=str)
    cols = sorted({column_of(_case(r)) for r in results}, key=lambda c: (len(c.split()), c))
    cells = {}
    for r in results:
        cells.setdefault((_case(r)["page"], column_of(_case(r))), []).append(r)
    chunks = math.ceil(len(cols) / per_table)
    size = math.ceil(len(cols) / chunks)
    out = []
    for part in range(chunks):
        these = cols[part * size:(part + 1) * size]
        head = "".join(f'<th title="{esc(c)}">{esc(c)}</th>' for c in these)
        body = []
        for row in rows:
            if not any((row, c) in cells for c in these):
                continue
            tds = []
            for c in these:
                rs = cells.get((row, c), [])
                rs = sorted(rs, key=lambda r: order.index(variant(r)))
                tds.append("<td>" + "".join(chip(r, labels[variant(r)] or None) for r in rs) + "</td>")
            body.append(f'<tr><th class="row" title="{esc(row)}">{esc(row)}</th>{"".join(tds)}</tr>')
        out.append(f'<table class="matrix"><colgroup><col class="rowh">{"<col>" * len(these)}'
                   f'</colgroup><tr><th class="row">page \\ injection</th>{head}</tr>{"".join(body)}</table>')
    return "\n".join(out)


def qemu_matrix_html(results, per_table=8):
    """Page type x QEMU (x kernel, where kernels vary too): what the guest
    did under each, every injection of the page together (each outcome
    once, with how many cases had it, linked to the first), and the
    verdicts counted. Empty with one QEMU"""
    variant, order, _ = variants_of(results)
    if not any(v[1] for v in order):
        return ""
    cols = list(dict.fromkeys(v[:2] for v in order))
    rows = sorted({_case(r)["page"] for r in results}, key=str)
    cells = {}
    for r in results:
        cells.setdefault((_case(r)["page"], variant(r)[:2]), []).append(r)
    chunks = math.ceil(len(cols) / per_table)
    size = math.ceil(len(cols) / chunks)
    out = []
    for part in range(chunks):
        these = cols[part * size:(part + 1) * size]
        head = "".join(f'<th title="{esc(_variant_label(c + (None,)))}">{esc(_variant_label(c + (None,)))}</th>'
                       for c in these)
        body = []
        for row in rows:
            tds = []
            for c in these:
                rs = cells.get((row, c), [])
                by_outcome = {}
                for r in sorted(rs, key=lambda r: list(OUTCOMES).index(classify(r))):
                    by_outcome.setdefault(classify(r), []).append(r)
                chips = "".join(
                    f'<a class="chip" href="#{_anchor(same[0])}" title="{esc(_short_name(same[0]))}'
                    f'{esc(" and others" if len(same) > 1 else "")}"><span class="o" '
                    f'style="background:{OUTCOMES[key][1]}">{esc(outcome_label(same[0], key))}'
                    f'{esc(f" ×{len(same)}" if len(same) > 1 else "")}</span></a>'
                    for key, same in by_outcome.items())
                verdicts = {}
                for r in rs:
                    verdicts.setdefault(verdict_of(r)[0], []).append(r)
                marks = " ".join(f'<span class="m" style="color:{verdict_of(vs[0])[3]};border-color:'
                                 f'{verdict_of(vs[0])[3]}" title="{esc(verdict_of(vs[0])[1])}">'
                                 f'{verdict_of(vs[0])[2]} {len(vs)}</span>'
                                 for _, vs in sorted(verdicts.items(), key=lambda kv: ORDER.index(kv[0])
                                                     if kv[0] in ORDER else -1))
                tds.append(f"<td>{chips}{marks}</td>" if rs else "<td>-</td>")
            body.append(f'<tr><th class="row" title="{esc(row)}">{esc(row)}</th>{"".join(tds)}</tr>')
        out.append(f'<table class="matrix qemus"><colgroup><col class="rowh">{"<col>" * len(these)}'
                   f'</colgroup><tr><th class="row">page \\ QEMU</th>{head}</tr>{"".join(body)}</table>')
    return f"""<h2>What the guest did under each QEMU: page type &times; QEMU</h2>
<p>Every injection of a page type together: each thing the guest did, with how many cases did it
(linked to the first), and the verdicts counted (the mark: as in the legend above).</p>
{"".join(out)}"""


def times_svg(results):
    rows = [r for r in results if _num((r.get("observed") or {}).get("ms_to_action"))]
    if not rows:
        return "<p>No case reached the guest's recovery.</p>"
    longest = max(r["observed"]["ms_to_action"] for r in rows) or 1
    bh, left, width = 16, 330, 900
    scale = (width - left - 70) / longest
    height = bh * len(rows) + 30
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" aria-label="time to recovery">']
    for i, r in enumerate(rows):
        ms = r["observed"]["ms_to_action"]
        y = i * bh + 4
        name = _case(r)["id"] + (f" on {r['host']}" if r.get("host") else "")
        key = classify(r)
        out.append(f'<g><title>{esc(name)}</title><text x="{left - 6}" y="{y + 11}" font-size="10" '
                   f'text-anchor="end">{esc(_elide_middle(name, 58))}</text></g>')
        out.append(f'<g><title>{esc(name)}: {ms:.0f} ms, {esc(outcome_label(r, key))}</title>'
                   f'<rect x="{left}" y="{y}" width="{max(1, ms * scale):.1f}" height="{bh - 4}" '
                   f'fill="{OUTCOMES[key][1]}"/></g>')
        out.append(f'<text x="{left + ms * scale + 4:.1f}" y="{y + 11}" font-size="10">{ms:.0f} ms</text>')
    out.append(f'<text x="{left}" y="{bh * len(rows) + 24}" font-size="10">injection to the guest '
               f'kernel\'s "recovery action" line; bars coloured by what the guest did</text>')
    out.append("</svg>")
    return "\n".join(out)


def timeline_svg(timeline, results=()):
    """One lane per guest; with hosts, the lanes grouped under each host"""
    events = [e for e in timeline if e.get("event") in ("boot", "case")]
    if not events:
        return "<p>No timeline.</p>"
    by_case = {(_case(r)["id"], r.get("host")): r for r in results}
    lanes = sorted({(e.get("host") or "", e["vm"]) for e in events})
    hosts = list(dict.fromkeys(h for h, _ in lanes))
    grouped = hosts != [""]
    t0 = min(e["start"] for e in events)
    t1 = max(e["end"] for e in events)
    left, width, lane, head = 150, 1000, 30, 18
    scale = (width - left - 20) / max(t1 - t0, 1e-3)
    y, rows, out_lanes = 4, [], {}
    for h in hosts:
        if grouped:
            rows.append(f'<text x="4" y="{y + 13}" font-size="12" font-weight="bold">host '
                        f'{esc(_elide(h, 40))}<title>{esc(h)}</title></text>')
            y += head
        for lh, vm in lanes:
            if lh == h:
                out_lanes[(lh, vm)] = y
                rows.append(f'<text x="{left - 6}" y="{y + 15}" font-size="12" text-anchor="end">'
                            f'{esc(_elide_middle(vm, 22))}<title>{esc(vm)}</title></text>')
                y += lane
    height = y + 36
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" aria-label="per-VM timeline">'] + rows
    for e in events:
        ly = out_lanes[(e.get("host") or "", e["vm"])]
        x = left + (e["start"] - t0) * scale
        w = max(1.5, (e["end"] - e["start"]) * scale)
        top, height_ = ly, lane - 10
        if e["event"] == "boot" and e.get("spare"):
            # booted while cases ran: a thin bar under them
            colour, top, height_ = "#9fb4ea", ly + lane - 14, 4
            tip = f"spare boot {e.get('boot')}, in the background: {e['end'] - e['start']:.1f} s"
        elif e["event"] == "boot":
            colour, tip = "#4a6fd2", f"boot {e.get('boot')}: {e['end'] - e['start']:.1f} s"
        else:
            r = by_case.get((e.get("case"), e.get("host"))) or by_case.get((e.get("case"), None))
            key = classify(r) if r else None
            colour = OUTCOMES[key][1] if key else COLOURS.get(e.get("verdict"), "#666")
            what = outcome_label(r, key) if r else e.get("verdict")
            tip = f"{e.get('case')}: {what}, {e.get('verdict')} ({e['end'] - e['start']:.1f} s)"
        out.append(f'<g><title>{esc(tip)}</title><rect x="{x:.1f}" y="{top}" width="{w:.1f}" '
                   f'height="{height_}" fill="{colour}"/></g>')
    axis_y = y + 14
    for k in range(6):
        x = left + (width - left - 20) * k / 5
        out.append(f'<text x="{x:.0f}" y="{axis_y}" font-size="10">{(t1 - t0) * k / 5:.0f} s</text>')
    out.append(f'<text x="{left}" y="{axis_y + 14}" font-size="10">blue: a boot (thin, light: a spare '
               f'booting in the background); the rest: cases, coloured by what the guest did</text>')
    out.append("</svg>")
    return "\n".join(out)


def outcome(r):
    """What the guest kernel did, in words that compare across kernels: the
    recovery action, who got which signal, what came after (addresses and
    pfns left out: they differ from run to run)"""
    if r.get("verdict") in ("not run", "not applicable") or r.get("not_run"):
        return r.get("verdict") or "not run"
    obs = r.get("observed") or {}
    actions = sorted({f"{a[0]}: {a[1]}" for a in (obs.get("actions") or {}).values() if a})
    codes = sorted({str(s.get("code_name") or s.get("code")) for s in obs.get("signals") or []})
    refused = any(isinstance(i, dict) and i.get("result") == "refused" for i in obs.get("injected") or [])
    parts = ["; ".join(actions) or ("refused by vmced" if refused else "no recovery action")]
    parts.append(", ".join(codes) if codes else "no signal")
    crash = _crash(obs)
    if crash:
        parts.append("then " + _unaddressed(crash))
    if obs.get("qemu_alive") is False:
        said = (obs.get("qemu_exit") or {}).get("said") if isinstance(obs.get("qemu_exit"), dict) else None
        parts.append(f"QEMU {_qemu_ended(obs)}" + (f": {_unaddressed(said)}" if said else ""))
    return " · ".join(parts)


def _unaddressed(text):
    """@text without addresses: they differ from run to run, not between
    kernels or QEMUs"""
    return re.sub(r"\b(?=[0-9a-fx]*\d)(0x)?[0-9a-f]{4,}\b", "…", str(text))


def side_by_side_text(results):
    """The side-by-side table in plain text, for the end of run/campaign's
    output where the guests' architectures vary: the cases whose outcome
    differs between the columns, each column's outcome in words"""
    if len(arches_of(results)) < 2:
        return []
    variant, order, labels = variants_of(results)
    by_key = {}
    for r in results:
        by_key.setdefault(_key(r), {})[variant(r)] = r
    both = {k: c for k, c in by_key.items() if len(c) == len(order)}
    lines = [f"Side by side ({' | '.join(labels[v] for v in order)}): {len(both)} case(s) on each"]
    for key, cells in sorted(both.items()):
        said = [(labels[v], outcome_label(cells[v]), outcome(cells[v])) for v in order]
        if len({(label, words) for _, label, words in said}) > 1:
            lines.append(f"  differs: {key}")
            lines += [f"    {who}: {label} ({words})" for who, label, words in said]
    if len(lines) == 1:
        lines.append("  every case came out the same on each")
    return lines


def variants_section(results):
    """The same cases side by side, one column per guest kernel, per QEMU
    (per pair, when both vary) and per host, where a case ran on several;
    and the cases whose outcome differs. Empty with one of each"""
    variant, order, labels = variants_of(results)
    if len(order) < 2:
        return ""
    by_key = {}
    for r in results:
        by_key.setdefault(_key(r), {})[variant(r)] = r
    # judged by the nearest known kernel or QEMU, where vmce has no table
    nearest = {}
    for r in results:
        exp = r.get("expected") or {}
        said = nearest.setdefault(variant(r), [])
        if exp.get("nearest") and f"judged as {exp.get('table')}" not in said:
            said.append(f"judged as {exp.get('table')}")
        if exp.get("qemu_nearest") and f"QEMU as {exp.get('qemu_table')}" not in said:
            said.append(f"QEMU as {exp.get('qemu_table')}")
    head = "".join(f"<th>{esc(labels[v])}{esc(' (' + ', '.join(nearest[v]) + ')') if nearest.get(v) else ''}</th>"
                   for v in order)
    rows, differs = [], []
    for key in sorted(by_key, key=lambda k: (str(_case(next(iter(by_key[k].values())))["page"]), k)):
        cells = by_key[key]
        tds = []
        for v in order:
            r = cells.get(v)
            if r is None:
                tds.append('<td class="k">-</td>')
                continue
            exp = r.get("expected") or {}
            mark = " &asymp;" if exp.get("nearest") or exp.get("qemu_nearest") else ""
            tds.append(f'<td class="k">{chip(r)}<div>{esc(outcome(r))}{mark}</div></td>')
        first = next(iter(cells.values()))
        rows.append(f'<tr><td class="el" title="{esc(key)}"><a href="#{_anchor(first)}">{esc(key)}</a></td>'
                    f'{"".join(tds)}</tr>')
        said = {labels[v]: (outcome_label(r), outcome(r)) for v, r in cells.items()}
        if len(set(said.values())) > 1:
            differs.append(f"<li><b>{esc(key)}</b>: " + "; ".join(
                f"{esc(k)}: <i>{esc(label)}</i> ({esc(v)})" for k, (label, v) in said.items()) + "</li>")
    # images (the whole guest, its kernel with it) where every case ran on one
    images = all((_case(r).get("kernel_info") or {}).get("kind") == "image" for r in results)
    first = "images" if images else "guest kernels"
    axes = [name for i, name in enumerate((first, "QEMUs", "hosts")) if any(v[i] for v in order)]
    what = " and ".join(axes) if len(axes) < 3 else f"{first}, QEMUs and hosts"
    approx = any(nearest.values())
    return f"""<section id="side-by-side"><h2>Side by side: {esc(", ".join(labels[v] for v in order))}</h2>
<p>The same cases on each of the {what}: what the guest did (or QEMU, where it handled the error
itself), what the guest's HWPOISON handler said (the "recovery action" line), who got which signal, and
what came after; the mark is the verdict against that kernel's and that QEMU's own
expectations{" (&asymp;: a kernel or QEMU vmce has none for, judged by the nearest known one)" if approx else ""}.</p>
<h3>What differs</h3>
<ul>{"".join(differs) or "<li>nothing: every case came out the same on each</li>"}</ul>
<table class="side"><colgroup><col class="key">{"<col>" * len(order)}</colgroup>
<tr><th>case</th>{head}</tr>
{"".join(rows)}
</table></section>"""


def kernel_log(r):
    """The guest kernel's lines this case's verdict rests on, in the
    kernel's words (time stamps left out: vmce keeps what it parsed)"""
    obs = r.get("observed") or {}
    lines = []
    for pfn, action in (obs.get("actions") or {}).items():
        if action:
            lines.append(f"Memory failure: {pfn}: recovery action for {action[0]}: {action[1]}")
    for pfn, kills in (obs.get("kills") or {}).items():
        for k in kills or []:
            if isinstance(k, (list, tuple)) and len(k) == 2:
                lines.append(f"Memory failure: {pfn}: Sending SIGBUS to {k[0]}:{k[1]} due to hardware "
                             "memory corruption")
    for pfn in obs.get("already") or []:
        lines.append(f"Memory failure: {pfn}: already hardware poisoned")
    for pfn in obs.get("overflows") or []:
        lines.append(f"buffer overflow when queuing memory failure at {pfn}")
    for t in obs.get("trace") or []:
        if isinstance(t, dict) and t.get("raw"):
            lines.append(str(t["raw"]).strip())
    for m in obs.get("mce_reports") or []:
        lines.append(f"mce: [Hardware Error]: {m}")
    for t in obs.get("trouble") or []:
        lines.append(str(t))
    if obs.get("panic"):
        lines.append(f"Kernel panic - not syncing: {obs['panic']}")
    after = obs.get("aftermath") or {}
    if after.get("crash") and after.get("crash") != obs.get("panic"):
        lines.append(f"(afterwards, {after.get('how')}) {after['crash']}")
    return lines


def _evidence(r):
    obs = r.get("observed") or {}
    bits = []
    for s in obs.get("signals") or []:
        bits.append(f"pid {s.get('pid')}: {s.get('code_name')} at {s.get('addr')} lsb {s.get('lsb')}")
    dead = sorted(str(p) for p, alive in (obs.get("victims_alive") or {}).items() if alive is False)
    if dead:
        bits.append(f"process(es) {', '.join(dead)} ended")
    for c in obs.get("checks") or []:
        bits.append(f"check: {json.dumps(c)}")
    if obs.get("hardware_corrupted_kb") is not None:
        bits.append(f"HardwareCorrupted +{obs['hardware_corrupted_kb']} kB")
    if _num(obs.get("ms_to_action")):
        bits.append(f"{obs['ms_to_action']:.0f} ms from injection to the recovery action line")
    after = obs.get("aftermath")
    if after:
        bits.append(f"afterwards ({after.get('how')}): {after.get('crash') or 'the guest lived on'}")
    for label, alive in (("the guest", obs.get("guest_alive")), ("QEMU", obs.get("qemu_alive"))):
        if alive is False:
            bits.append(f"{label} was not alive at the end")
    ended = obs.get("qemu_exit")
    if obs.get("qemu_alive") is False and isinstance(ended, dict):
        bits.append(f"QEMU {_qemu_ended(obs)}" + (f"; its last word: {ended['said']}" if ended.get("said") else ""))
    for rec in obs.get("injected") or []:
        if isinstance(rec, dict) and rec.get("handled_by") == "qemu":
            bits.append(f"vmced passed the {rec.get('si_code')} on to QEMU ({rec.get('detail')})")
    return bits


def case_rows(results, hosts):
    rows = []

    def order(r):
        return (list(OUTCOMES).index(classify(r)), ORDER.index(r["verdict"]) if r.get("verdict") in ORDER
                else -1, _case(r)["id"])
    for r in sorted(results, key=order):
        exp = r.get("expected") or {}
        log = kernel_log(r)
        ev = _evidence(r)
        reasons = [str(x) for x in r.get("reasons") or []]
        inner = []
        if log:
            inner.append("<pre class=\"log\">" + "\n".join(esc(x) for x in log) + "</pre>")
        if r.get("not_run"):
            inner.append(f"<p>not run: {esc(r['not_run'])}</p>")
        if ev:
            inner.append("<ul>" + "".join(f"<li>{esc(x)}</li>" for x in ev) + "</ul>")
        if reasons:
            inner.append("<p><b>why this verdict:</b> " + "<br>".join(esc(x) for x in reasons) + "</p>")
        head = f"{len(log)} kernel log line{'s' if len(log) != 1 else ''}" if log else \
            ("why not run" if r.get("not_run") else "evidence")
        details = f"<details><summary>{esc(head)}: {esc(_elide(outcome(r), 70))}</summary>" \
                  f"{''.join(inner) or '<p>no evidence recorded</p>'}</details>"
        host = f'<td class="el" title="{esc(r.get("host") or "")}">{esc(r.get("host") or "-")}</td>' \
            if hosts else ""
        cid = _case(r)["id"]
        rows.append(f'<tr id="{_anchor(r)}"><td>{chip(r, link=False)}</td>'
                    f'<td><span class="el2" title="{esc(cid)}">{_breakable(cid)}</span></td>{host}'
                    f'<td>{esc(exp.get("summary", "none written"))}</td><td>{details}</td></tr>')
    return "".join(rows)


def _breakable(text):
    return "/<wbr>".join(esc(p) for p in str(text).split("/"))


def _hosts_line(meta):
    hosts = meta.get("hosts") or []
    if not hosts:
        return ""
    said = []
    for h in hosts:
        if not isinstance(h, dict):
            continue
        s = esc(h.get("name", "?"))
        if h.get("target"):
            # its parameters (a key file, the tree) are the campaign's business
            s += f" ({esc(str(h['target']).split('?', 1)[0])})"
        if h.get("qemu") and h.get("qemu") != meta.get("qemu"):
            s += f" {esc(h['qemu'])}"
        if h.get("refused"):
            s += f" <b>refused: {esc(h['refused'])}</b>"
        if h.get("lost"):
            s += f" <b>lost: {esc(h['lost'])}</b>"
        said.append(s)
    return f"<p class=\"meta\">hosts: {', '.join(said)}</p>"


STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em auto; padding: 0 1em; color: #222;
       max-width: 1200px; overflow-wrap: anywhere }
h1 { font-size: 1.5em } h2 { font-size: 1.15em; margin-top: 2em }
table { border-collapse: collapse; font-size: 0.85em; width: 100%; table-layout: fixed }
td, th { border-bottom: 1px solid #ddd; padding: 4px 6px; text-align: left; vertical-align: top }
svg { max-width: 100%; height: auto }
a { color: inherit }
.meta { color: #555 }
.el { overflow: hidden; text-overflow: ellipsis; white-space: nowrap }
.el2 { display: -webkit-box; -webkit-line-clamp: 2; line-clamp: 2; -webkit-box-orient: vertical;
       overflow: hidden }
#summary p { font-size: 1.05em; line-height: 1.5 }
.skipped { background: #fff8e1; border-left: 4px solid #b25d00; padding: 4px 10px; margin: 1em 0 }
.chip { display: block; text-decoration: none; margin: 2px 0; border: 2px solid transparent;
        border-radius: 4px; line-height: 1.25 }
.chip.v-fail, .chip.v-x { border: 2px dashed #c62828 }
.chip .t { display: block; font-size: 0.8em; color: #444 }
.o { display: inline-block; color: #fff; padding: 1px 5px; border-radius: 3px; font-size: 0.9em }
.chip .o { display: block }
.m { display: inline-block; font-size: 0.8em; border: 1px solid; border-radius: 3px; padding: 0 4px;
     margin-top: 2px; background: #fff; white-space: nowrap }
table.matrix { margin-bottom: 1em }
table.matrix th { font-weight: normal; font-size: 0.9em }
table.matrix col.rowh { width: 9em }
table.matrix th.row { font-weight: bold }
table.side col.key { width: 22% }
table.cases col.o { width: 11em } table.cases col.id { width: 24% } table.cases col.h { width: 8% }
table.cases col.e { width: 26% }
.legend { display: flex; flex-wrap: wrap; gap: 1em 2em; font-size: 0.85em }
.legend > div { flex: 1 1 30em }
.legend ul { list-style: none; padding: 0 } .legend li { margin: 3px 0 }
details summary { cursor: pointer }
pre.log { white-space: pre-wrap; font-size: 0.9em; background: #f6f6f6; padding: 4px; margin: 4px 0 }
td.k div { font-size: 0.9em }
@media print {
  body { max-width: none; margin: 0 }
  .el { white-space: normal; overflow: visible }
  .el2 { display: block; overflow: visible }
  .chip, .o, .m { -webkit-print-color-adjust: exact; print-color-adjust: exact }
  details > summary { list-style: none }
  details::details-content { content-visibility: visible; display: block }
  svg { break-inside: avoid }
  tr { break-inside: avoid }
}
"""


def render(meta, results, timeline, skipped=None):
    """The report's HTML. @skipped: what the caller left out (lines of a
    results file it could not read), said at the top with what the
    report itself could not use"""
    meta = meta if isinstance(meta, dict) else {}
    results, timeline, own = _usable(results, timeline)
    notes = list(skipped or []) + list(meta.get("skipped") or []) + own
    hosts = any(r.get("host") for r in results)
    counts = {}
    for r in results:
        counts[verdict_of(r)[1]] = counts.get(verdict_of(r)[1], 0) + 1
    when_t = _num(meta.get("time"))
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(when_t if when_t is not None else time.time()))
    verdicts = ", ".join(f"{n} {v}" for v, n in counts.items()) or "none"
    kernel = meta.get("guest_kernel") or ", ".join(dict.fromkeys(
        " ".join(str(x) for x in (_case(r).get("kernel"), (_case(r).get("kernel_info") or {}).get("release"))
                 if x) for r in results if _case(r).get("kernel")))
    qemus = _qemus_line(meta, results)
    # what is not known (a report rendered again from its results file) is left out
    facts = [when, f"{len(results)} case{'s' if len(results) != 1 else ''}: {verdicts}"]
    # an image names itself ("image debian-12 (6.1.0-50-amd64)")
    facts += [kernel if kernel.startswith("image ") else f"guest kernel {kernel}"] if kernel else []
    facts += [qemus] if qemus else []
    facts += [f"guest reuse {'on' if meta.get('reuse', True) else 'off'}"]
    facts += [f"seed {meta['seed']}"] if meta.get("seed") is not None else []
    facts += [meta["host"]] if meta.get("host") else []
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>vmce campaign {esc(meta.get("name"))}</title>
<style>{STYLE}</style></head><body>
<h1>vmce campaign {esc(meta.get("name"))}</h1>
<p class="meta">{" &middot; ".join(esc(x) for x in facts)}</p>
{_hosts_line(meta)}
{summary_section(results, notes)}
<p>Each case puts a guest page in a known state, injects a memory error into it, and records what
the guest did. Separately, that is compared with what Linux's HWPOISON handler is expected to do for
that page state (written down per kernel version in <code>run/lib/vmcelab/expect.py</code>) and, where
vmced let QEMU handle the host error itself, with what that QEMU does by itself
(<code>run/lib/vmcelab/qemus.py</code>): the verdict. A guest that panics can be <i>as expected</i>: the verdict says the harness agrees with the
kernel, the outcome says what your guest survives.</p>
<h2>Outcome matrix: page type &times; injection</h2>
{legend()}
{matrix_html(results)}
{qemu_matrix_html(results)}
{variants_section(results)}
<h2>Time from injection to the guest's recovery</h2>
{times_svg(results)}
<h2>Per-VM timeline{" by host" if any(e.get("host") for e in timeline) else ""}</h2>
{timeline_svg(timeline, results)}
<h2>Cases</h2>
<table class="cases"><colgroup><col class="o"><col class="id">{'<col class="h">' if hosts else ''}
<col class="e"><col></colgroup>
<tr><th>what the guest did / verdict</th><th>case</th>{"<th>host</th>" if hosts else ""}<th>expected</th>
<th>evidence (kernel log first)</th></tr>
{case_rows(results, hosts) or '<tr><td colspan="4">no case ran</td></tr>'}
</table>
<script>window.addEventListener("beforeprint", function () {{
  document.querySelectorAll("details").forEach(function (d) {{ d.open = true; }});
}});</script>
</body></html>
"""


def main():
    p = argparse.ArgumentParser(description="Render a campaign's report from its results.jsonl again")
    p.add_argument("results", help="results.jsonl")
    p.add_argument("-o", "--out", help="the HTML file (default: report.html next to the results)")
    args = p.parse_args()
    meta, results, timeline, skipped = load(args.results)
    out = args.out or os.path.join(os.path.dirname(os.path.abspath(args.results)), "report.html")
    with open(out, "w") as f:
        f.write(render(meta, results, timeline, skipped))
    print(out)


if __name__ == "__main__":
    sys.exit(main())
