#!/usr/bin/env python3
"""Writes the .npy reader's seed corpus: tests/fuzz/npy/ok_*.npy must load,
bad_*.npy must be refused with MOE_ERR_FORMAT. Run once; the files are
committed and replayed by `make check` (tests/check_npy.c)."""
import os, struct

here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "npy")
os.makedirs(here, exist_ok=True)

def npy(header, data=b"", major=1, minor=0, magic=b"\x93NUMPY", hlen=None):
    h = header.encode()
    pad = (64 - (10 + len(h) + 1) % 64) % 64
    h = h + b" " * pad + b"\n"
    n = len(h) if hlen is None else hlen
    return magic + bytes([major, minor]) + struct.pack("<H", n) + h + data

def put(name, blob):
    with open(os.path.join(here, name), "wb") as f:
        f.write(blob)

f4 = lambda *v: struct.pack("<%df" % len(v), *v)
H = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }"

put("ok_f32_2x3.npy", npy(H % ("<f4", "False", "(2, 3)"), f4(*range(6))))
put("ok_f32_1d.npy", npy(H % ("<f4", "False", "(4,)"), f4(1, 2, 3, 4)))
put("ok_scalar.npy", npy(H % ("<f4", "False", "()"), f4(7)))
put("ok_empty.npy", npy(H % ("<f4", "False", "(0, 5)")))
put("ok_i8_keys_reordered.npy", npy("{'shape': (3,), 'fortran_order': False, 'descr': '|i1'}", b"\x01\x02\x03"))
put("ok_double_quotes.npy", npy('{"descr": "<i4", "fortran_order": False, "shape": (2,)}', struct.pack("<2i", 5, -6)))
put("bad_magic.npy", npy(H % ("<f4", "False", "(1,)"), f4(1), magic=b"\x93NUMPZ"))
put("bad_version_2.npy", npy(H % ("<f4", "False", "(1,)"), f4(1), major=2))
put("bad_version_minor.npy", npy(H % ("<f4", "False", "(1,)"), f4(1), minor=5))
put("bad_empty_file.npy", b"")
put("bad_short.npy", b"\x93NUMPY\x01")
put("bad_header_oversized.npy", npy(H % ("<f4", "False", "(1,)"), f4(1), hlen=60000))
put("bad_header_past_eof.npy", npy(H % ("<f4", "False", "(1,)"), hlen=200)[:100])
put("bad_header_not_dict.npy", npy("['descr', '<f4']", f4(1)))
put("bad_header_garbage.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }}}", f4(1)))
put("bad_header_unterminated_string.npy", npy("{'descr': '<f4", f4(1)))
put("bad_header_missing_shape.npy", npy("{'descr': '<f4', 'fortran_order': False}", f4(1)))
put("bad_header_duplicate_key.npy", npy("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}", f4(1)))
put("bad_header_unknown_key.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}", f4(1)))
put("bad_fortran_true.npy", npy(H % ("<f4", "True", "(2, 2)"), f4(1, 2, 3, 4)))
put("bad_fortran_value.npy", npy(H % ("<f4", "Maybe", "(1,)"), f4(1)))
put("bad_descr_unknown.npy", npy(H % ("<c8", "False", "(1,)"), b"\0" * 8))
put("bad_descr_bigendian.npy", npy(H % (">f4", "False", "(1,)"), f4(1)))
put("bad_descr_raw_u2_no_sidecar.npy", npy(H % ("<u2", "False", "(2,)"), b"\0" * 4))
put("bad_shape_negative.npy", npy(H % ("<f4", "False", "(-1,)"), f4(1)))
put("bad_shape_5d.npy", npy(H % ("<f4", "False", "(1, 1, 1, 1, 1)"), f4(1)))
put("bad_shape_huge.npy", npy(H % ("<f4", "False", "(99999999999999999999,)"), f4(1)))
put("bad_shape_overflow_product.npy", npy(H % ("<f4", "False", "(1000000000000, 1000000000000, 1000000000000)"), f4(1)))
put("bad_shape_not_int.npy", npy(H % ("<f4", "False", "(2.5,)"), f4(1)))
put("bad_truncated_data.npy", npy(H % ("<f4", "False", "(2, 3)"), f4(1, 2, 3)))
put("bad_trailing_data.npy", npy(H % ("<f4", "False", "(2,)"), f4(1, 2, 3)))
put("bad_text_after_dict.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} x", f4(1)))
