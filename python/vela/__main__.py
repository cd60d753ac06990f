"""``python -m vela COMMAND ...``: runs the ``vela`` command line tool (serve, generate, bench,
...) with the same arguments."""

from __future__ import annotations

import os
import shutil
import sys
from typing import List, Optional


def find_cli() -> Optional[str]:
    """The vela binary: $VELA_CLI, the one installed with this package, the build tree's, or
    the first on PATH."""
    candidates = [os.environ.get("VELA_CLI"),
                  os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "vela")]
    try:
        from ._build_paths import VELA_CLI
        candidates.append(VELA_CLI)
    except ImportError:
        pass
    candidates.append(shutil.which("vela"))
    for path in candidates:
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def main(argv: List[str]) -> int:
    cli = find_cli()
    if cli is None:
        print("python -m vela: the vela command line tool was not found (set VELA_CLI, or put "
              "vela on PATH)", file=sys.stderr)
        return 127
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(cli, [cli] + argv)  # the tool replaces this process: signals and exit code are its
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
