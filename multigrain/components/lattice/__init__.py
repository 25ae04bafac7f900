"""Lattices: the ``Lattice``/``LatticeBatch`` types, builders (``lexicon``, ``segmenter``,
``voting``, ``union``), the on-disk cache (``with_lattices``) and the structure functions
(relations, distances, containment, segments) computed on the device."""
