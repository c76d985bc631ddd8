"""Collation ids (as TABLE_MAP's charset metadata carries them) -> character sets -> Python codecs.

The id table is MariaDB 10.11's ``information_schema.COLLATIONS`` plus MySQL 8's additions
(76 utf8mb3_tolower_ci, 248-250 gb18030, 255-323 utf8mb4 *_0900_* collations) and MariaDB
10.10+'s UCA-14.0 collation blocks (2048 + 256*k). Only the character set matters for decoding;
the collation part of the id is irrelevant to bytes -> text.
"""

from __future__ import annotations

_RANGES: dict[str, list[tuple[int, int]]] = {
    "armscii8": [(32, 32), (64, 64), (1056, 1056), (1088, 1088)],
    "ascii": [(11, 11), (65, 65), (1035, 1035), (1089, 1089)],
    "big5": [(1, 1), (84, 84), (1025, 1025), (1108, 1108)],
    "binary": [(63, 63)],
    "cp1250": [(26, 26), (34, 34), (44, 44), (66, 66), (99, 99), (1050, 1050), (1090, 1090)],
    "cp1251": [(14, 14), (23, 23), (50, 52), (1074, 1075)],
    "cp1256": [(57, 57), (67, 67), (1081, 1081), (1091, 1091)],
    "cp1257": [(29, 29), (58, 59), (1082, 1083)],
    "cp850": [(4, 4), (80, 80), (1028, 1028), (1104, 1104)],
    "cp852": [(40, 40), (81, 81), (1064, 1064), (1105, 1105)],
    "cp866": [(36, 36), (68, 68), (1060, 1060), (1092, 1092)],
    "cp932": [(95, 96), (1119, 1120)],
    "dec8": [(3, 3), (69, 69), (1027, 1027), (1093, 1093)],
    "eucjpms": [(97, 98), (1121, 1122)],
    "euckr": [(19, 19), (85, 85), (1043, 1043), (1109, 1109)],
    "gb18030": [(248, 250)],
    "gb2312": [(24, 24), (86, 86), (1048, 1048), (1110, 1110)],
    "gbk": [(28, 28), (87, 87), (1052, 1052), (1111, 1111)],
    "geostd8": [(92, 93), (1116, 1117)],
    "greek": [(25, 25), (70, 70), (1049, 1049), (1094, 1094)],
    "hebrew": [(16, 16), (71, 71), (1040, 1040), (1095, 1095)],
    "hp8": [(6, 6), (72, 72), (1030, 1030), (1096, 1096)],
    "keybcs2": [(37, 37), (73, 73), (1061, 1061), (1097, 1097)],
    "koi8r": [(7, 7), (74, 74), (1031, 1031), (1098, 1098)],
    "koi8u": [(22, 22), (75, 75), (1046, 1046), (1099, 1099)],
    "latin1": [(5, 5), (8, 8), (15, 15), (31, 31), (47, 49), (94, 94), (1032, 1032), (1071, 1071)],
    "latin2": [(2, 2), (9, 9), (21, 21), (27, 27), (77, 77), (1033, 1033), (1101, 1101)],
    "latin5": [(30, 30), (78, 78), (1054, 1054), (1102, 1102)],
    "latin7": [(20, 20), (41, 42), (79, 79), (1065, 1065), (1103, 1103)],
    "macce": [(38, 38), (43, 43), (1062, 1062), (1067, 1067)],
    "macroman": [(39, 39), (53, 53), (1063, 1063), (1077, 1077)],
    "sjis": [(13, 13), (88, 88), (1037, 1037), (1112, 1112)],
    "swe7": [(10, 10), (82, 82), (1034, 1034), (1106, 1106)],
    "tis620": [(18, 18), (89, 89), (1042, 1042), (1113, 1113)],
    "ucs2": [(35, 35), (90, 90), (128, 151), (159, 159), (640, 642), (1059, 1059), (1114, 1114),
             (1152, 1152), (1174, 1174), (2560, 2815)],
    "ujis": [(12, 12), (91, 91), (1036, 1036), (1115, 1115)],
    "utf16": [(54, 55), (101, 124), (672, 674), (1078, 1079), (1125, 1125), (1147, 1147), (2816, 3071)],
    "utf16le": [(56, 56), (62, 62), (1080, 1080), (1086, 1086)],
    "utf32": [(60, 61), (160, 183), (736, 738), (1084, 1085), (1184, 1184), (1206, 1206), (3072, 3327)],
    "utf8mb3": [(33, 33), (76, 76), (83, 83), (192, 215), (223, 223), (576, 578), (1057, 1057),
                (1107, 1107), (1216, 1216), (1238, 1238), (2048, 2303)],
    "utf8mb4": [(45, 46), (224, 247), (255, 323), (608, 610), (1069, 1070), (1248, 1248),
                (1270, 1270), (2304, 2559)],
}

COLLATION_CHARSET: dict[int, str] = {}
for _cs, _ranges in _RANGES.items():
    for _lo, _hi in _ranges:
        for _i in range(_lo, _hi + 1):
            COLLATION_CHARSET[_i] = _cs
del _cs, _ranges, _lo, _hi, _i

BINARY_COLLATION = 63

# MySQL charset name -> Python codec. None: no Python codec (values stay bytes).
# MySQL's "latin1" is Windows-1252 (with the 5 undefined bytes mapped through), handled below.
CHARSET_CODEC: dict[str, str | None] = {
    "armscii8": None, "ascii": "ascii", "big5": "big5", "binary": None,
    "cp1250": "cp1250", "cp1251": "cp1251", "cp1256": "cp1256", "cp1257": "cp1257",
    "cp850": "cp850", "cp852": "cp852", "cp866": "cp866", "cp932": "cp932", "dec8": None,
    "eucjpms": "euc_jp", "euckr": "cp949", "gb18030": "gb18030", "gb2312": "gb2312", "gbk": "gbk",
    "geostd8": None, "greek": "iso8859_7", "hebrew": "iso8859_8", "hp8": None, "keybcs2": None,
    "koi8r": "koi8_r", "koi8u": "koi8_u", "latin1": "mysql_latin1", "latin2": "iso8859_2",
    "latin5": "iso8859_9", "latin7": "iso8859_13", "macce": "mac_latin2", "macroman": "mac_roman",
    "sjis": "shift_jis", "swe7": None, "tis620": "tis_620", "ucs2": "utf_16_be", "ujis": "euc_jp",
    "utf16": "utf_16_be", "utf16le": "utf_16_le", "utf32": "utf_32_be", "utf8mb3": "utf_8",
    "utf8mb4": "utf_8", "utf8": "utf_8",
}


def charset_of(collation_id: int | None) -> str | None:
    """Character set name for a collation id, or None when unknown."""
    if collation_id is None:
        return None
    return COLLATION_CHARSET.get(collation_id)


def _decode_mysql_latin1(data: bytes) -> str:
    try:
        return data.decode("cp1252")
    except UnicodeDecodeError:
        # The 5 bytes cp1252 leaves undefined map to U+0081.. in MySQL's latin1.
        return "".join(
            bytes((b,)).decode("cp1252") if b not in (0x81, 0x8D, 0x8F, 0x90, 0x9D) else chr(b)
            for b in data
        )


def _tokens(data: bytes, lead2: frozenset, lead3: frozenset = frozenset()):
    """Split multi-byte text into characters (lead bytes of 2- and 3-byte characters)."""
    i, n = 0, len(data)
    while i < n:
        b = data[i]
        k = 3 if b in lead3 else 2 if b in lead2 else 1
        yield data[i:i + k]
        i += k


_SJIS_LEADS = frozenset(list(range(0x81, 0xA0)) + list(range(0xE0, 0xFD)))
_DBCS_LEADS = frozenset(range(0x81, 0xFF))
_EUC_LEADS2 = frozenset([0x8E] + list(range(0xA1, 0xFF)))
_EUC_LEADS3 = frozenset([0x8F])


def _euc_pua(tok: bytes) -> str | None:
    """EUC-JP user-defined rows F5-FE (and 8F F5-FE) -> U+E000.. (as MySQL's ujis/eucjpms)."""
    if len(tok) == 2 and tok[0] >= 0xF5:
        return chr(0xE000 + (tok[0] - 0xF5) * 94 + (tok[1] - 0xA1))
    if len(tok) == 3 and tok[1] >= 0xF5:
        return chr(0xE3AC + (tok[1] - 0xF5) * 94 + (tok[2] - 0xA1))
    return None


def _euc_to_sjis(c1: int, c2: int) -> bytes:
    j1, j2 = c1 - 0x80, c2 - 0x80
    s1 = (j1 + 1) // 2 + (0x70 if j1 <= 0x5E else 0xB0)
    s2 = j2 + (0x1F if j2 <= 0x5F else 0x20) if j1 % 2 else j2 + 0x7E
    return bytes((s1, s2))


def _char_ujis(tok: bytes) -> str:
    if tok == b"\xa1\xc0":
        return "\\"          # JIS X 0208 1-32 REVERSE SOLIDUS (Python: U+FF3C)
    return _euc_pua(tok) or tok.decode("euc_jp")


def _char_eucjpms(tok: bytes) -> str:
    """eucJP-ms: JIS X 0208 with Windows (cp932) mappings, NEC/IBM extensions, user-defined."""
    pua = _euc_pua(tok)
    if pua is not None:
        return pua
    if len(tok) == 2 and tok[0] == 0x8E:
        return tok[1:].decode("cp932")
    if len(tok) == 2 and tok[0] >= 0xA1 and 0xA1 <= tok[1] <= 0xFE:
        return _euc_to_sjis(tok[0], tok[1]).decode("cp932")
    if len(tok) == 3 and tok[1] in (0xF3, 0xF4) and 0xA1 <= tok[2] <= 0xFE:
        from binlog_parser.rows.charset_tables import EUCJPMS_IBM
        i = (tok[1] - 0xF3) * 94 + tok[2] - 0xA1 - (0xF3 - 0xA1)
        c = EUCJPMS_IBM[i] if 0 <= i < len(EUCJPMS_IBM) else "\ufffe"
        if c == "\ufffe":
            raise UnicodeDecodeError("eucjpms", tok, 0, 3, "unmapped")
        return c
    if tok == b"\x8f\xa2\xb7":
        return "\uff5e"
    if tok == b"\x8f\xa2\xc3":
        return "\uffe4"
    return tok.decode("euc_jp")


def _tokenized(char, leads2, leads3=frozenset(), fast_codec=None, needs_slow=None):
    """A decoder that maps character by character (``char(token) -> str``, raising
    UnicodeDecodeError for an unmapped one); ``fast_codec`` is tried first unless
    ``needs_slow(data)``."""
    def dec(data: bytes):
        if fast_codec is not None and not needs_slow(data):
            try:
                return data.decode(fast_codec)
            except UnicodeDecodeError:
                return data
        try:
            return "".join(char(t) for t in _tokens(data, leads2, leads3))
        except (UnicodeDecodeError, IndexError):
            return data
    return dec


def _big5_char(tok: bytes) -> str:
    from binlog_parser.rows.charset_tables import BIG5_OVERRIDES
    return BIG5_OVERRIDES.get(tok) or tok.decode("big5")


def _special_decoder(charset: str):
    """Charsets where Python's codec differs from the server's mapping (checked exhaustively
    against MariaDB 10.11, see charset_tables.py)."""
    from binlog_parser.rows import charset_tables as ct
    table = ct.SINGLE_BYTE.get(charset)
    if table is not None:
        import codecs

        def dec_table(data: bytes):
            try:
                return codecs.charmap_decode(data, "strict", table)[0]
            except UnicodeDecodeError:
                return data
        return dec_table
    if charset == "sjis":  # Shift_JIS, but 81 5F is U+005C (Python: U+FF3C)
        return _tokenized(lambda t: "\\" if t == b"\x81\x5f" else t.decode("shift_jis"), _SJIS_LEADS,
                          fast_codec="shift_jis", needs_slow=lambda d: b"\x81\x5f" in d)
    if charset == "big5":  # + ETEN F9D6-F9FE; a few codes the server maps to U+FFFD
        keys = tuple(ct.BIG5_OVERRIDES)
        return _tokenized(_big5_char, _DBCS_LEADS, fast_codec="big5",
                          needs_slow=lambda d: any(k in d for k in keys))
    if charset == "ujis":
        return _tokenized(_char_ujis, _EUC_LEADS2, _EUC_LEADS3, fast_codec="euc_jp",
                          needs_slow=lambda d: b"\xa1\xc0" in d or any(b >= 0xF5 for b in d))
    if charset == "eucjpms":
        return _tokenized(_char_eucjpms, _EUC_LEADS2, _EUC_LEADS3)
    return None


_SPECIAL = frozenset(["sjis", "big5", "ujis", "eucjpms", "latin2", "latin5", "latin7", "cp1250",
                      "cp1251", "cp1256", "cp1257", "cp850", "cp852", "cp866", "koi8r", "koi8u",
                      "greek", "hebrew", "tis620", "macce", "macroman", "ascii", "dec8", "hp8",
                      "swe7", "keybcs2", "armscii8", "geostd8"])


def make_text_decoder(charset: str | None):
    """A ``bytes -> str | bytes`` function for a charset.

    Binary / unknown / codec-less charsets return the bytes unchanged; bytes that are invalid in
    the charset (or that the server itself cannot convert) also come back unchanged (raw),
    never replaced or dropped. Mappings follow the server's, not Python's, where they differ.
    """
    if charset in _SPECIAL:
        return _special_decoder(charset)
    codec = CHARSET_CODEC.get(charset) if charset else None
    if codec is None:
        return None
    if codec == "mysql_latin1":
        return _decode_mysql_latin1
    if codec == "utf_8":
        def dec_utf8(data: bytes):
            try:
                return data.decode("utf-8")
            except UnicodeDecodeError:
                return data
        dec_utf8.python_codec = "utf-8"  # type: ignore[attr-defined]  # lets callers inline it
        return dec_utf8

    def dec(data: bytes):
        try:
            return data.decode(codec)
        except UnicodeDecodeError:
            return data
    return dec
