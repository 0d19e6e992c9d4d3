#!/usr/bin/env python3
"""Time one member's GET /patroni to another, as Patroni's own leader race does.

Patroni's fetch_node_status (ha.py) asks every other member's api_url with a 2 s deadline and
no retry, a new connection each time (Patroni's REST API closes it after the answer); a member
that does not answer in time counts as unhealthy in the race. This probe does the same from the
asking member's address (SOURCE_IP), every INTERVAL seconds on a fixed schedule, for DURATION
seconds, and writes one line per request: seconds since the start, latency in seconds (the
deadline when it timed out), and `ok`, `timeout` or the error's name.

Usage: probe.py SOURCE_IP URL DURATION INTERVAL OUT
"""
import http.client
import socket
import sys
import time
import urllib.parse

DEADLINE_S = 2.0  # fetch_node_status: self.patroni.request(member, timeout=2, retries=0)
MAX_BODY = 1 << 20


def one(source_ip, url):
    """One GET: (latency seconds, outcome)."""
    parts = urllib.parse.urlsplit(url)
    start = time.perf_counter()
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=DEADLINE_S,
                                      source_address=(source_ip, 0))
    try:
        conn.request("GET", parts.path or "/")
        response = conn.getresponse()
        response.read(MAX_BODY)
        outcome = "ok" if response.status in (200, 503) else f"http{response.status}"
    except (socket.timeout, TimeoutError):
        outcome = "timeout"
    except OSError as err:
        outcome = type(err).__name__
    finally:
        conn.close()
    elapsed = time.perf_counter() - start
    return (min(elapsed, DEADLINE_S) if outcome == "timeout" else elapsed), outcome


def main():
    source_ip, url, duration, interval, out = sys.argv[1:6]
    duration, interval = float(duration), float(interval)
    begin = time.perf_counter()
    tick = 0
    with open(out, "w", encoding="utf-8") as sink:
        while True:
            due = begin + tick * interval
            now = time.perf_counter()
            if due - begin >= duration:
                break
            if due > now:
                time.sleep(due - now)
            latency, outcome = one(source_ip, url)
            sink.write(f"{time.perf_counter() - begin:.3f}\t{latency:.6f}\t{outcome}\n")
            tick += 1
            # a request that overran its slot does not queue the next ones behind it
            tick = max(tick, int((time.perf_counter() - begin) / interval))


if __name__ == "__main__":
    main()
