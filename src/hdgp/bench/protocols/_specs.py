"""The dataclasses a protocol is made of: data sets, models, paper references and the protocol itself."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from .._checks import (as_sequence, build_entry, check_choice, check_int_sequence, check_mapping, check_name,
                       check_optional_str, check_str, check_str_sequence)

__all__ = ["DatasetSpec", "ModelSpec", "ReferenceSpec", "Protocol", "NORMALISATIONS", "SOURCES", "MODEL_SOURCES"]

#: How inputs and target are scaled before the model sees them (training statistics only).
NORMALISATIONS = ("zscore", "x-only", "y-only", "none")
#: Where a data set comes from: :func:`hdgp.data.load`, the SIGP paper's files, or the OAK paper's splits.
SOURCES = ("registry", "sigp-fixed", "sigp-random", "bayesian-benchmarks", "sklearn")
#: What a model names: an hdgp preset (:func:`hdgp.preset`) or a peer estimator of another library
#: (:data:`hdgp.bench.peers.PEERS`).
MODEL_SOURCES = ("preset", "peer")
_TASKS = ("regression", "classification")
_TARGET_TRANSFORMS = (None, "exp")


@dataclass(frozen=True)
class DatasetSpec:
    """One data set of a protocol.

    Parameters
    ----------
    name : str
        Name used in results and reports.
    source : {"registry", "sigp-fixed", "sigp-random", "bayesian-benchmarks", "sklearn"}
        ``"registry"``: :func:`hdgp.data.load` (UCI fixed splits, synthetic, sklearn);
        ``"sigp-fixed"``: the SIGP paper's fixed train/test split;
        ``"sigp-random"``: seeded random splits holding out ``n_test`` rows;
        ``"bayesian-benchmarks"``: the OAK paper's own splits, standardised with
        all rows' statistics as that paper's suite did
        (:mod:`hdgp.data.bayesian_benchmarks`; ``name`` is the paper's);
        ``"sklearn"``: a table bundled with scikit-learn (``load_<name>``, e.g.
        ``"breast_cancer"``, ``"wine"``, ``"iris"``; no download), seeded random
        splits holding out 10 % of the rows (:data:`hdgp.bench.datasets.SKLEARN_TABLES`).
    loader_name : str or None
        Name passed to the loader when it differs from ``name``.
    task : {"regression", "classification"}
    kwargs : dict
        Extra keyword arguments of the loader (e.g. ``n`` for synthetic sets).
    n_test : int or None
        Test-set size for ``"sigp-random"``.
    positive_label : float or None
        The class F1 is computed for (classification).
    target_transform : {None, "exp"}
        Map applied to the stored target before splitting into train and test.
        ``"exp"`` undoes a log target: the shared ``yacht`` file (Wilson's
        collection) holds log(resistance) minus its mean, while the OAK paper used
        the raw UCI file; since the protocols z-score the target, exp(y) is the raw
        target up to a constant factor that the z-scoring removes.
    """

    name: str
    source: str = "registry"
    loader_name: str | None = None
    task: str = "regression"
    kwargs: dict = field(default_factory=dict)
    n_test: int | None = None
    positive_label: float | None = None
    target_transform: str | None = None

    def __post_init__(self):
        check_name("DatasetSpec", "name", self.name)
        owner = f"DatasetSpec {self.name!r}"
        check_optional_str(owner, "loader_name", self.loader_name)
        check_mapping(owner, "kwargs", self.kwargs)
        if self.n_test is not None:
            check_int_sequence(owner, "n_test", [self.n_test], minimum=1)
        check_choice(owner, "target_transform", self.target_transform, _TARGET_TRANSFORMS)
        check_choice(owner, "source", self.source, SOURCES)
        check_choice(owner, "task", self.task, _TASKS)
        if self.source == "sigp-random" and not self.n_test:
            raise ValueError(f"DatasetSpec {self.name!r}: source 'sigp-random' needs n_test.")


@dataclass(frozen=True)
class ModelSpec:
    """A model of a protocol: a display label, a preset name and parameter overrides.

    ``datasets`` limits the model to those data sets (default: every data set of its
    ``task``), e.g. to keep a model off a data set it cannot fit in reasonable time.

    ``source="peer"`` makes ``preset`` name a peer estimator of another library from
    :data:`hdgp.bench.peers.PEERS` (e.g. ``"HistGradientBoostingRegressor"``), the model a
    practitioner would otherwise use; it is built, seeded and scored like a preset.
    """

    label: str
    preset: str
    params: dict = field(default_factory=dict)
    task: str = "regression"
    datasets: tuple | None = None
    source: str = "preset"

    def __post_init__(self):
        check_name("ModelSpec", "label", self.label)
        owner = f"ModelSpec {self.label!r}"
        check_str(owner, "preset", self.preset)
        check_mapping(owner, "params", self.params)
        check_choice(owner, "task", self.task, _TASKS)
        check_choice(owner, "source", self.source, MODEL_SOURCES)
        if self.datasets is not None:  # lists from a protocol file
            object.__setattr__(self, "datasets", as_sequence(owner, "datasets", self.datasets))
            check_str_sequence(owner, "datasets", self.datasets)

    def runs_on(self, dataset: DatasetSpec) -> bool:
        """Whether this model has tasks on ``dataset`` (same task kind, not excluded)."""
        return self.task == dataset.task and (self.datasets is None or dataset.name in self.datasets)


@dataclass(frozen=True)
class ReferenceSpec:
    """Where a protocol's published numbers are and how to read them.

    Parameters
    ----------
    file : str
        CSV file name inside the reference folder.
    metric : str
        Our metric the numbers compare with (e.g. ``"rmse"``, ``"nlpd"``).
    value_column : str
    spread_column : str or None
        Column with the paper's spread, if any.
    spread : {"std", "2std", None}
        What ``spread_column`` holds.
    n_repeats : int or None
        How many repetitions the paper's mean and spread summarise (for the t-test).
    filters : dict
        ``{column: value}`` rows must match (e.g. the table number).
    sign : {1, -1}
        Multiply the paper's values by this (log-likelihood -> NLPD is ``-1``).
    dataset_aliases, model_aliases : dict
        Paper name -> our name. An alias may be a list of our names, to compare one
        paper row with several of our variants (models) or splits (data sets).
        Unmatched paper rows are kept under their own name.
    """

    file: str
    metric: str
    value_column: str = "value"
    spread_column: str | None = None
    spread: str | None = None
    n_repeats: int | None = None
    filters: dict = field(default_factory=dict)
    sign: int = 1
    dataset_aliases: dict = field(default_factory=dict)
    model_aliases: dict = field(default_factory=dict)

    def __post_init__(self):
        check_str("ReferenceSpec", "file", self.file)
        owner = f"ReferenceSpec {self.file!r}"
        check_str(owner, "metric", self.metric)
        for name in ("filters", "dataset_aliases", "model_aliases"):
            check_mapping(owner, name, getattr(self, name))
        if self.spread not in ("std", "2std", None):
            raise ValueError(f"ReferenceSpec {self.file!r}: spread must be 'std', '2std' or None, got {self.spread!r}.")


@dataclass(frozen=True)
class Protocol:
    """A complete benchmark: data sets × models × splits × seeds, metrics and references.

    Parameters
    ----------
    name, description : str
    datasets : tuple of DatasetSpec
    models : tuple of ModelSpec
    splits : tuple of int
        Split indices; a data set with fewer splits runs those it has.
    seeds : tuple of int
        Model seeds (``random_state``); each split runs once per seed.
    metrics : tuple of str
        Metrics shown in reports (every task stores all metrics of its task type).
    normalisation : {"zscore", "x-only", "y-only", "none"}
        ``"zscore"``: inputs and target z-scored with training statistics (metrics
        on the standardised target); ``"x-only"``: inputs only (metrics in the
        target's units); ``"y-only"``: target only (inputs reach the model in their
        natural units, for models that warp them themselves); ``"none"``: raw data.
    estimator_params : dict
        Parameters set on every model that accepts them (e.g. the paper's optimiser).
    references : tuple of ReferenceSpec
    notes : str
        Departures from the paper, shown in every report header.
    plots : tuple of str
        Extra plot hooks (see :mod:`hdgp.bench.plots`) run by ``report``.
    extras : tuple of str
        Extra per-task measurements (see :data:`hdgp.bench.task.EXTRAS`), e.g.
        ``"truncation-curve"`` for models that rank additive terms.
    """

    name: str
    description: str
    datasets: tuple
    models: tuple
    splits: tuple = tuple(range(10))
    seeds: tuple = (0,)
    metrics: tuple = ("rmse", "nlpd")
    normalisation: str = "zscore"
    estimator_params: dict = field(default_factory=dict)
    references: tuple = ()
    notes: str = ""
    plots: tuple = ("rmse",)
    extras: tuple = ()

    def __post_init__(self):
        check_name("Protocol", "name", self.name)
        owner = f"Protocol {self.name!r}"
        check_str(owner, "description", self.description)
        check_optional_str(owner, "notes", self.notes)
        check_int_sequence(owner, "splits", self.splits, minimum=0)
        check_int_sequence(owner, "seeds", self.seeds)
        for name in ("metrics", "plots", "extras"):
            check_str_sequence(owner, name, getattr(self, name))
        check_mapping(owner, "estimator_params", self.estimator_params)
        check_choice(owner, "normalisation", self.normalisation, NORMALISATIONS)
        for kind, items in (("data set", [d.name for d in self.datasets]), ("model", [m.label for m in self.models])):
            dupes = sorted({x for x in items if items.count(x) > 1})
            if dupes:
                raise ValueError(f"Protocol {self.name!r}: duplicate {kind} names {dupes}.")
        names = {d.name for d in self.datasets}
        for m in self.models:
            unknown = sorted(set(m.datasets or ()) - names)
            if unknown:
                raise ValueError(f"Protocol {self.name!r}: model {m.label!r} names unknown data sets {unknown}.")

    def dataset(self, name: str) -> DatasetSpec:
        """The data set called ``name`` (ValueError listing valid names otherwise)."""
        for d in self.datasets:
            if d.name == name:
                return d
        raise ValueError(
            f"Unknown data set {name!r} for protocol {self.name!r}. Valid: {', '.join(d.name for d in self.datasets)}."
        )

    def model(self, label: str) -> ModelSpec:
        """The model labelled ``label`` (case-insensitive; ValueError listing valid labels otherwise)."""
        for m in self.models:
            if m.label.lower() == label.lower():
                return m
        raise ValueError(
            f"Unknown model {label!r} for protocol {self.name!r}. Valid: {', '.join(m.label for m in self.models)}."
        )

    def to_dict(self) -> dict:
        """A JSON-serialisable dict (the inverse of :meth:`from_dict`)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, spec: dict) -> "Protocol":
        """Build a protocol from a dict with the constructor's fields (lists allowed).

        Raises
        ------
        ValueError
            A missing, unknown or malformed field; the message names the protocol,
            the entry (e.g. ``models[2]``) and the field.
        """
        known = list(cls.__dataclass_fields__)
        if not isinstance(spec, dict):
            raise ValueError(f"A protocol is a JSON object with the fields {known}, got {type(spec).__name__}.")
        spec = dict(spec)
        unknown = sorted(set(spec) - set(known))
        if unknown:
            raise ValueError(f"Unknown protocol field(s) {unknown}; valid fields: {sorted(known)}.")
        missing = [key for key in ("name", "description", "datasets", "models") if key not in spec]
        if missing:
            raise ValueError(f"Protocol {spec.get('name')!r}: missing required field(s) {missing}.")
        check_name("Protocol", "name", spec["name"])
        owner = f"Protocol {spec['name']!r}"
        for key, entry_cls in (("datasets", DatasetSpec), ("models", ModelSpec), ("references", ReferenceSpec)):
            entries = as_sequence(owner, key, spec.get(key, ()))
            spec[key] = tuple(build_entry(entry_cls, owner, key, i, raw) for i, raw in enumerate(entries))
        for key in ("splits", "seeds", "metrics", "plots", "extras"):
            if key in spec:
                spec[key] = as_sequence(owner, key, spec[key])
        return cls(**spec)
