"""The campaign report: one self-contained HTML file, charts as inline SVG.

  1. the outcome matrix: page type x injection, each cell coloured by the
     verdicts of its cases
  2. time from injection to the guest's recovery, per case
  3. the timeline of each guest: boots and cases
  4. every case: expected, observed, the evidence, the verdict
With more than one guest kernel, first: the same cases side by side, one
column per kernel, and what differs between them.
"""
import html
import json
import re
import time

COLOURS = {"pass": "#2e9d4a", "fail": "#d23c3c", "unexpected": "#e89a1c", "not run": "#9a9a9a"}
ORDER = ("fail", "unexpected", "not run", "pass")


def esc(value):
    return html.escape(str(value), quote=True)


def column_of(case):
    """How a case was injected, as a matrix column"""
    col = case["kind"].upper()
    if case["inject"] != "host":
        col += " " + case["inject"].replace("guest-", "guest ")
    if case["kill"] != "early":
        col += " " + case["kill"]
    if case["recovery"] == 0:
        col += " recovery=0"
    if case.get("burst", 1) > 1:
        col += f" burst {case['burst']}"
    if case.get("repeat"):
        col += " repeat"
    return col


def _cell_colour(verdicts):
    for v in ORDER:
        if v in verdicts:
            return COLOURS[v]
    return "#ffffff"


def matrix_svg(results):
    rows = sorted({r["case"]["page"] for r in results})
    cols = sorted({column_of(r["case"]) for r in results}, key=lambda c: (len(c.split()), c))
    cells = {}
    for r in results:
        cells.setdefault((r["case"]["page"], column_of(r["case"])), []).append(r)
    cw, ch, left, top = 118, 26, 130, 120
    # the last column's slanted label reaches about 130 px to the right
    width, height = left + cw * len(cols) + 140, top + ch * len(rows) + 10
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'role="img" aria-label="outcome matrix">']
    for j, col in enumerate(cols):
        x = left + j * cw + cw / 2
        out.append(f'<text x="{x:.0f}" y="{top - 8}" font-size="11" transform="rotate(-35 {x:.0f} '
                   f'{top - 8})">{esc(col)}</text>')
    for i, row in enumerate(rows):
        y = top + i * ch
        out.append(f'<text x="{left - 6}" y="{y + 17}" font-size="12" text-anchor="end">{esc(row)}</text>')
        for j, col in enumerate(cols):
            rs = cells.get((row, col))
            x = left + j * cw
            if not rs:
                out.append(f'<rect x="{x}" y="{y}" width="{cw - 2}" height="{ch - 2}" fill="#f4f4f4"/>')
                continue
            verdicts = [r["verdict"] for r in rs]
            label = ", ".join(f"{verdicts.count(v)} {v}" for v in ORDER if v in verdicts)
            tip = "; ".join(f"{r['case']['id']}: {r['verdict']}" for r in rs)
            out.append(f'<g><title>{esc(tip)}</title><rect x="{x}" y="{y}" width="{cw - 2}" '
                       f'height="{ch - 2}" fill="{_cell_colour(verdicts)}"/>'
                       f'<text x="{x + (cw - 2) / 2:.0f}" y="{y + 17}" font-size="11" fill="#fff" '
                       f'text-anchor="middle">{esc(label)}</text></g>')
    out.append("</svg>")
    return "\n".join(out)


def times_svg(results):
    rows = [r for r in results if r.get("observed") and r["observed"].get("ms_to_action")]
    if not rows:
        return "<p>No case reached the guest's recovery.</p>"
    longest = max(r["observed"]["ms_to_action"] for r in rows)
    bh, left, width = 16, 330, 820
    scale = (width - left - 70) / longest
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{bh * len(rows) + 30}" '
           f'role="img" aria-label="time to recovery">']
    for i, r in enumerate(rows):
        ms = r["observed"]["ms_to_action"]
        y = i * bh + 4
        out.append(f'<text x="{left - 6}" y="{y + 11}" font-size="10" text-anchor="end">'
                   f'{esc(r["case"]["id"])}</text>')
        out.append(f'<g><title>{esc(r["case"]["id"])}: {ms:.0f} ms</title><rect x="{left}" y="{y}" '
                   f'width="{max(1, ms * scale):.1f}" height="{bh - 4}" '
                   f'fill="{COLOURS.get(r["verdict"], "#666")}"/></g>')
        out.append(f'<text x="{left + ms * scale + 4:.1f}" y="{y + 11}" font-size="10">{ms:.0f} ms</text>')
    out.append(f'<text x="{left}" y="{bh * len(rows) + 24}" font-size="10">injection to the guest '
               f'kernel\'s "recovery action" line</text>')
    out.append("</svg>")
    return "\n".join(out)


def timeline_svg(timeline):
    if not timeline:
        return "<p>No timeline.</p>"
    vms = sorted({e["vm"] for e in timeline})
    t0 = min(e["start"] for e in timeline)
    t1 = max(e["end"] for e in timeline)
    left, width, lane = 120, 900, 30
    scale = (width - left - 20) / max(t1 - t0, 1e-3)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{lane * len(vms) + 40}" '
           f'role="img" aria-label="per-VM timeline">']
    for i, vm in enumerate(vms):
        y = i * lane + 6
        out.append(f'<text x="{left - 6}" y="{y + 15}" font-size="12" text-anchor="end">{esc(vm)}</text>')
        for e in timeline:
            if e["vm"] != vm:
                continue
            if e["event"] not in ("boot", "case"):
                continue
            x = left + (e["start"] - t0) * scale
            w = max(1.5, (e["end"] - e["start"]) * scale)
            top, height = y, lane - 10
            if e["event"] == "boot" and e.get("spare"):
                # booted while cases ran: a thin bar under them
                colour, top, height = "#9fb4ea", y + lane - 14, 4
                tip = f"spare boot {e.get('boot')}, in the background: {e['end'] - e['start']:.1f} s"
            elif e["event"] == "boot":
                colour, tip = "#4a6fd2", f"boot {e.get('boot')}: {e['end'] - e['start']:.1f} s"
            else:
                colour = COLOURS.get(e.get("verdict"), "#666")
                tip = f"{e.get('case')}: {e.get('verdict')} ({e['end'] - e['start']:.1f} s)"
            out.append(f'<g><title>{esc(tip)}</title><rect x="{x:.1f}" y="{top}" width="{w:.1f}" '
                       f'height="{height}" fill="{colour}"/></g>')
    axis_y = lane * len(vms) + 20
    for k in range(6):
        x = left + (width - left - 20) * k / 5
        out.append(f'<text x="{x:.0f}" y="{axis_y}" font-size="10">{(t1 - t0) * k / 5:.0f} s</text>')
    out.append(f'<text x="{left}" y="{axis_y + 14}" font-size="10">blue: a boot (thin, light: a spare '
               f'booting in the background); the rest: cases, coloured by verdict</text>')
    out.append("</svg>")
    return "\n".join(out)


def kernels_of(results):
    return list(dict.fromkeys(r["case"].get("kernel") or "?" for r in results))


def outcome(r):
    """What the guest kernel did, in words that compare across kernels: the
    recovery action, who got which signal, what came after (addresses and
    pfns left out: they differ from run to run)"""
    if r["verdict"] == "not run":
        return "not run"
    obs = r.get("observed") or {}
    actions = sorted({f"{a[0]}: {a[1]}" for a in (obs.get("actions") or {}).values() if a})
    codes = sorted({s.get("code_name") or str(s.get("code")) for s in obs.get("signals") or []})
    parts = ["; ".join(actions) or "no recovery action"]
    parts.append(", ".join(codes) if codes else "no signal")
    after = obs.get("aftermath") or {}
    crash = after.get("crash") or obs.get("panic")
    if crash:
        parts.append("then " + re.sub(r"\b(?=[0-9a-fx]*\d)(0x)?[0-9a-f]{4,}\b", "…", crash))
    return " · ".join(parts)


def kernel_section(results):
    """The kernel comparison: a table of the same cases, one column per
    kernel, and the list of cases whose outcome differs. Empty with one
    kernel"""
    kernels = kernels_of(results)
    if len(kernels) < 2:
        return ""
    by_key = {}
    for r in results:
        by_key.setdefault(r["case"].get("key") or r["case"]["id"], {})[r["case"].get("kernel")] = r
    nearest = {r["case"].get("kernel"): (r.get("expected") or {}).get("table")
               for r in results if (r.get("expected") or {}).get("nearest")}
    head = "".join(f"<th>{esc(k)}{esc(f' (judged as {nearest[k]})') if k in nearest else ''}</th>"
                   for k in kernels)
    rows, differs = [], []
    for key in sorted(by_key, key=lambda k: (by_key[k][next(iter(by_key[k]))]["case"]["page"], k)):
        cells = by_key[key]
        tds = []
        for k in kernels:
            r = cells.get(k)
            if r is None:
                tds.append('<td class="k">-</td>')
                continue
            mark = " &asymp;" if (r.get("expected") or {}).get("nearest") else ""
            tds.append(f'<td class="k" style="border-left:5px solid {COLOURS[r["verdict"]]}" '
                       f'title="{esc(r["verdict"])}: {esc("; ".join(r.get("reasons") or []))}">'
                       f'{esc(outcome(r))}{mark}</td>')
        rows.append(f"<tr><td>{esc(key)}</td>{''.join(tds)}</tr>")
        said = {k: outcome(r) for k, r in cells.items()}
        if len(set(said.values())) > 1:
            differs.append(f"<li><b>{esc(key)}</b>: " + "; ".join(
                f"{esc(k)}: {esc(v)}" for k, v in said.items()) + "</li>")
    return f"""<h2>Guest kernels side by side: {esc(", ".join(kernels))}</h2>
<p>The same cases on each kernel: what its HWPOISON handler said (the "recovery action" line),
who got which signal, and what came after; the border is the verdict against that kernel's own
expectations{" (&asymp;: a kernel vmce has none for, judged by the nearest known one)" if nearest else ""}.</p>
<h3>What differs</h3>
<ul>{"".join(differs) or "<li>nothing: every case came out the same on every kernel</li>"}</ul>
<table><tr><th>case</th>{head}</tr>
{"".join(rows)}
</table>"""


def _evidence(r):
    obs = r.get("observed") or {}
    bits = []
    for pfn, action in (obs.get("actions") or {}).items():
        if action:
            bits.append(f"pfn {pfn}: {action[0]}: {action[1]}")
    for s in obs.get("signals") or []:
        bits.append(f"pid {s.get('pid')}: {s.get('code_name')} at {s.get('addr')} lsb {s.get('lsb')}")
    for c in obs.get("checks") or []:
        bits.append(f"check: {json.dumps(c)}")
    if obs.get("panic"):
        bits.append(f"panic: {obs['panic']}")
    for t in obs.get("trouble") or []:
        bits.append(t)
    if obs.get("hardware_corrupted_kb") is not None:
        bits.append(f"HardwareCorrupted +{obs['hardware_corrupted_kb']} kB")
    after = obs.get("aftermath")
    if after:
        bits.append(f"afterwards ({after.get('how')}): {after.get('crash') or 'the guest lived on'}")
    return bits


def render(meta, results, timeline):
    counts = {v: sum(1 for r in results if r["verdict"] == v) for v in ORDER}
    rows = []
    for r in sorted(results, key=lambda r: (ORDER.index(r["verdict"]), r["case"]["id"])):
        exp = r.get("expected") or {}
        reasons = "<br>".join(esc(x) for x in r.get("reasons") or [])
        evidence = "<br>".join(esc(x) for x in _evidence(r)) or esc(r.get("not_run") or "")
        rows.append(
            f'<tr><td><span class="v" style="background:{COLOURS[r["verdict"]]}">{esc(r["verdict"])}'
            f'</span></td><td>{esc(r["case"]["id"])}</td><td>{esc(exp.get("summary", "none written"))}'
            f'</td><td>{evidence}</td><td>{reasons}</td></tr>')
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(meta.get("time", time.time())))
    summary = ", ".join(f"{counts[v]} {v}" for v in ORDER if counts[v])
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>vmce campaign {esc(meta.get("name"))}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; color: #222; max-width: 1200px }}
h1 {{ font-size: 1.5em }} h2 {{ font-size: 1.15em; margin-top: 2em }}
table {{ border-collapse: collapse; font-size: 0.85em; width: 100% }}
td, th {{ border-bottom: 1px solid #ddd; padding: 4px 6px; text-align: left; vertical-align: top }}
.v {{ color: #fff; padding: 1px 6px; border-radius: 3px; white-space: nowrap }}
.meta {{ color: #555 }}
td.k {{ font-size: 0.95em }}
</style></head><body>
<h1>vmce campaign {esc(meta.get("name"))}</h1>
<p class="meta">{esc(when)} &middot; {len(results)} cases: {esc(summary)} &middot;
guest kernel {esc(meta.get("guest_kernel", "?"))} &middot; {esc(meta.get("qemu", "?"))} &middot;
guest reuse {"on" if meta.get("reuse", True) else "off"} &middot; seed {esc(meta.get("seed"))}
{f"&middot; {esc(meta['host'])}" if meta.get("host") else ""}</p>
<p>Each case puts a guest page in a known state, injects a memory error into it, and compares
what the guest did with what Linux's HWPOISON handler is expected to do for that page state
(written down per kernel version in <code>run/lib/vmcelab/expect.py</code>).
<b>pass</b>: as expected; <b>fail</b>: something expected did not happen; <b>unexpected</b>: no
expectation is written for it, or something else happened too (a BUG/WARNING, an extra signal);
<b>not run</b>: the case could not be set up here (the reason is given).</p>
{kernel_section(results)}
<h2>Outcome matrix: page type &times; injection</h2>
{matrix_svg(results)}
<h2>Time from injection to the guest's recovery</h2>
{times_svg(results)}
<h2>Per-VM timeline</h2>
{timeline_svg(timeline)}
<h2>Cases</h2>
<table><tr><th>verdict</th><th>case</th><th>expected</th><th>evidence</th><th>why</th></tr>
{"".join(rows)}
</table>
</body></html>
"""
