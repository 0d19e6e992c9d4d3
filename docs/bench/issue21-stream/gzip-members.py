"""What one gzip member per (cluster, family) chunk would weigh against one member per scrape.

Usage: python3 members.py metrics.txt
"""
import gzip, re, sys, time
text = open(sys.argv[1], 'rb').read()
chunks, current, key = [], [], None
for line in text.splitlines(keepends=True):
    if line.startswith(b'#'):
        if current: chunks.append(b''.join(current)); current = []
        chunks.append(line); key = None  # descriptors: their own member
        continue
    m = re.search(rb'scope="([^"]*)"', line)
    k = m.group(1) if m else None
    if k != key and current:
        chunks.append(b''.join(current)); current = []
    key = k; current.append(line)
if current: chunks.append(b''.join(current))
assert b''.join(chunks) == text
t = time.process_time(); whole = len(gzip.compress(text, 1)); tw = time.process_time() - t
t = time.process_time(); members = sum(len(gzip.compress(c, 1)) for c in chunks); tm = time.process_time() - t
print(f"bytes {len(text)} chunks {len(chunks)} mean chunk {len(text)/len(chunks):.0f} B")
print(f"one member: {whole} B ({len(text)/whole:.1f}:1), {tw*1000:.1f} ms CPU (python zlib level 1)")
print(f"a member per chunk: {members} B ({len(text)/members:.1f}:1), x{members/whole:.1f} the size, {tm*1000:.1f} ms CPU")
