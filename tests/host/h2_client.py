#!/usr/bin/python3
"""A raw HTTP/2 client for the tests of how the host takes streams, on Debian's python3-h2: it opens gRPC streams
the way a broken or hostile client does, which no gRPC library lets a test do.

  h2_client.py SOCKET PATH COUNT MODE [--request-hex HEX] [--connections N] [--ack] [--settle SECONDS]
                                      [--hold SECONDS]
    MODE  full          HEADERS, then the request in one DATA frame with END_STREAM (a well-formed unary call)
          headers-only  HEADERS with END_STREAM and no DATA (a call whose request never comes)
          half-open     HEADERS without END_STREAM, then nothing
          hangup        HEADERS and the request, then the connection is closed at once (nothing is read)
          partial-hangup  HEADERS and the first half of the request (its gRPC frame announces all of it), then
                        the connection is closed
    --request-hex   the request message, hex (default: an empty message)
    --connections   spread the streams over this many connections, round robin (default 1)
    --ack           acknowledge the host's SETTINGS; by default they are never acknowledged, as by a client that
                    ignores them (gRPC enforces the streams limit it advertises only once acknowledged)
    --settle        how long to wait for the host's answers (default 5 s); the wait ends earlier once every
                    stream has been answered, reset or has its response headers
    --hold          then keep the connections open this long (answering the host's pings), and report again

Prints one JSON line per report: {"streams": N, "status": {"<grpc-status>": n, ...}, "open": n, "reset": n,
"silent": n, "goaway": bool}. "open": the host sent response headers and no trailers yet (a health watch that
serves); "silent": nothing yet; "status": trailers (or trailers-only answers) by grpc-status.
"""
import argparse
import json
import socket
import sys
import time

import h2.config
import h2.connection
import h2.events


def grpc_message(payload):
    return b"\x00" + len(payload).to_bytes(4, "big") + payload


def without_settings_acks(data):
    """The frames of `data` except SETTINGS frames with the ACK flag."""
    out = bytearray()
    i = 0
    while i + 9 <= len(data):
        length = int.from_bytes(data[i:i + 3], "big")
        frame_type, flags = data[i + 3], data[i + 4]
        if not (frame_type == 0x4 and flags & 0x1):
            out += data[i:i + 9 + length]
        i += 9 + length
    return bytes(out + data[i:])


class Connection:
    def __init__(self, path, ack):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.h2 = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        self.ack = ack
        self.streams = {}  # stream id -> "silent", "open", "reset" or the grpc-status
        self.goaway = False
        self.h2.initiate_connection()
        self.flush()

    def flush(self):
        data = self.h2.data_to_send()
        if not self.ack:
            data = without_settings_acks(data)
        if data:
            try:
                self.sock.sendall(data)
            except OSError:
                pass

    def open(self, path, mode, request):
        sid = self.h2.get_next_available_stream_id()
        headers = [(":method", "POST"), (":scheme", "http"), (":path", path), (":authority", "localhost"),
                   ("content-type", "application/grpc"), ("te", "trailers")]
        self.h2.send_headers(sid, headers, end_stream=(mode == "headers-only"))
        if mode in ("full", "hangup"):
            self.h2.send_data(sid, grpc_message(request), end_stream=True)
        elif mode == "partial-hangup":
            whole = grpc_message(request)
            self.h2.send_data(sid, whole[:5 + len(request) // 2], end_stream=False)
        self.streams[sid] = "silent"

    def read(self, timeout):
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(65536)
        except socket.timeout:
            return True
        except OSError:
            data = b""
        if not data:
            self.goaway = True
            return False
        for event in self.h2.receive_data(data):
            if isinstance(event, h2.events.ResponseReceived):
                headers = dict(event.headers)
                self.streams[event.stream_id] = headers.get("grpc-status", "open")
            elif isinstance(event, h2.events.TrailersReceived):
                self.streams[event.stream_id] = dict(event.headers).get("grpc-status", "no-status")
            elif isinstance(event, h2.events.DataReceived):
                self.h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.StreamReset):
                if self.streams.get(event.stream_id) in ("silent", "open"):
                    self.streams[event.stream_id] = "reset"
            elif isinstance(event, h2.events.ConnectionTerminated):
                self.goaway = True
        self.flush()
        return True


def report(conns, count):
    status, out = {}, {"streams": count, "open": 0, "reset": 0, "silent": 0}
    for c in conns:
        for state in c.streams.values():
            if state in ("open", "reset", "silent"):
                out[state] += 1
            else:
                status[state] = status.get(state, 0) + 1
    out["status"] = status
    out["goaway"] = any(c.goaway for c in conns)
    print(json.dumps(out, sort_keys=True), flush=True)


def serve(conns, until, stop_when_settled):
    alive = list(conns)
    while alive and time.monotonic() < until:
        if stop_when_settled and all(s != "silent" for c in conns for s in c.streams.values()):
            # Every stream has its answer or its response headers: a moment more for trailers that follow.
            until = min(until, time.monotonic() + 0.2)
            stop_when_settled = False
        step = max(0.0, min(0.05, until - time.monotonic()))
        alive = [c for c in alive if c.read(step)]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("socket")
    p.add_argument("path")
    p.add_argument("count", type=int)
    p.add_argument("mode", choices=["full", "headers-only", "half-open", "hangup", "partial-hangup"])
    p.add_argument("--request-hex", default="")
    p.add_argument("--connections", type=int, default=1)
    p.add_argument("--ack", action="store_true")
    p.add_argument("--settle", type=float, default=5)
    p.add_argument("--hold", type=float, default=0)
    a = p.parse_args()
    request = bytes.fromhex(a.request_hex)
    conns = [Connection(a.socket, a.ack) for _ in range(a.connections)]
    for i in range(a.count):
        conns[i % len(conns)].open(a.path, a.mode, request)
    for c in conns:
        c.flush()
    if a.mode in ("hangup", "partial-hangup"):
        for c in conns:
            c.sock.close()
        return
    serve(conns, time.monotonic() + a.settle, stop_when_settled=True)
    report(conns, a.count)
    if a.hold > 0:
        serve(conns, time.monotonic() + a.hold, stop_when_settled=False)
        report(conns, a.count)


if __name__ == "__main__":
    sys.exit(main())
