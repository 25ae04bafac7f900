"""``FileReader``, the base of the registered readers: lazy reading of one data file,
``max_instances``, the hash-bucket ``split`` option, and lattices when a ``lattice_builder`` is
configured."""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, ClassVar, Iterator, Literal, Optional

from multigrain.components.readers.files import in_fraction
from multigrain.platform.data import Instance
from multigrain.platform.errors import ConfigurationError, DataError
from multigrain.platform.kinds import Reader
from multigrain.platform.weights import file_kind

SPLITS = ("all", "train", "dev", "test")

if TYPE_CHECKING:
    from multigrain.components.lattice.builder import LatticeBuilder


class FileReader(Reader):
    """Reads one data file lazily into Instances.

    Subclasses implement ``_read(path)``, yielding every example of the file (each Instance with
    ``source=(path, line)``). ``read(path)`` keeps the examples of the configured ``split``,
    stops after ``max_instances`` kept examples and, when a ``lattice_builder`` is given, adds a
    lattice for each char-list field named in ``lattice_fields`` (``{"chars": "lattice"}``:
    field ``chars`` gets field ``lattice``).

    ``split`` cuts a file into train/dev/test by a stable hash of each example, so one file can
    feed several readers of a spec: with ``b = zlib.crc32(key.encode()) % 1000`` (``key``: the
    example's ``split_key_fields`` joined by TAB, lists of tokens joined without a separator),
    an example is test when ``b < test_fraction*1000``, dev when below
    ``(test_fraction+dev_fraction)*1000``, else train; ``"all"`` (the default) keeps every
    example. Identical texts land in the same split.

    A file with no example at all (an empty file) is a DataError.
    """

    #: char-list field -> the lattice field built for it
    lattice_fields: ClassVar[dict[str, str]] = {"chars": "lattice"}
    #: the fields whose text places an example in a split
    split_key_fields: ClassVar[tuple[str, ...]] = ("chars",)

    def __init__(
        self,
        lattice_builder: Optional["LatticeBuilder"] = None,
        cache_dir: Optional[str] = None,
        max_instances: Optional[int] = None,
        split: Literal["all", "train", "dev", "test"] = "all",
        dev_fraction: float = 0.1,
        test_fraction: float = 0.0,
    ):
        if split not in SPLITS:
            raise ConfigurationError(f"split must be one of {', '.join(map(repr, SPLITS))}, got {split!r}")
        if dev_fraction < 0 or test_fraction < 0 or dev_fraction + test_fraction > 1:
            raise ConfigurationError(f"dev_fraction ({dev_fraction}) and test_fraction ({test_fraction}) must be "
                                     f">= 0 and sum to at most 1")
        empty = {"dev": dev_fraction, "test": test_fraction}.get(split)
        if empty == 0:
            raise ConfigurationError(f"split={split!r} with {split}_fraction=0 keeps no example; set {split}_fraction")
        self.lattice_builder = lattice_builder
        self.cache_dir = cache_dir
        self.max_instances = max_instances
        self.split = split
        self.dev_fraction = dev_fraction
        self.test_fraction = test_fraction

    def read(self, path: str) -> Iterator[Instance]:
        path = str(path)
        instances = self._kept(path)
        if self.lattice_builder is not None:
            from multigrain.components.lattice.cache import with_lattices

            instances = with_lattices(
                instances,
                data_path=path,
                builder=self.lattice_builder,
                fields=self.lattice_fields,
                cache_dir=self.cache_dir,
            )
        yield from instances

    def annotate(self, instances: list[Instance]) -> list[Instance]:
        """Lattices for instances that did not come from a file (``predict`` input), built by
        the same builder as in training (no cache: there is no data file to key it by)."""
        if self.lattice_builder is None:
            return instances
        for field, lattice_field in self.lattice_fields.items():
            todo = [x for x in instances if field in x and lattice_field not in x]
            built = self.lattice_builder.build_many([list(x[field]) for x in todo]) if todo else []
            for instance, lattice in zip(todo, built):
                instance[lattice_field] = lattice
        return instances

    def _read(self, path: str) -> Iterator[Instance]:
        raise NotImplementedError

    def _split_key(self, instance: Instance) -> str:
        """The text whose stable hash places ``instance`` in a split (see the class docstring)."""
        values = (instance[field] for field in self.split_key_fields)
        return "\t".join(value if isinstance(value, str) else "".join(value) for value in values)

    def _include(self, instance: Instance) -> bool:
        """Whether an example belongs to the configured split (all of them by default)."""
        if self.split == "all":
            return True
        key = self._split_key(instance)
        if in_fraction(key, 0.0, self.test_fraction):
            return self.split == "test"
        if in_fraction(key, self.test_fraction, self.test_fraction + self.dev_fraction):
            return self.split == "dev"
        return self.split == "train"

    def _kept(self, path: str) -> Iterator[Instance]:
        if not os.path.isfile(path):  # a FIFO would block, a device never ends
            raise DataError(path, None, f"not a data file ({file_kind(os.stat(path).st_mode)})"
                            if os.path.exists(path) else "no such file")
        if self.max_instances is not None and self.max_instances <= 0:
            return
        parsed = kept = 0
        for instance in self._read(path):
            parsed += 1
            if not self._include(instance):
                continue
            yield instance
            kept += 1
            if self.max_instances is not None and kept >= self.max_instances:
                return
        if parsed == 0:
            empty = os.path.exists(path) and os.path.getsize(path) == 0
            raise DataError(path, None, "empty file: no examples" if empty else "no examples found in the file")
