"""``python -m hdgp``: the command line (as the ``hdgp`` command)."""

from .cli import main

if __name__ == "__main__":
    main(prog_name="hdgp")
