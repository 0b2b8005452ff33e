"""Regenerate overlap/trace/protos/*.desc from the .proto files beside them.

The package loads its schemas from these serialized FileDescriptorSets into a private descriptor
pool instead of shipping protoc's generated *_pb2.py: generated code pins the protobuf runtime to
the generator's version, and a private pool never collides with the copies of the same messages
that xprof and jaxlib register in the default pool. Needs grpcio-tools (a dev dependency).

    python tools/gen_protos.py          # rewrite the .desc files
    python tools/gen_protos.py --check  # exit 1 if they are stale (the tests call this)
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

PROTO_DIR = Path(__file__).resolve().parent.parent / "overlap" / "trace" / "protos"
NAMES = ("xplane", "hlo")


def generate(name: str) -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / f"{name}.desc"
        subprocess.run(
            [sys.executable, "-m", "grpc_tools.protoc", f"-I{PROTO_DIR}",
             f"--descriptor_set_out={out}", f"{name}.proto"],
            check=True,
        )
        return out.read_bytes()


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for name in NAMES:
        fresh = generate(name)
        target = PROTO_DIR / f"{name}.desc"
        if check:
            if not target.exists() or target.read_bytes() != fresh:
                stale.append(str(target))
        else:
            target.write_bytes(fresh)
    if stale:
        print("stale descriptor sets (run python tools/gen_protos.py): " + ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
