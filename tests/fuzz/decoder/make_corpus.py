#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 The kvrelay Authors
#
# SPDX-License-Identifier: Apache-2.0

"""Writes the decoder seed corpus (tests/fuzz/corpus/decoder/): every hex dump of
docs/spec/engine-wire.md §7 as a full EventBatch payload, plus a few generated batches.
Self-contained (a tiny msgpack writer) so it needs no Python packages. Deterministic."""
import os
import random
import struct
import sys

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "corpus", "decoder")


class F64(float):
    """Always written as float64, like msgspec."""


def pack(v):
    if v is None:
        return b"\xc0"
    if v is True:
        return b"\xc3"
    if v is False:
        return b"\xc2"
    if isinstance(v, float):
        return b"\xcb" + struct.pack(">d", v)
    if isinstance(v, int):
        if 0 <= v < 0x80:
            return bytes([v])
        if -32 <= v < 0:
            return struct.pack(">b", v)
        if v >= 0:
            for code, fmt, lim in ((0xCC, ">B", 1 << 8), (0xCD, ">H", 1 << 16),
                                   (0xCE, ">I", 1 << 32), (0xCF, ">Q", 1 << 64)):
                if v < lim:
                    return bytes([code]) + struct.pack(fmt, v)
        for code, fmt, lim in ((0xD0, ">b", 1 << 7), (0xD1, ">h", 1 << 15),
                               (0xD2, ">i", 1 << 31), (0xD3, ">q", 1 << 63)):
            if -lim <= v:
                return bytes([code]) + struct.pack(fmt, v)
        raise ValueError(v)
    if isinstance(v, bytes):
        n = len(v)
        if n < 256:
            return b"\xc4" + bytes([n]) + v
        return b"\xc5" + struct.pack(">H", n) + v
    if isinstance(v, str):
        b = v.encode()
        n = len(b)
        if n < 32:
            return bytes([0xA0 | n]) + b
        return b"\xd9" + bytes([n]) + b
    if isinstance(v, (list, tuple)):
        n = len(v)
        head = bytes([0x90 | n]) if n < 16 else b"\xdc" + struct.pack(">H", n)
        return head + b"".join(pack(x) for x in v)
    if isinstance(v, dict):
        n = len(v)
        head = bytes([0x80 | n]) if n < 16 else b"\xde" + struct.pack(">H", n)
        return head + b"".join(pack(k) + pack(x) for k, x in v.items())
    raise TypeError(type(v))


def h(text):
    return bytes.fromhex(text)


ENV = h("93 cb 41 da 55 6e 40 20 00 00 91")  # [ts, [<one event>], 0] around an event's bytes
TOK = "dc 00 10 ce 00 02 50 5c cd 03 68 cc c6 64 65 66 67 68 69 6a 6b 6c 6d 6e 6f 70"
STORED = "ab 42 6c 6f 63 6b 53 74 6f 72 65 64"
REMOVED = "ac 42 6c 6f 63 6b 52 65 6d 6f 76 65 64"
HC = "91 cf bf 17 ef 84 73 ec 96 e9 cf 83 4a b1 2f 98 a3 dc b0 " + TOK + " 10 c0 a3 47 50 55"

EVENTS = {
    "a_stored": "96 " + STORED + " 91 d3 d5 b9 ca 41 6d ae 91 33 c0 " + TOK + " 10 c0",
    "c_stored_int": "97 " + STORED + " " + HC,
    "c_stored_bin": "97 " + STORED + " 91 c4 20 89 a1 a9 8e 70 9f a6 72 37 4b 46 3b bd 8d 59 46 ff"
                    " 4f 53 0c 5e 65 be 07 bf 17 ef 84 73 ec 96 e9 c4 20 b8 c6 f3 3f 17 80 d3 09 77"
                    " c5 e9 64 f6 2e 79 59 10 2a 36 94 f1 c2 8a e0 83 4a b1 2f 98 a3 dc b0 " + TOK
                    + " 10 c0 a3 47 50 55",
    "d_stored": "98 " + STORED + " " + HC + " c0",
    "e_stored": "99 " + STORED + " " + HC + " c0 91 c0",
    "e_stored_salted": "99 " + STORED + " 91 cf bf 17 ef 84 73 ec 96 e9 c0 " + TOK
                       + " 10 c0 a3 47 50 55 c0 91 91 a8 74 65 6e 61 6e 74 2d 61",
    "f_stored": "9a " + STORED + " " + HC + " c0 91 c0 00",
    "g_stored": "9c " + STORED + " " + HC
                + " c0 91 c0 00 ae 66 75 6c 6c 5f 61 74 74 65 6e 74 69 6f 6e c0",
    "g_stored_swa": "9c " + STORED + " " + HC
                    + " c0 91 c0 01 ae 73 6c 69 64 69 6e 67 5f 77 69 6e 64 6f 77 cc 80",
    "h_map_stored": "8b a4 74 79 70 65 " + STORED + " ac 62 6c 6f 63 6b 5f 68 61 73 68 65 73 91 cf"
                    " bf 17 ef 84 73 ec 96 e9 b1 70 61 72 65 6e 74 5f 62 6c 6f 63 6b 5f 68 61 73 68"
                    " cf 83 4a b1 2f 98 a3 dc b0 a9 74 6f 6b 65 6e 5f 69 64 73 " + TOK
                    + " aa 62 6c 6f 63 6b 5f 73 69 7a 65 10 a7 6c 6f 72 61 5f 69 64 c0 a6 6d 65 64"
                    " 69 75 6d a3 47 50 55 a9 6c 6f 72 61 5f 6e 61 6d 65 c0 aa 65 78 74 72 61 5f 6b"
                    " 65 79 73 91 c0 a9 67 72 6f 75 70 5f 69 64 78 00 b2 6b 76 5f 63 61 63 68 65 5f"
                    " 73 70 65 63 5f 6b 69 6e 64 ae 66 75 6c 6c 5f 61 74 74 65 6e 74 69 6f 6e",
    "cleared_array": "91 b0 41 6c 6c 42 6c 6f 63 6b 73 43 6c 65 61 72 65 64",
    "cleared_map": "81 a4 74 79 70 65 b0 41 6c 6c 42 6c 6f 63 6b 73 43 6c 65 61 72 65 64",
    "s1_stored": "96 " + STORED + " 91 d3 89 a1 a9 8e 70 9f a6 72 d3 b8 c6 f3 3f 17 80 d3 09 " + TOK
                 + " 10 c0",
    "s2_stored": "97 " + STORED + " 91 d3 89 a1 a9 8e 70 9f a6 72 d3 b8 c6 f3 3f 17 80 d3 09 " + TOK
                 + " 10 c0 a3 47 50 55",
    "s3_salted": "98 " + STORED + " 91 d3 89 a1 a9 8e 70 9f a6 72 c0 " + TOK
                 + " 10 c0 a3 47 50 55 81 aa 63 61 63 68 65 5f 73 61 6c 74 a8 74 65 6e 61 6e 74 2d"
                 " 61",
}

BATCHES = {
    "a_removed_env": "92 cb 41 da 55 6e 40 20 00 00 91 92 " + REMOVED + " 91 d3 d5 b9 ca 41 6d ae"
                     " 91 33",
    "b_removed_env": "93 cb 41 da 55 6e 40 20 00 00 91 92 " + REMOVED + " 91 d3 d5 b9 ca 41 6d ae"
                     " 91 33 00",
    "c_removed_env": "93 cb 41 da 55 6e 40 20 00 00 91 93 " + REMOVED + " 91 cf bf 17 ef 84 73 ec"
                     " 96 e9 a3 47 50 55 00",
    "f_removed_env": "93 cb 41 da 55 6e 40 20 00 00 91 94 " + REMOVED + " 91 cf bf 17 ef 84 73 ec"
                     " 96 e9 a3 47 50 55 00 00",
    "h_map_removed_env": "93 cb 41 da 55 6e 40 20 00 00 91 84 a4 74 79 70 65 " + REMOVED + " ac 62"
                         " 6c 6f 63 6b 5f 68 61 73 68 65 73 91 cf bf 17 ef 84 73 ec 96 e9 a6 6d 65"
                         " 64 69 75 6d a3 47 50 55 a9 67 72 6f 75 70 5f 69 64 78 00 00",
    "h_prime_map_env": "83 a2 74 73 cb 41 da 55 6e 40 20 00 00 a6 65 76 65 6e 74 73 91 81 a4 74 79"
                       " 70 65 b0 41 6c 6c 42 6c 6f 63 6b 73 43 6c 65 61 72 65 64 b2 64 61 74 61 5f"
                       " 70 61 72 61 6c 6c 65 6c 5f 72 61 6e 6b 00",
    "s1_removed_env": "93 cb 41 da 55 6e 40 20 00 00 91 92 " + REMOVED + " 91 d3 89 a1 a9 8e 70 9f"
                      " a6 72 00",
}


def generated(rng):
    out = {}
    ts = F64(1767225600.25)

    def stored(n_blocks, parent, lora=None, medium="GPU", extra=None, group=0, kind="full_attention"):
        hashes = [rng.getrandbits(64) for _ in range(n_blocks)]
        toks = [rng.randrange(0, 151936) for _ in range(16 * n_blocks)]
        return ["BlockStored", hashes, parent, toks, 16, None, medium, lora, extra, group, kind,
                None]

    out["gen_vllm_32x4"] = pack([ts, [stored(4, rng.getrandbits(64)) for _ in range(32)], 0])
    out["gen_mixed_forms"] = pack([ts, [
        stored(2, None, lora="sql-lora", extra=[["sql-lora"], ["sql-lora", "salt"]]),
        {"type": "BlockStored", "block_hashes": [-5, 7], "token_ids": list(range(32)),
         "block_size": 16, "cache_salt": "t", "medium": "cpu", "lora_id": None},
        {"block_hashes": [1], "type": "BlockRemoved", "medium": "CPU_PINNED", "group_idx": 1},
        ["BlockStored", [1, 2], None, [[1, 2], [3, 4]], 1, None, "GPU",
         {"cache_salt": "abc"}],
        ["BlockStored", [3], None, [], 0, None, "CPU"],
        ["FutureEvent", 1, 2, 3],
        ["AllBlocksCleared"],
    ], 1])
    out["gen_multimodal"] = pack([ts, [stored(3, None, extra=[None, [["abcd", 7]],
                                                              [b"\x01" * 32]])], 2])
    out["gen_sglang_eagle"] = pack([ts, [["BlockStored", [-1], -2,
                                         [[rng.randrange(1 << 32), 5] for _ in range(8)], 8, None,
                                         "GPU"]], 0])
    out["gen_map_envelope"] = pack({"events": [["BlockRemoved", [b"\xaa" * 16], "DISK", 3]],
                                    "ts": 5, "attn_dp_rank": 1})
    # vLLM 0.26+ maps: locality, origin, remaining_copy_counts (#48281, #51699, #48933), and the
    # newer media.
    i_stored = {"type": "BlockStored", "block_hashes": [11, 12], "parent_block_hash": None,
                "token_ids": list(range(32)), "block_size": 16, "lora_id": None, "medium": "FS",
                "lora_name": None, "locality": "REMOTE", "origin": "REUSED"}
    i_removed = {"type": "BlockRemoved", "block_hashes": [11, 12], "medium": "GPU",
                 "locality": "LOCAL", "remaining_copy_counts": [1, 0]}
    out["gen_era_i_copies_locality"] = pack([ts, [
        i_stored, i_removed,
        {"type": "BlockRemoved", "block_hashes": [12], "medium": "lmcache-l2-redis",
         "remaining_copy_counts": [3, 4]},
        ["BlockStored", [13], None, list(range(16)), 16, None, "QUANTUM_FOAM"],
    ], 0])
    # An llm-d storage publisher: [ts, [bin(event), ...]] with a 2-element envelope.
    storage_store = ["BlockStored", [21, 22], 0, [], 0, None, "STORAGE"]
    out["gen_bin_wrapped"] = pack([ts, [pack(storage_store), pack(i_removed),
                                        ["BlockRemoved", [21], "STORAGE"]]])
    return out


# docs/producers.md: the newer producers' batches, written the way each producer writes them
# (msgspec rules of docs/spec/engine-wire.md §2; sources cited in that page). `--hex` prints
# them for the page and tests/decoder/producers_test.cpp.
TS = F64(1767225600.5)
TOKS = [151644, 872, 198] + list(range(100, 113))
H, P = 0xBF17EF8473EC96E9, 0x834AB12F98A3DCB0            # vLLM/ATOM-style u64 hashes
HS, PS = -8529349790023047566, -5132147273039293687      # first 8 digest bytes, signed (TRT, SGLang)
DIGEST = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"


def producers():
    trt_stored = {"type": "BlockStored", "block_hashes": [HS], "parent_block_hash": PS,
                  "token_ids": TOKS, "block_size": 16, "lora_id": None, "medium": "GPU",
                  "lora_name": None}
    trt_mm = dict(trt_stored)
    trt_mm["token_ids"] = TOKS[:3] + [DIGEST] + list(range(151937, 151949))
    trt_mm["mm_keys"] = [[{"type": "mm_key", "hash": DIGEST, "start_offset": 0}]]
    atom0_stored = ["BlockStored", [H], P, TOKS, 16, None, "GPU", None, None, 0, None, None]
    atom_stored = ["BlockStored", [H], P, TOKS, 16, None, "GPU", None, None, None, None, None, 16]
    atom_remote = ["BlockStored", [H + 1], None, TOKS, 16, None, "REMOTE", None, None, None, None,
                   None, 0]
    placeholder = {"type": "BlockStored", "block_hashes": [H], "parent_block_hash": None,
                   "token_ids": [], "block_size": 0, "lora_id": None, "medium": "CPU",
                   "lora_name": None, "group_idx": 1}
    session = {"type": "BlockStored", "block_hashes": [H], "parent_block_hash": P,
               "token_ids": TOKS, "block_size": 16, "lora_id": None, "medium": "GPU",
               "lora_name": None, "extra_keys": [None], "group_idx": 0,
               "kv_cache_spec_kind": "full_attention", "session_id": "sess-1"}
    sgl_full = ["BlockStored", [HS], None, TOKS, 16, None, "GPU", ["full", "swa"]]
    sgl_mamba = ["BlockStored", [HS], None, TOKS, 16, None, "GPU", ["mamba"]]
    sgl_nil = ["BlockStored", [HS], None, TOKS, 16, None, "GPU", None]
    sgl_salted = ["BlockStored", [HS], None, TOKS, 16, None, "GPU", ["full"],
                  {"cache_salt": "tenant-a"}]
    return {
        "trt_stored_env": pack([TS, [trt_stored], 0]),
        "trt_removed_env": pack([TS, [{"type": "BlockRemoved", "block_hashes": [HS],
                                       "medium": "GPU"}], 0]),
        "trt_mm_env": pack([TS, [trt_mm], 0]),
        "atom0_env": pack([TS, [atom0_stored, ["BlockRemoved", [H], "GPU", 0],
                                ["AllBlocksCleared", None]], 0]),
        "atom_env": pack([TS, [atom_stored, atom_remote, ["BlockRemoved", [H], "GPU", None],
                               ["BlockTransferred", [H], "GPU", "CPU", None]], 0]),
        "vllm_placeholder_env": pack([TS, [placeholder], 0]),
        "vllm_session_env": pack([TS, [session], 0]),
        "sglang_components_env": pack([TS, [sgl_full, sgl_mamba, sgl_nil, sgl_salted], 0]),
    }


def main():
    if sys.argv[1:] == ["--hex"]:
        for name, data in producers().items():
            print(name, len(data))
            print(data.hex(" "))
        return
    os.makedirs(OUT, exist_ok=True)
    files = {}
    for name, ev in EVENTS.items():
        files["spec_" + name] = ENV + h(ev) + b"\x00"
    for name, b in BATCHES.items():
        files["spec_" + name] = h(b)
    files.update(generated(random.Random(1337)))
    files.update({"prod_" + k: v for k, v in producers().items()})
    for name, data in sorted(files.items()):
        with open(os.path.join(OUT, name + ".msgpack"), "wb") as f:
            f.write(data)
    print(f"wrote {len(files)} files to {os.path.normpath(OUT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
