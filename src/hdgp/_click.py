"""Click option helpers shared by ``hdgp`` and ``hdgp bench``: lists of names."""

from __future__ import annotations

import click

__all__ = ["ListOption", "split_list"]


def split_list(values) -> list[str]:
    """Accept ``--models A B`` (extra args), ``--models A --models B`` and ``--models A,B``.

    A quoted word stays one name, so labels with spaces work (``--models "DPA-GP-ARD J=5"``).
    """
    out = []
    for v in values or ():
        out += [p.strip() for p in v.split(",") if p.strip()]
    return out


class ListOption(click.Option):
    """An option that takes every following word up to the next option (``--models RBF-ARD GAM``)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("multiple", True)
        super().__init__(*args, **kwargs)

    def add_to_parser(self, parser, ctx):
        result = super().add_to_parser(parser, ctx)
        for name in self.opts:
            opt = parser._long_opt.get(name) or parser._short_opt.get(name)
            if opt is None:
                continue
            original = opt.process

            def process(value, state, _original=original):
                values = [value]
                while state.rargs and not state.rargs[0].startswith("-"):
                    values.append(state.rargs.pop(0))
                for v in values:
                    _original(v, state)

            opt.process = process
        return result
