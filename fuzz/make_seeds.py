#!/usr/bin/env python3
"""Writes the committed seed corpora of fuzz/corpus/ from the values the tests use.

config/: every configuration text that tests/host/config_test.cc parses, plus the shipped config/csi-proxy.toml.
<group>/: for each method index (the first byte the group fuzzer reads), requests whose first fields carry the
values the group's tests send: paths below the harness's kubelet_path, disk numbers, volume ids, SMB remote paths,
iSCSI portals and target names, service names. Run from the repository root: python3 fuzz/make_seeds.py
"""
import ast
import hashlib
import os
import re

KUBELET = "/tmp/csi-proxy-fuzz/{group}/kubelet"  # the harness's fixed scratch layout (group_fuzzer.cc)


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(number, value):
    if isinstance(value, int):
        return varint(number << 3) + varint(value)
    data = value.encode() if isinstance(value, str) else value
    return varint(number << 3 | 2) + varint(len(data)) + data


def write(directory, data):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, hashlib.sha1(data).hexdigest()[:16]), "wb") as f:
        f.write(data)


def config_seeds():
    text = open("tests/host/config_test.cc").read()
    out = "fuzz/corpus/config"
    for raw in re.findall(r'R"\((.*?)\)"', text, re.S):
        write(out, raw.encode())
    for quoted in re.findall(r'Parse\(("(?:[^"\\]|\\.)*")\)', text):
        write(out, ast.literal_eval(quoted).encode())
    write(out, open("config/csi-proxy.toml", "rb").read())


GROUP_VALUES = {
    "filesystem": lambda k: [[k + "/pods/a"], [k + "/pods/a", k + "/pods/b"], [k + "/pods/a/b/c"], [k],
                             [k + "/../etc"], ["relative"]],
    "disk": lambda k: [[0], [1], [7], ["0"], ["1"], ["page83-one"]],
    "volume": lambda k: [["/dev/disk/by-uuid/fuzz"], ["/dev/disk/by-uuid/fuzz", k + "/pods/m"], [1, 1], [k + "/pods/m"],
                         ["/dev/disk/by-uuid/fuzz", 1 << 31], ["/dev/sda1"]],
    "smb": lambda k: [["\\\\server\\share"], ["\\\\server\\share", k + "/pods/smb"], ["//server/share/sub"],
                      ["\\\\server\\share", "", "user", "secret"], [k + "/pods/smb", "\\\\10.0.0.1\\s"]],
    "iscsi": lambda k: [[field(1, "10.0.0.1") + field(2, 3260)], ["iqn.2026-01.io.example:fuzz"],
                        [field(1, "10.0.0.1") + field(2, 3260), "iqn.2026-01.io.example:fuzz"], ["secret"]],
    "system": lambda k: [["csi-proxy"], ["ssh.service"], ["../evil"], [""]],
}


def group_seeds():
    for group, values in GROUP_VALUES.items():
        kubelet = KUBELET.format(group=group)
        for method in range(40):
            write(f"fuzz/corpus/{group}", bytes([method]))
            for fields in values(kubelet):
                write(f"fuzz/corpus/{group}",
                      bytes([method]) + b"".join(field(i + 1, v) for i, v in enumerate(fields)))


config_seeds()
group_seeds()
