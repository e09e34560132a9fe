#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 The kvrelay Authors
#
# SPDX-License-Identifier: Apache-2.0

"""Checks that #include arrows point one way: base <- messages <- actors <- runtime,
with config/ and net/ beside base.

  base/      may include base/ only, and no CAF, gRPC, ZMQ or HTTP headers (pure, cheap);
  config/    may include base/ and config/ (configuration sits beside base);
  net/       may include base/ and net/ (the HTTP client; httplib stays in its .cpp files);
  messages/  may include base/ and messages/;
  actors/    may include base/, net/, messages/, actors/ and the generated proto headers;
  runtime/   may include anything of the library (composition);
  nothing in the library includes tools/, tests/ or bench/.

Prints every violation as file:line and exits 1 if there is any. Run from anywhere:
  python3 scripts/check-layers.py
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIBRARY = ("base", "config", "net", "messages", "actors", "runtime")
ALLOWED = {
    "base": {"base"},
    "config": {"base", "config"},
    "net": {"base", "net"},
    "messages": {"base", "messages"},
    "actors": {"base", "net", "messages", "actors", "proto"},
    "runtime": {"base", "config", "net", "messages", "actors", "runtime", "proto"},
}
# Third-party headers that must stay out of the base layer.
BASE_FORBIDDEN = re.compile(r"^(caf/|grpc|zmq|httplib|google/protobuf)")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]')


def violations():
    for layer in LIBRARY:
        for dirpath, _, files in os.walk(os.path.join(ROOT, layer)):
            for name in sorted(files):
                if not name.endswith((".hpp", ".cpp", ".h")):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, ROOT)
                with open(path, encoding="utf-8") as f:
                    for lineno, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        kind, target = m.groups()
                        if kind == "<":
                            if layer == "base" and BASE_FORBIDDEN.match(target):
                                yield f"{rel}:{lineno}: base/ includes <{target}>"
                            continue
                        top = target.split("/", 1)[0]
                        if "/" not in target:
                            continue  # a sibling header in the same folder
                        if top not in ALLOWED[layer]:
                            yield f"{rel}:{lineno}: {layer}/ includes \"{target}\""


def main():
    found = list(violations())
    for v in found:
        print(v)
    if found:
        print(f"{len(found)} include(s) point the wrong way (see scripts/check-layers.py)")
        return 1
    print("include arrows point one way: base <- messages <- actors <- runtime (config, net beside base)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
