#!/usr/bin/env python3
"""Writes the hand-made seeds of the golden, cli and formats fuzz targets
(tests/fuzz/<target>/seed_*). Run once from the repository root; the files
are committed, replayed by `make check` (tests/check_fuzz.c) and grown by
`make fuzz`, whose merged inputs are named by their SHA-1."""
import os, struct

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
fuzz = os.path.join(root, "tests", "fuzz")


def put(target, name, blob):
    d = os.path.join(fuzz, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed_" + name), "wb") as f:
        f.write(blob if isinstance(blob, bytes) else blob.encode())


def sections(files):
    return b"".join(b"==> " + n.encode() + b" <==\n" + d for n, d in files)


def case_files(case, manifest=False):
    d = os.path.join(root, "golden", case)
    out = []
    for n in sorted(os.listdir(d)):
        if n == "MANIFEST.sha256" and not manifest:
            continue
        with open(os.path.join(d, n), "rb") as f:
            out.append((n, f.read()))
    return out


# ---- golden: real cases (the target writes a correct manifest unless one is given)
for case in ["edge.route.one_token", "stage.permute_rows.e2m1_packed", "stage.war_noop.bf16",
             "stage.route.grouped_topk.logits_f16", "e2e.forward.bf16.scaled_deepseek_v3"]:
    put("golden", case, sections(case_files(case)))
put("golden", "with_manifest", sections(case_files("edge.route.one_token", manifest=True)))
put("golden", "digest_only_manifest", sections(case_files("e2e.forward.bf16.scaled_deepseek_v3", manifest=True)))
cj = dict(case_files("edge.route.one_token"))["case.json"]
put("golden", "bad_json", sections([("case.json", cj[: len(cj) // 2])]))
put("golden", "format_2", sections([("case.json", cj.replace(b'"format":\t1', b'"format":\t2'))]))
wide = b'{"format": 1, "inputs": [{"tensor": "x", "file": "in_x.npy", "dtype": "f32", "shape": [' + \
    b", ".join([b"123456789012345678"] * 12) + b'], "bytes": 1, "stored": true}], "outputs": []}'
put("golden", "wide_shape", sections([("case.json", wide)]))
put("golden", "manifest_bad_line", sections([("MANIFEST.sha256", b"abc  case.json\n"), ("case.json", cj)]))
put("golden", "manifest_unterminated", sections([("MANIFEST.sha256", b"0" * 64 + b"  case.json"), ("case.json", cj)]))
put("golden", "manifest_many", sections([("MANIFEST.sha256", b"".join(b"0" * 64 + b"  f%d\n" % i for i in range(80)))]))
# regressions: 67 and 68 names fill the reader's file table (GK_MAX_FILES = 68)
for n in (67, 68):
    put("golden", "manifest_%d" % n, sections([("MANIFEST.sha256", b"".join(b"0" * 64 + b"  f%d\n" % i for i in range(n)))]))

# ---- cli: the first line names the tool, one argument per line
cli = {
    "fmt_encode": "fmt\nencode\ne4m3\n1.5\n--policy\nsat",
    "fmt_decode": "fmt\ndecode\ne2m1\n0x7\n--json",
    "fmt_table": "fmt\ntable\ne8m0",
    "fmt_bits": "fmt\nencode\nbf16\nbits:0x7F800001\n--round\nrz\n--policy\nnonsat",
    "fmt_help": "fmt\n--help",
    "compat_trtllm": "compat\ntrtllm\n--sm\n90\n--act-dtype\nbf16\n--weight-dtype\ne4m3\n--activation\nswiglu\n--topk\n8\n"
                     "--tokens\n64\n--experts-per-node\n32\n--hidden\n4096\n--inter\n1024\n--json",
    "compat_hep": "compat\nhybrid-ep-buffers\n--hidden\n7168\n--max-tokens-per-rank\n128\n--ranks-per-node\n8\n--nodes\n2\n"
                  "--experts-per-rank\n16\n--fp8",
    "compat_ck": "compat\nck-sorting-sizes\n--tokens\n7\n--topk\n2\n--experts\n8\n--block\n32",
    "compat_list": "compat\nlist\npf",
    "compat_check": "compat\ncheck\n--pf\ndeepep_ll\n--experts\nbatched_masked\n--scheme\nfp8_wblock128_agroup128\n"
                    "--topk\n8\n--num-experts\n64\n--world\n4\n--expert-map\n--json",
    "compat_matrix": "compat\nmatrix\n--scheme\nbf16\n--format\ncsv",
    "compat_explain": "compat\nexplain\nnoep-format",
    "sweep_filter": "sweep\n--tier\nquick\n--filter\n*noep*\n--backend\nref,cpu\n--jobs\n2\n--seed\n7",
    "sweep_bad": "sweep\n--tier\nnope\n--out\nx.jsonl",
    "bench_args": "bench\n--backend\ncpu,ref\n--m\n1,256\n--scheme\nbf16,fp8_wblock128_agroup128\n--pair\nnoep:triton_like\n"
                  "--reps\n3\n--warmup\n0\n--skew\n--json\nb.json",
    "bench_bad_pair": "bench\n--pair\nnoep",
    "golden_list": "golden\nlist\n--filter\nstage.route.*",
    "golden_show": "golden\nshow\nstage.route.softmax_topk\n--dir\ngolden",
    "golden_generate": "golden\ngenerate\n--dir\ng",
    "golden_verify": "golden\nverify\n--dir\ng\n--backend\nref,cpu\n--json\nv.json",
    "golden_update": "golden\nupdate\n--dir\ng\n--diff\nd.json",
    "golden_unknown": "golden\nverfy\n--dri",
}
for n, s in cli.items():
    put("cli", n, s)

# ---- formats: byte 0 format (f16 bf16 e4m3 e5m2 e2m1 e8m0 int8 int4 uint8), byte 1 policy | mode << 2 | odd << 3
specials = [0.0, -0.0, 1.0, -1.5, 448.0, 464.0, 465.0, 57344.0, 65520.0, 6.0, 0.25, 1e-9, 2.0**-127,
            float("inf"), float("-inf"), float("nan"), 3.0e38, -127.5, 127.5, 255.5, 7.5, -8.5]
f32 = b"".join(struct.pack("<f", v) for v in specials)
for fi, name in enumerate(["f16", "bf16", "e4m3", "e5m2", "e2m1", "e8m0", "int8", "int4", "uint8"]):
    for pi in range(4):
        put("formats", "%s_p%d_values" % (name, pi), bytes([fi, pi | 4, 9]) + f32)
    width = 2 if name in ("f16", "bf16") else 1
    codes = bytes(range(256)) if width == 1 else b"".join(struct.pack("<H", c) for c in
                                                          [0, 1, 0x3C00, 0x7BFF, 0x7C00, 0x7E00, 0x8000, 0xFC00, 0x7F80, 0xFF81])
    put("formats", "%s_codes" % name, bytes([fi, 0 | 8, 17]) + codes)
