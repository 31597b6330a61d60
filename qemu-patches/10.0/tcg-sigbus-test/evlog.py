#!/usr/bin/env python3
import json, socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); f = s.makefile('rw')
f.readline(); f.write('{"execute":"qmp_capabilities"}\n'); f.flush()
while True:
    line = f.readline()
    if not line:
        break
    m = json.loads(line)
    if 'event' in m:
        print(json.dumps(m), flush=True)
