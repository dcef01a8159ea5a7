# Tries to reach the network and the host; every attempt should be refused.
import os
import socket

for family, name in ((socket.AF_INET, "TCP/IPv4"), (socket.AF_INET6, "TCP/IPv6"), (40, "VSOCK")):
    try:
        socket.socket(family, socket.SOCK_STREAM).connect(("10.0.0.1", 80) if family == socket.AF_INET else ("::1", 80))
        print(f"{name}: connected")
    except OSError as exc:
        print(f"{name}: refused ({exc.strerror})")
try:
    open("/etc/passwd", "a").write("x")
except OSError as exc:
    print(f"write to /etc: refused ({exc.strerror})")
print(f"running as uid {os.getuid()}")
