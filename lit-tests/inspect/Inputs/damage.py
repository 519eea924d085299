"""Runs `truenoc inspect` on every single-byte-flipped copy of a bundle, and on truncated copies.

Usage: damage.py TRUENOC BUNDLE. Prints one summary line; exits 1 on the first copy that is not
rejected with exit status 1 and an "error:" message (a crash exits with a signal instead).
Truncation is checked at every 16th length here; test/bundle_test.cpp checks every length.
"""
import subprocess
import sys


def rejected(truenoc, data):
    r = subprocess.run([truenoc, "inspect", "-"], input=data, capture_output=True)
    return r.returncode == 1 and r.stderr.startswith(b"error: ") and not r.stdout


def main():
    truenoc, path = sys.argv[1], sys.argv[2]
    data = open(path, "rb").read()
    for i in range(len(data)):
        flipped = bytearray(data)
        flipped[i] ^= 0xFF
        if not rejected(truenoc, bytes(flipped)):
            print("byte %d flipped: not rejected" % i)
            return 1
    cuts = range(0, len(data), 16)
    for n in cuts:
        if not rejected(truenoc, data[:n]):
            print("truncation to %d bytes: not rejected" % n)
            return 1
    print("all %d flipped copies and %d truncated copies rejected with exit status 1" % (len(data), len(cuts)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
