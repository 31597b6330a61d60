"""Simulated and real host errors, side by side (run/campaign --errors
simulated,real).

vmced's simulated host error (sim-poison: the page taken from QEMU, the
SIGBUS vmced makes up) stands in for the host kernel's memory_failure()
everywhere but the host lab. Whether it is faithful is a question of
evidence: the same case run both ways must end the same for the guest, the
guest's process must get the same si_code and lsb, and the guest kernel's
handler must say the same line. This module matches the two runs' records
case by case and says, field by field, what differs. It judges nothing
itself: both records already carry their verdicts.
"""
import json

from .campaign import error_key
from .report import classify, esc, outcome_label

# the facts compared, in the order the report shows them, with their labels
FIELDS = (("outcome", "guest outcome"), ("si_code", "si_code"), ("lsb", "lsb"),
          ("handler", "handler line"), ("host_signal", "what vmced caught"))


def _signals(obs):
    """The victims' SIGBUSes as (si_code, lsb, at its own address)"""
    out = []
    for s in obs.get("signals") or []:
        if not isinstance(s, dict):
            continue
        own = s.get("va") is None or s.get("addr") == s.get("va")
        out.append((s.get("code_name") or str(s.get("code")), s.get("lsb"), own))
    return sorted(set(out), key=str)


def _vmced_caught(obs):
    """What vmced journaled of the host's signal: its si_code and lsb (a
    simulated one says the same fields as a real one)"""
    caught = []
    for inj in obs.get("injected") or []:
        if not isinstance(inj, dict):
            continue
        # a real error's record is {"host": what L1 poisoned, "vmced": its
        # journal record}; a simulated one is vmcectl poison's record itself
        rec = inj.get("vmced") if "vmced" in inj else inj
        if isinstance(rec, dict) and rec.get("si_code"):
            told = (rec.get("mce") or {}).get("kind") if rec.get("result") == "injected" else rec.get("result")
            caught.append(f"{rec['si_code']} lsb {rec.get('lsb')}: {told}")
    return ", ".join(sorted(set(caught))) or None


def facts(rec):
    """What is compared of one case record: None when it did not run"""
    if rec is None or classify(rec) == "not-run":
        return None
    obs = rec.get("observed") or {}
    sigs = _signals(obs)
    handler = sorted({f"{a[0]}: {a[1]}" for a in (obs.get("actions") or {}).values()
                      if isinstance(a, list) and len(a) > 1})
    return {
        "outcome": outcome_label(rec),
        "si_code": ", ".join(sorted({s[0] for s in sigs} | ({"not at its own address"}
                                                             if any(not s[2] for s in sigs) else set())))
        or "no SIGBUS",
        "lsb": ", ".join(str(lsb) for lsb in sorted({s[1] for s in sigs if s[1] is not None})) or "-",
        "handler": "; ".join(handler) or "no handler line",
        "host_signal": _vmced_caught(obs) or "-",
    }


def differences(sim, real):
    """[(field, simulated, real)] where the two facts() differ"""
    return [(f, sim[f], real[f]) for f, _ in FIELDS if sim[f] != real[f]]


def _row_key(rec):
    case = rec["case"]
    return (error_key(case.get("key") or case["id"]), case.get("kernel"))


def pair(simulated, real):
    """Rows (key, kernel, sim record, real record, facts pair, differences
    or None when one side did not run), in the simulated run's order, then
    the real run's own; only host-side cases (a guest-made error has no
    real counterpart)"""
    def host_side(r):
        return (r.get("case") or {}).get("inject") in ("host", "host-real")
    by_key = {}
    for side, recs in (("sim", simulated), ("real", real)):
        for r in recs:
            if r.get("type", "case") == "case" and host_side(r):
                by_key.setdefault(_row_key(r), {})[side] = r
    rows = []
    for (key, kernel), sides in by_key.items():
        s, r = sides.get("sim"), sides.get("real")
        fs, fr = facts(s), facts(r)
        diff = differences(fs, fr) if fs and fr else None
        rows.append(dict(key=key, kernel=kernel, sim=s, real=r, sim_facts=fs, real_facts=fr, diff=diff))
    return rows


def agreement(rows):
    """{kernel: (agreeing, compared, not compared)}"""
    out = {}
    for row in rows:
        a, m, n = out.get(row["kernel"], (0, 0, 0))
        if row["diff"] is None:
            out[row["kernel"]] = (a, m, n + 1)
        else:
            out[row["kernel"]] = (a + (not row["diff"]), m + 1, n)
    return out


def _why_not(row):
    for side, label in (("sim", "simulated"), ("real", "real")):
        rec = row[side]
        if rec is None:
            return f"no {label} run of it"
        if row[f"{side}_facts"] is None:
            return f"{label}: not run ({rec.get('not_run') or '?'})"
    return ""


def differs_text(rows):
    """The "what differs" list, a line per differing field of a case"""
    lines = []
    for row in rows:
        if row["diff"] is None:
            lines.append(f"{row['key']}@{row['kernel']}: not compared: {_why_not(row)}")
        # both judged pass: each is an outcome the kernel's table allows
        # (expect.py), the difference is the guest's, not the simulation's
        both = " (both pass: the guest kernel gives either)" if row["diff"] and all(
            row[side].get("verdict") == "pass" for side in ("sim", "real")) else ""
        for field, s, r in row["diff"] or []:
            label = dict(FIELDS)[field]
            lines.append(f"{row['key']}@{row['kernel']}: {label}: simulated {s!s}, real {r!s}{both}")
    return lines


def to_json(rows):
    return json.dumps([{k: row[k] for k in ("key", "kernel", "sim_facts", "real_facts", "diff")}
                       for row in rows], indent=1)


def render(meta, rows):
    """A page: the agreement per kernel, every case's two columns, and what
    differs; each side links to its own campaign report for the evidence"""
    head = ("<!doctype html><meta charset=utf-8><title>simulated vs real: "
            f"{esc(meta['name'])}</title><style>body{{font:14px sans-serif;margin:2em}}"
            "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 6px;"
            "vertical-align:top}.d{background:#fff3e0}.s{color:#555}</style>")
    parts = [head, f"<h1>Simulated vs real host errors: {esc(meta['name'])}</h1>",
             f"<p>Simulated: vmced's sim-poison on {esc(meta.get('sim_host', 'this host'))} "
             f"(<a href='{esc(meta['sim_report'])}'>its report</a>). Real: the host kernel's "
             f"memory_failure() in {esc(meta.get('real_host', 'the host lab'))} "
             f"(<a href='{esc(meta['real_report'])}'>its report</a>).</p><h2>Agreement</h2><ul>"]
    for kernel, (a, m, n) in agreement(rows).items():
        parts.append(f"<li>{esc(kernel)}: <b>{a} of {m}</b> cases agree"
                     + (f"; {n} not compared (one side did not run)" if n else "") + "</li>")
    parts.append("</ul><h2>What differs</h2>")
    lines = differs_text(rows)
    parts.append("<ul>" + "".join(f"<li>{esc(ln)}</li>" for ln in lines) + "</ul>" if lines
                 else "<p>Nothing: every case compared agrees.</p>")
    parts.append("<h2>Every case</h2><table><tr><th>case</th><th>kernel</th><th>fact</th>"
                 "<th>simulated</th><th>real</th></tr>")
    for row in rows:
        fs, fr = row["sim_facts"], row["real_facts"]
        if fs is None or fr is None:
            parts.append(f"<tr><td>{esc(row['key'])}</td><td>{esc(row['kernel'])}</td>"
                         f"<td colspan=3 class=s>not compared: {esc(_why_not(row))}</td></tr>")
            continue
        differ = {d[0] for d in row["diff"]}
        for i, (field, label) in enumerate(FIELDS):
            first = (f"<td rowspan={len(FIELDS)}>{esc(row['key'])}</td>"
                     f"<td rowspan={len(FIELDS)}>{esc(row['kernel'])}</td>") if i == 0 else ""
            cls = " class=d" if field in differ else ""
            parts.append(f"<tr>{first}<td>{esc(label)}</td><td{cls}>{esc(fs[field])}</td>"
                         f"<td{cls}>{esc(fr[field])}</td></tr>")
    parts.append("</table>")
    return "\n".join(parts)
