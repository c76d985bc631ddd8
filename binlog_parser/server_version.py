"""What a FORMAT_DESCRIPTION's server version string implies for decoding.

Pure string rules taken from MySQL's ``do_server_version_split`` / ``checksum_version_split``
and the pre-GA "-a_drop" event numbering (``event_type_permutation``). A module of its own
because both the framing core and the event decoders/encoders need them.
"""

from __future__ import annotations


def server_version_split(version: str) -> tuple[int, int, int]:
    """MySQL's do_server_version_split: ``X.Y.Zabc`` -> (X, Y, Z), ``X.Yabc`` -> (X, Y, 0);
    the first number must be followed by a dot and every number be < 256, else (0, 0, 0)."""
    parts = [0, 0, 0]
    i, n = 0, len(version)
    for k in range(3):
        j = i
        while j < n and "0" <= version[j] <= "9":  # ASCII only: "²".isdigit() is True
            j += 1
        number = int(version[i:j]) if j > i else 0
        nxt = version[j] if j < n else ""
        if number < 256 and (nxt == "." or k != 0):
            parts[k] = number
        else:
            return (0, 0, 0)
        i = j + 1 if nxt == "." else j
    return (parts[0], parts[1], parts[2])


#: Pre-GA "-a_drop" trees numbered events differently (MySQL's event_type_permutation).
DROP_PERMUTATION = (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 19, 20, 21, 22, 16, 17, 18)


def is_drop_version(v: str) -> bool:
    """Whether ``v`` names a pre-GA 5.1/5.2 "-a_drop" server (permuted event type codes)."""
    if len(v) < 13 or v[0] != "5" or v[1] != "." or v[3] != "." or v[5:12] != "-a_drop":
        return False
    return ((v[2] == "1" and "1" <= v[4] <= "5" and v[12] == "5")
            or (v[2] == "1" and v[4] == "4" and v[12] == "6")
            or (v[2] == "2" and "0" <= v[4] <= "2" and v[12] == "6"))


def fde_has_checksum_alg(server_version: str) -> bool:
    """Whether a FORMAT_DESCRIPTION written by this server ends with alg byte + CRC room.

    MySQL >= 5.6.1 (``checksum_version_split``), MariaDB >= 5.3.0.
    """
    split = server_version_split(server_version)
    if "mariadb" in server_version.lower():
        return split >= (5, 3, 0)
    return split >= (5, 6, 1)


def decode_version(raw: bytes | memoryview) -> str:
    """The NUL-terminated server version field of START_V3 / FORMAT_DESCRIPTION."""
    return bytes(raw).split(b"\x00", 1)[0].decode("latin-1")
