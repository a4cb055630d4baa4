"""Click helpers shared by ``hdgp`` and ``hdgp bench``: lists of names, subcommands loaded on use."""

from __future__ import annotations

import importlib

import click

__all__ = ["LazyGroup", "ListOption", "split_list"]


class _LazyCommands(dict):
    """A group's ``commands``: the lazy ones appear as keys and are imported when looked up."""

    def __init__(self, lazy: dict):
        super().__init__()
        self.lazy = lazy

    def loaded(self, name) -> bool:
        return dict.__contains__(self, name)

    def __missing__(self, name):
        if name not in self.lazy:
            raise KeyError(name)
        module, attribute, _ = self.lazy[name]
        command = getattr(importlib.import_module(module), attribute)
        self[name] = command
        return command

    def __contains__(self, name):
        return dict.__contains__(self, name) or name in self.lazy

    def get(self, name, default=None):
        return self[name] if name in self else default

    def __iter__(self):
        return iter(sorted(set(dict.keys(self)) | set(self.lazy)))

    def __len__(self):
        return len(set(dict.keys(self)) | set(self.lazy))

    def keys(self):
        return list(self)

    def items(self):
        return [(name, self[name]) for name in self]

    def values(self):
        return [self[name] for name in self]


class LazyGroup(click.Group):
    """A group whose subcommands ``lazy_commands`` (name → (module, attribute, short help)) are
    imported only when run or asked for their help; the group's own ``--help`` lists them with the
    given short help, importing nothing."""

    def __init__(self, *args, lazy_commands=None, **kwargs):
        super().__init__(*args, **kwargs)
        commands = _LazyCommands(dict(lazy_commands or {}))
        commands.update(self.commands)
        self.commands = commands

    def list_commands(self, ctx):
        return list(self.commands)

    def format_commands(self, ctx, formatter):
        rows = []
        for name in self.list_commands(ctx):
            if not self.commands.loaded(name):
                rows.append((name, self.commands.lazy[name][2]))
            else:
                command = self.commands[name]
                if not command.hidden:
                    rows.append((name, command.get_short_help_str(formatter.width - 6 - len(name))))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


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
