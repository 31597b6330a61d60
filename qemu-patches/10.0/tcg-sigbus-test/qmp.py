#!/usr/bin/env python3
"""Minimal QMP client: qmp.py SOCKET [CMD-JSON...] ; waits for events with
--wait EVENT[,SECONDS]; prints every message as one JSON line."""
import json, socket, sys, time

def main():
    path = sys.argv[1]
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    f = s.makefile('rw')
    def recv(timeout=None):
        s.settimeout(timeout)
        try:
            line = f.readline()
        except socket.timeout:
            return None
        return json.loads(line) if line else None
    recv(10)
    f.write(json.dumps({"execute": "qmp_capabilities"}) + "\n"); f.flush()
    recv(10)
    for arg in sys.argv[2:]:
        if arg.startswith("--wait="):
            ev, _, secs = arg[7:].partition(",")
            end = time.time() + float(secs or 10)
            while time.time() < end:
                m = recv(max(0.1, end - time.time()))
                if m is None:
                    continue
                print(json.dumps(m), flush=True)
                if m.get("event") == ev:
                    break
            else:
                print(json.dumps({"timeout": ev}), flush=True)
            continue
        f.write(arg + "\n"); f.flush()
        while True:
            m = recv(30)
            print(json.dumps(m), flush=True)
            if m is None or "return" in m or "error" in m:
                break

main()
