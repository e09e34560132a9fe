#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 The kvrelay Authors
#
# SPDX-License-Identifier: Apache-2.0

"""Checks that #include arrows point one way:
base <- durable/format <- messages <- actors <- durable <- supervision <- admin <- daemon,
with config/ and net/ beside base.

  base/           may include base/ only, and no CAF, gRPC, ZMQ or HTTP headers (pure, cheap);
  config/         may include base/, durable/format/ and config/ (configuration sits beside base);
  net/            may include base/ and net/ (the HTTP client, DNS; httplib stays in its .cpp);
  durable/format/ may include base/ and durable/format/ (the state dir's files, pure);
  messages/       may include base/, durable/format/ and messages/;
  actors/         may include the above but config/, actors/ and the generated proto headers;
  durable/        the store's thread and the restore's bookkeeping: the above and durable/;
  supervision/    the root actor and the pipeline supervisor: the above, config/, supervision/;
  admin/          the admin port: the above and admin/;
  daemon/         may include anything of the library (composition);
  nothing in the library includes tools/, tests/ or bench/.

Prints every violation as file:line and exits 1 if there is any. Run from anywhere:
  python3 scripts/check-layers.py
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIBRARY = ("base", "config", "net", "durable/format", "messages", "actors", "durable",
           "supervision", "admin", "daemon")
_ACTORS = {"base", "net", "durable/format", "messages", "actors", "proto"}
ALLOWED = {
    "base": {"base"},
    "config": {"base", "durable/format", "config"},
    "net": {"base", "net"},
    "durable/format": {"base", "durable/format"},
    "messages": {"base", "durable/format", "messages"},
    "actors": _ACTORS,
    "durable": _ACTORS | {"durable"},
    "supervision": _ACTORS | {"durable", "config", "supervision"},
    "admin": _ACTORS | {"durable", "config", "supervision", "admin"},
    "daemon": _ACTORS | {"durable", "config", "supervision", "admin", "daemon"},
}


def layer_of(path):
    """The layer of a library path ("durable/format/x.hpp" -> "durable/format")."""
    if path.startswith("durable/format/"):
        return "durable/format"
    return path.split("/", 1)[0]
# Third-party headers that must stay out of the pure layers below messages.
BASE_FORBIDDEN = re.compile(r"^(caf/|grpc|zmq|httplib|google/protobuf)")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]')


def violations():
    for top in sorted({layer.split("/", 1)[0] for layer in LIBRARY}):
        for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
            for name in sorted(files):
                if not name.endswith((".hpp", ".cpp", ".h")):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, ROOT)
                layer = layer_of(rel)
                with open(path, encoding="utf-8") as f:
                    for lineno, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        kind, target = m.groups()
                        if kind == "<":
                            if layer in ("base", "durable/format") and BASE_FORBIDDEN.match(target):
                                yield f"{rel}:{lineno}: {layer}/ includes <{target}>"
                            continue
                        if "/" not in target:
                            continue  # a sibling header in the same folder
                        if layer_of(target) not in ALLOWED[layer]:
                            yield f"{rel}:{lineno}: {layer}/ includes \"{target}\""


def main():
    found = list(violations())
    for v in found:
        print(v)
    if found:
        print(f"{len(found)} include(s) point the wrong way (see scripts/check-layers.py)")
        return 1
    print("include arrows point one way: base <- durable/format <- messages <- actors <- durable"
          " <- supervision <- admin <- daemon (config, net beside base)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
