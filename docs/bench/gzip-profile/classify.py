"""Where the samples of a `perf script` output are: the system call (or user-space object) a
sample's stack is in, and how many of the writev samples deliver the data into the reader's
socket (on loopback the sender's writev runs the receiver's softirq: work a NIC would take off
the host)."""
import collections
import re
import sys


def classify(sample: str) -> str:
    frames = [line.strip() for line in sample.strip().split("\n")[1:] if line.strip()]
    if not frames:
        return ""
    if "[kernel.kallsyms]" not in frames[0]:
        return "user: " + ("exporter" if "patroni-raft-exporter" in frames[0]
                           else "libc" if "libc" in frames[0] else "other")
    outermost = re.sub(r"^[0-9a-f]+ |\+0x.*$", "", frames[-1])
    return "kernel: " + {"__GI___writev": "writev (send the response)", "__libc_recv": "recv (the request)",
                         "epoll_wait": "epoll_wait"}.get(outermost, "other (scheduling, futex, interrupts)")


def main(path: str) -> None:
    samples = [s for s in open(path).read().split("\n\n") if s.strip()]
    counts = collections.Counter(classify(s) for s in samples)
    delivery = sum(1 for s in samples if "__GI___writev" in s and re.search(r"net_rx_action|process_backlog", s))
    print(f"perf samples: {len(samples)}")
    for what, n in counts.most_common():
        if what:
            print(f"{100 * n / len(samples):5.1f} %  {what}")
    print(f"{100 * delivery / len(samples):5.1f} %  of which in writev: the loopback delivery into the reader's socket")


if __name__ == "__main__":
    main(sys.argv[1])
