"""Check a scripts/soak.sh run against its pass criteria and draw it.

Usage: python soak-check.py --run-dir DIR --prom URL --duration S --warm S --window S
                            --interval S --removed SCOPE --added SCOPE --title TEXT

Reads DIR/soak.csv (the sampler), DIR/events.tsv (the schedule as it ran), DIR/lost-series.txt
(series of a simulated cluster that one sampler scrape had and the next lacked), DIR/t0 and
DIR/exporter.pids, and asks Prometheus (the run's own, which scraped the exporter) for ALERTS,
`up`, every counter and the series per cluster. Prints each criterion PASS or FAIL, the event
-> alerts table (also DIR/alerts.md), writes DIR/soak.png; exit 1 if any criterion failed.
"""
import argparse
import csv
import json
import sys
import urllib.parse
import urllib.request

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# Which alerts each scheduled event explains (may fire, any cluster member), and which it
# must fire when it lasts at least the alert's `for:` + MARGIN (from Prometheus' rules API).
# The alerts of a Raft quorum loss without failsafe mode: the leader demotes after ttl, no
# member is primary until the heal, and after it a leader is elected again.
QUORUM = {
    "PatroniRaftQuorumLost", "PatroniRaftNodeWithoutQuorum", "PatroniRaftNoLeader",
    "PatroniRaftPartnerDisconnected", "PatroniRaftQuorumNotVisible", "PatroniNoLeader",
    "PatroniLeaderChanged", "PatroniFrequentLeaderChanges", "PatroniRaftFrequentLeaderChanges",
    "PatroniPostgresRestarted", "PatroniSyncStandbyMissing", "PatroniMemberNotRunning",
    "PatroniRoleMismatch", "PatroniDcsViewsDiverge", "PatroniNoFailoverCandidate",
    "PatroniTimelineDiverged", "PatroniRaftQuorumNoMargin", "PatroniSyncStateMismatch",
    "PatroniRaftVoterSetsDiffer", "PatroniMemberApiUnreachable",
}
EXPLAINS = {
    "quorum-loss": (QUORUM, ["PatroniRaftQuorumLost"]),
    # the restart is inside the quorum loss: its alerts may start again after the gap
    "exporter-restart": (QUORUM, []),
    "member-kill": ({
        "PatroniRaftNodeUnreachable", "PatroniMemberApiUnreachable", "PatroniMemberNotRunning",
        "PatroniPostgresRestarted", "PatroniSyncStandbyMissing", "PatroniRaftPartnerDisconnected",
        "PatroniRaftQuorumNoMargin", "PatroniNoFailoverCandidate", "PatroniDcsViewsDiverge",
        "PatroniRaftVoterSetsDiffer", "PatroniSyncStateMismatch", "PatroniRoleMismatch",
    }, ["PatroniRaftNodeUnreachable", "PatroniPostgresRestarted"]),
    "switchover": ({
        "PatroniLeaderChanged", "PatroniPostgresRestarted", "PatroniRoleMismatch",
        "PatroniSyncStandbyMissing", "PatroniSyncStateMismatch", "PatroniTimelineDiverged",
        "PatroniFrequentLeaderChanges", "PatroniRaftFrequentLeaderChanges", "PatroniDcsViewsDiverge",
        "PatroniMemberNotRunning",
    }, ["PatroniLeaderChanged"]),
    "rest-freeze": ({"PatroniMemberApiUnreachable", "PatroniMemberRestSlow"}, ["PatroniMemberApiUnreachable"]),
    "cluster-removed": (set(), []),
    "cluster-added": (set(), []),
    "cert-rotated": (set(), []),
}
MARGIN = 30       # s: an expected alert's `for:` plus this must fit in the event's hold
GRACE = 420       # s: an alert explained by an event starts firing at most this long after its end


def prom(base, path, **params):
    url = f"{base}{path}?{urllib.parse.urlencode(params)}"
    with urllib.request.urlopen(url, timeout=60) as response:
        body = json.load(response)
    if body.get("status") != "success":
        raise RuntimeError(f"{url}: {body}")
    return body["data"]


def query_range(base, expr, start, end, step):
    """Every series of EXPR over [start, end] as (labels, [(t, value)])."""
    out = []
    t = start
    while t < end:  # Prometheus answers at most 11 000 points per series
        stop = min(end, t + 10000 * step)
        for series in prom(base, "/api/v1/query_range", query=expr, start=t, end=stop, step=step)["result"]:
            out.append((series["metric"], [(float(a), float(b)) for a, b in series["values"]]))
        t = stop + step
    merged = {}
    for labels, values in out:
        merged.setdefault(json.dumps(labels, sort_keys=True), []).extend(values)
    return [(json.loads(k), sorted(v)) for k, v in merged.items()]


class Checks:
    def __init__(self):
        self.failed = 0
        self.lines = []

    def result(self, ok, text):
        line = f"{'PASS' if ok else 'FAIL'}  {text}"
        print(line)
        self.lines.append(line)
        if not ok:
            self.failed += 1


def window_mean(rows, key, lo, hi):
    values = [float(r[key]) for r in rows if lo <= float(r["t"]) <= hi and r[key] not in ("", None)]
    return sum(values) / len(values) if values else float("nan"), len(values)


def intervals(series, step):
    """Runs of consecutive samples (gap <= 2 steps) as (start, end)."""
    runs = []
    for t, _ in series:
        if runs and t - runs[-1][1] <= 2 * step + 0.5:
            runs[-1][1] = t
        else:
            runs.append([t, t])
    return runs


def by_time(items, events, t0):
    """(t, what) items counted by the scheduled event just before them: 'event (min): N'."""
    counts = {}
    for t, _ in items:
        prior = [x for x in events if x["start"] - 10 <= t]
        key = max(prior, key=lambda x: x["start"]) if prior else None
        label = f"{key['event']} ({(key['start'] - t0) / 60:.1f} min)" if key else "before any event"
        counts.setdefault(label, [0, t])[0] += 1
    return ", ".join(f"after {k}: {n} at {(t - t0) / 60:.1f} min first" for k, (n, t) in counts.items())


def main():
    ap = argparse.ArgumentParser()
    for name in ("run-dir", "prom", "removed", "added", "title"):
        ap.add_argument(f"--{name}", required=True)
    for name in ("duration", "warm", "window", "interval"):
        ap.add_argument(f"--{name}", type=float, required=True)
    a = ap.parse_args()
    d = a.run_dir
    t0 = float(open(f"{d}/t0").read())
    end = t0 + a.duration
    step = a.interval
    with open(f"{d}/soak.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    with open(f"{d}/events.tsv", newline="") as f:
        events = [dict(r, start=float(r["start"]), end=float(r["end"])) for r in csv.DictReader(f, delimiter="\t")]
    ev = {e["event"]: e for e in events}
    restart = ev.get("exporter-restart")
    c = Checks()

    # -- 1. RSS and fds flat: window B against window A
    a_lo, a_hi = a.warm, a.warm + a.window
    b_lo, b_hi = a.duration - a.window, a.duration
    for key, label in (("rss_kib", "RSS"), ("fds", "open fds")):
        ma, na = window_mean(rows, key, a_lo, a_hi)
        mb, nb = window_mean(rows, key, b_lo, b_hi)
        ratio = mb / ma - 1 if ma else float("nan")
        c.result(abs(ratio) <= 0.05,
                 f"{label}: window B ({b_lo / 60:.1f}-{b_hi / 60:.1f} min, {nb} samples) mean {mb:.0f} vs window A "
                 f"({a_lo / 60:.1f}-{a_hi / 60:.1f} min, {na} samples) mean {ma:.0f}: {100 * ratio:+.1f} % (limit 5 %)")
    for key in ("threads", "series"):
        ma, _ = window_mean(rows, key, a_lo, a_hi)
        mb, _ = window_mean(rows, key, b_lo, b_hi)
        print(f"info  {key}: window A mean {ma:.1f}, window B mean {mb:.1f}")

    # -- 2. no restart but the scheduled one
    pids = [p for p in open(f"{d}/exporter.pids").read().split() if p]
    seen = sorted({r["pid"] for r in rows}, key=lambda p: [r["pid"] for r in rows].index(p))
    c.result(len(pids) == 2 and seen == pids,
             f"exporter processes: started {pids}, sampled {seen} (want 2: the scheduled restart only)")
    rs, re_ = (restart["start"] - step, restart["end"] + 3 * step) if restart else (0, 0)
    up = query_range(a.prom, 'up{job="patroni-raft-exporter"}', t0, end, step)
    down = [t for _, vals in up for t, v in vals if v == 0 and not rs <= t <= re_]
    gap = [t for _, vals in up for t, v in vals if v == 0 and rs <= t <= re_]
    c.result(not down, f"Prometheus scraped the exporter (up 1) at every step but the restart's "
                       f"({len(gap)} step(s) of up 0 there); elsewhere: {[round(t - t0) for t in down][:10]}")

    # -- 3. every alert explained, every expected alert fired
    rules = prom(a.prom, "/api/v1/rules", type="alert")
    for_s = {r["name"]: float(r.get("duration", 0)) for g in rules["groups"] for r in g["rules"]}
    firing = query_range(a.prom, 'ALERTS{alertstate="firing"}', t0, end + 60, step)
    fired = []
    for labels, vals in firing:
        for s, e in intervals(vals, step):
            fired.append((s, e, labels))
    fired.sort(key=lambda x: x[0])
    table = ["| event | start (min) | end (min) | alerts fired (first firing, min) |", "|---|---|---|---|"]
    by_event = {e["event"]: [] for e in events}
    unexplained = []
    for s, e, labels in fired:
        name = labels["alertname"]
        who = labels.get("scope", "") + ("/" + labels["member"] if "member" in labels else "") \
            + ("/" + labels["node"] if "node" in labels else "")
        owners = [x for x in events if name in EXPLAINS.get(x["event"], (set(), []))[0]
                  and x["start"] <= s <= x["end"] + GRACE]
        if owners:
            owner = min(owners, key=lambda x: s - x["start"])
            by_event[owner["event"]].append((s, e, name, who))
        else:
            unexplained.append((s, e, name, who))
    for x in events:
        got = by_event[x["event"]]
        text = ", ".join(f"{n} {w} ({(s - t0) / 60:.1f}-{(e - t0) / 60:.1f})" for s, e, n, w in got) or "none"
        table.append(f"| {x['event']} ({x['detail']}) | {(x['start'] - t0) / 60:.1f} | {(x['end'] - t0) / 60:.1f} | {text} |")
        hold = x["end"] - x["start"]
        for want in EXPLAINS.get(x["event"], (set(), []))[1]:
            if for_s.get(want, 0) > 0 and for_s[want] + MARGIN > hold:
                print(f"info  {x['event']}: {want} not expected (for: {for_s.get(want, 0):.0f}s + {MARGIN}s > hold {hold:.0f}s)")
                continue
            if any(n == want for _, _, n, _ in got):
                c.result(True, f"{x['event']}: the expected {want} fired")
                continue
            # an alert without `for:` that a change keeps firing for a while (increase over
            # 10 min) may still be firing from an earlier event: it fired, but not anew
            before = [(s, e) for s, e, labels in fired if labels["alertname"] == want and s < x["start"] <= e]
            c.result(bool(before) and for_s.get(want, 0) == 0,
                     f"{x['event']}: the expected {want} fired" + (
                         f" (already firing since {(before[0][0] - t0) / 60:.1f} min)" if before else ""))
    if unexplained:
        table.append("| (no scheduled event) | | | " + ", ".join(
            f"{n} {w} ({(s - t0) / 60:.1f}-{(e - t0) / 60:.1f})" for s, e, n, w in unexplained) + " |")
    c.result(not unexplained, f"every alert that fired is explained by a scheduled event ({len(fired)} fired, "
                              f"{len(unexplained)} unexplained: {sorted({n + ' ' + w for _, _, n, w in unexplained})})")
    print("\n".join(table))
    with open(f"{d}/alerts.md", "w") as f:
        f.write("\n".join(table) + "\n")

    # -- 4. counters only go down at the restart
    counters = query_range(a.prom, '{job="patroni-raft-exporter", __name__=~".+_total"}', t0, end, step)
    drops = []
    for labels, vals in counters:
        for (ta, va), (tb, vb) in zip(vals, vals[1:]):
            if vb < va and not (restart and ta <= re_ and tb >= rs):
                drops.append((tb, f"{labels.get('__name__')}{{{labels.get('scope', '')}}} {va:g}->{vb:g}"))
    c.result(not drops, f"no counter went down but at the restart ({len(counters)} counter series; "
                        f"{len(drops)} drops): {by_time(drops, events, t0)}; e.g. {[x for _, x in drops[:3]]}")

    # -- 5. the removed cluster's series gone; no healthy cluster lost a series
    rm, ad = ev.get("cluster-removed"), ev.get("cluster-added")
    if rm:
        left = query_range(a.prom, f'count({{job="patroni-raft-exporter", scope="{a.removed}"}})',
                           rm["end"] + 2 * step, end, step)
        c.result(not left, f"no series of the removed {a.removed} in Prometheus from 2 scrapes after the SIGHUP")
    lost = []
    for line in open(f"{d}/lost-series.txt"):
        t, series = line.rstrip("\n").split("\t", 1)
        t = float(t)
        if rm and f'scope="{a.removed}"' in series and t >= rm["start"]:
            continue
        lost.append((t, series))
    c.result(not lost, f"no healthy simulated cluster lost a series between two sampler scrapes: {len(lost)} lost: "
                       f"{by_time(lost, events, t0)}; e.g. {[x for _, x in lost[:3]]}")
    counts = query_range(a.prom, 'count by (scope) ({job="patroni-raft-exporter", scope=~"sim-.*|extra-.*"})',
                         t0 + a.warm, end, step)
    dips = []
    for labels, vals in counts:
        scope = labels.get("scope")
        ok_vals = [(t, v) for t, v in vals
                   if not (restart and rs <= t <= re_ + 60)
                   and not (scope == a.removed and rm and t >= rm["start"])
                   and not (scope == a.added and ad and t <= ad["end"] + 60)]
        for (ta, va), (tb, vb) in zip(ok_vals, ok_vals[1:]):
            if vb < va:
                dips.append((tb, f"{scope} {va:g}->{vb:g}"))
    c.result(not dips, f"no simulated cluster's series count dips at a Prometheus scrape ({len(counts)} clusters; "
                       f"{len(dips)} dips): {by_time(dips, events, t0)}; e.g. {[x for _, x in dips[:3]]}")

    # -- the figure
    t = [float(r["t"]) / 60 for r in rows]

    def col(key, scale=1.0):
        return [float(r[key]) * scale if r[key] not in ("", None) else float("nan") for r in rows]

    cpu = col("cpu_s")
    per_cycle = [float("nan")]
    for i in range(1, len(rows)):
        dt = float(rows[i]["t"]) - float(rows[i - 1]["t"])
        same = rows[i]["pid"] == rows[i - 1]["pid"]
        per_cycle.append((cpu[i] - cpu[i - 1]) / dt * step * 1000 if same and dt > 0 else float("nan"))
    panels = [
        ("RSS (MiB)", col("rss_kib", 1 / 1024)),
        ("open fds", col("fds")),
        ("threads", col("threads")),
        (f"CPU per {step:.0f} s poll cycle (ms)", per_cycle),
        ("/metrics over TLS (ms)", col("scrape_s", 1000)),
        ("poll errors (counter sum)", col("poll_errors")),
        ("series", col("series")),
        ("slowest poll (s)", col("poll_max_s")),
    ]
    fig, axes = plt.subplots(4, 2, figsize=(14, 13), sharex=True)
    for ax, (name, values) in zip(axes.flat, panels):
        ax.plot(t, values, lw=0.8)
        ax.set_title(name, fontsize=10)
        ax.axvspan(a_lo / 60, a_hi / 60, color="green", alpha=0.07)
        ax.axvspan(b_lo / 60, b_hi / 60, color="green", alpha=0.07)
        for x in events:
            ax.axvline((x["start"] - t0) / 60, color="red", lw=0.7, ls="--")
        ax.grid(alpha=0.3)
    for i, x in enumerate(events):
        for ax in axes[0]:
            lo, hi = ax.get_ylim()
            ax.text((x["start"] - t0) / 60, hi - (hi - lo) * (0.02 + 0.45 * (i % 2)), x["event"], rotation=90,
                    fontsize=7, va="top", ha="right", color="red")
    for ax in axes[-1]:
        ax.set_xlabel("minutes (shaded: windows A and B)")
    fig.suptitle(f"soak: {a.title} (red: scheduled events)")
    fig.tight_layout()
    fig.savefig(f"{d}/soak.png", dpi=90)
    print(f"figure: {d}/soak.png")
    print(f"{c.failed} criteria failed")
    return 1 if c.failed else 0


if __name__ == "__main__":
    sys.exit(main())
