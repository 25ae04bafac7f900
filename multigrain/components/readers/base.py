"""``FileReader``, the base of the registered readers: lazy reading of one data file,
``max_instances``, split filters, and lattices when a ``lattice_builder`` is configured."""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, ClassVar, Iterator, Optional

from multigrain.platform.data import Instance
from multigrain.platform.errors import DataError
from multigrain.platform.kinds import Reader

if TYPE_CHECKING:
    from multigrain.components.lattice.builder import LatticeBuilder


class FileReader(Reader):
    """Reads one data file lazily into Instances.

    Subclasses implement ``_read(path)``, yielding every example of the file (each Instance with
    ``source=(path, line)``), and may override ``_include(instance)`` to keep only one split.
    ``read(path)`` stops after ``max_instances`` kept examples and, when a ``lattice_builder``
    is given, adds a lattice for each char-list field named in ``lattice_fields``
    (``{"chars": "lattice"}``: field ``chars`` gets field ``lattice``).

    A file with no example at all (an empty file) is a DataError.
    """

    #: char-list field -> the lattice field built for it
    lattice_fields: ClassVar[dict[str, str]] = {"chars": "lattice"}

    def __init__(
        self,
        lattice_builder: Optional["LatticeBuilder"] = None,
        cache_dir: Optional[str] = None,
        max_instances: Optional[int] = None,
    ):
        self.lattice_builder = lattice_builder
        self.cache_dir = cache_dir
        self.max_instances = max_instances

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

    def _include(self, instance: Instance) -> bool:
        """Whether an example belongs to the configured split (all of them by default)."""
        return True

    def _kept(self, path: str) -> Iterator[Instance]:
        if not os.path.isfile(path):
            raise DataError(path, None, "no such file")
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
